"""The learning-rate protocol: every kind at its own best learning rate, chosen on validation.

``synthesizer compare run --lrs 1e-3 3e-3 1e-2`` (or a preset's ``lrs``) trains the first seed of every
(task, kind) at each learning rate, each rate an ordinary comparison in ``OUT/lr-<rate>/`` (the
preset's overrides, the user's ``--set``, then ``train.lr``). Each (task, kind) then takes the rate
whose run reached the lowest validation loss (:func:`~synthesizer.runs.results.lowest_valid_loss`; never a
test number), and the comparison in ``OUT/tuned/`` trains every seed of every kind at its chosen rate. Its
first seed is the sweep's run at that rate, read from the sweep's results.json (not trained again), so the
tuned comparison spends only the other seeds. A (task, kind) none of whose sweep runs finished with a
finite validation loss (all diverged or failed) trains at the preset's rate, and ``tuning.json`` says
so. ``OUT/tuning.json`` holds the sweep's validation losses and the choices, rewritten after each rate;
the tuned comparison's report states the rate of every kind. With ``--jobs`` above 1 the runs of all the
grid's rates (then of each round past its ends) train side by side (:mod:`.side_by_side`).

This is how MAD (Poli et al., 2024) and Zoology (Arora et al., 2023) compare architectures: each at
the best of a learning-rate sweep, so that no kind is judged at a rate chosen for another.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from ..runs.results import Results, lowest_valid_loss
from ..runs.files import LR_PREFIX, TUNED, TUNING_FILE, group_key, read_json, write_json
from ..runs.lock import FolderLock, comparison_lock
from .carry import carry_runs
from .plan import build_comparison, lr_override
from .side_by_side import train_side_by_side
from .study import Options, Study



def lr_folder(out: Path, lr: float) -> Path:
    """``OUT/lr-<rate>``, the rate as Python writes it shortest (``lr-0.003``)."""
    return out / f"{LR_PREFIX}{lr!r}"


def at_lr(study: Study, lr: float) -> Options:
    """The sweep's comparison at one rate: the first seed only, in ``OUT/lr-<rate>``, ``train.lr`` set last."""
    options = study.options
    return dataclasses.replace(options, lrs=(), seeds=1, out=lr_folder(study.out, lr),
                               overrides=(*options.overrides, lr_override(lr)), lr_by_run=())


def sweep_table(sweep: dict[float, Results]) -> dict[str, dict[str, dict[str, float | None]]]:
    """``{task group: {kind: {rate: validation loss or None}}}`` of the first seed at every rate."""
    table: dict[str, dict[str, dict[str, float | None]]] = {}
    for lr, results in sweep.items():
        for record in results.runs:
            if record.get("seed", 0) != 0:
                continue
            key = group_key(record["task"], record["data"])
            table.setdefault(key, {}).setdefault(record["attention"], {})[repr(lr)] = lowest_valid_loss(record)
    return table


def choose(table: dict[str, dict[str, dict[str, float | None]]]) -> dict[str, dict[str, float | None]]:
    """Each (task group, kind)'s rate with the lowest validation loss; None where no rate gave one."""
    chosen: dict[str, dict[str, float | None]] = {}
    for key, kinds in table.items():
        for kind, losses in kinds.items():
            finite = {lr: loss for lr, loss in losses.items() if loss is not None}
            chosen.setdefault(key, {})[kind] = float(min(finite, key=finite.get)) if finite else None
    return chosen


def tuned_options(study: Study, chosen: dict[str, dict[str, float | None]]) -> Options:
    """The tuned comparison: every seed, each (task, kind) at its chosen rate, in ``OUT/tuned``."""
    by_run = tuple((key, kind, lr) for key, kinds in chosen.items() for kind, lr in kinds.items() if lr is not None)
    return dataclasses.replace(study.options, lrs=(), out=study.out / TUNED, lr_by_run=by_run)


def write_tuning(out: Path, lrs: tuple[float, ...], table: dict, chosen: dict, done: bool = False) -> dict:
    """``OUT/tuning.json``: the rates swept, the first seed's validation loss at each, the choices, and
    whether the sweep is complete (``done``: every choice bracketed, or the extensions spent). Returns what
    it wrote."""
    tuning = {"lrs": list(lrs), "rule": "lowest validation loss of seed 0", "valid_loss": table, "chosen": chosen,
              "done": done}
    write_json(out / TUNING_FILE, tuning)
    return tuning


def read_tuning(out: Path) -> dict | None:
    """The tuning.json of a learning-rate study's folder, or None where there is none."""
    path = Path(out) / TUNING_FILE
    return read_json(path) if path.is_file() else None


def edge_rates(table: dict[str, dict[str, dict[str, float | None]]], up: float, down: float,
               grid: tuple[float, ...] = ()) -> dict[float, dict[str, list[str]]]:
    """``{rate: {task group: kinds}}`` to sweep next: a (task group, kind) whose best rate is the largest it was
    tried at goes on to that rate times ``up``, one whose best is its smallest to that rate divided by ``down``
    (2 significant digits), so that every choice ends up bracketed by a rate on each side (or by a run that
    diverged). Per task group: a kind bracketed on one task is not trained again on it for another's sake.
    Past an end of the ``grid``, a kind goes at most ``MAX_EXTENSIONS`` rates, counted from the rates it was
    tried at, so that a study resumed (or read again under another rule) does not go further."""
    wanted: dict[float, dict[str, list[str]]] = {}
    for key, kinds in table.items():
        for kind, losses in kinds.items():
            finite = {float(lr): loss for lr, loss in losses.items() if loss is not None}
            if not finite:
                continue
            tried, best = sorted(float(lr) for lr in losses), min(finite, key=finite.get)
            past_top = sum(lr > max(grid) for lr in tried) if grid else 0
            past_bottom = sum(lr < min(grid) for lr in tried) if grid else 0
            for edge, rate, past in ((tried[-1], best * up, past_top), (tried[0], best / down, past_bottom)):
                if best == edge and past < MAX_EXTENSIONS:
                    wanted.setdefault(float(f"{rate:.2g}"), {}).setdefault(key, []).append(kind)
    return wanted


MAX_EXTENSIONS = 2  # rates added past either end of the grid for a kind whose best is there, at most


def _sweep(study: Study, hooks, compare_fn: Callable, out: Path, lrs: tuple[float, ...]) -> dict:
    """Seed 0 of every kind at every rate, then, for a (task group, kind) whose best rate is at an end of what
    it was tried at, the next rate past that end (at most ``MAX_EXTENSIONS`` times); ``tuning.json`` after each.
    Returns the last, complete tuning.json's content."""
    quiet = dataclasses.replace(hooks, time_fn=None)
    sweep: dict[float, Results] = {}
    tasks = {plan.key: plan.name for plan in build_comparison(study, hooks.config_fn, lambda _: None).tasks}

    def asked(lr: float, by_key: dict[str, list[str]] | None) -> list[tuple[Options, str]]:
        """Seed 0 at ``lr``: of every kind on every task, or only of ``{task group: kinds}``, a task at a time."""
        return [(at_lr(study, lr), "")] if by_key is None else [
            (dataclasses.replace(at_lr(study, lr), kinds=kinds, baselines=[], tasks=(tasks[key],)),
             f" of {', '.join(kinds)} on {key}") for key, kinds in by_key.items()]

    def train(wanted: dict[float, dict[str, list[str]] | None]) -> None:
        """The comparisons of ``{rate: what it trains}``, their runs side by side first."""
        parts = {lr: asked(lr, by_key) for lr, by_key in sorted(wanted.items())}
        train_side_by_side([options for each in parts.values() for options, _ in each], hooks)
        for lr, each in parts.items():
            for options, which in each:
                hooks.log(f"learning rate {lr!r}, seed 0{which}: {lr_folder(out, lr)}")
                sweep[lr] = compare_fn(options, quiet)  # each call reads back the folder's earlier runs
            table = sweep_table(sweep)
            write_tuning(out, tuple(sorted(sweep)), table, choose(table))

    train(dict.fromkeys(lrs))
    if len(lrs) > 1:
        up, down = lrs[-1] / lrs[-2], lrs[1] / lrs[0]  # the grid's own steps
        # each round takes every kind it extends one rate further past the grid, and edge_rates stops a kind
        # MAX_EXTENSIONS past it (counting the rates of earlier sessions), so this many rounds are enough
        for _ in range(MAX_EXTENSIONS):
            wanted = edge_rates(sweep_table(sweep), up, down, lrs)
            if not wanted:
                break
            train(wanted)
    table = sweep_table(sweep)
    return write_tuning(out, tuple(sorted(sweep)), table, choose(table), done=True)


def compare_lrs(study: Study, hooks, compare_fn: Callable) -> Results:
    """The sweep (``OUT/lr-*``, first seed, no timing; extended past an end of the grid where a kind's
    best rate lies there), the choice, then the tuned comparison (``OUT/tuned``, every seed, timed as any
    comparison), each with ``compare_fn(options, hooks)``. Returns the tuned comparison's results."""
    lrs = tuple(sorted(study.lrs))
    out = study.out
    out.mkdir(parents=True, exist_ok=True)
    with FolderLock(out, "learning-rate study folder"):
        tuning = _sweep(study, hooks, compare_fn, out, lrs)
        chosen = tuning["chosen"]
        for key, kinds in chosen.items():
            listed = ", ".join(f"{kind} {lr!r}" if lr is not None else f"{kind} (no rate finished: the preset's)"
                               for kind, lr in kinds.items())
            hooks.log(f"{key}: learning rates chosen by validation loss: {listed}")
        tuned = tuned_options(study, chosen)
        carry_runs(tuned, hooks, [lr_folder(out, lr) for lr in tuning["lrs"]])  # each kind's first seed at its rate
        _keep_tuning(Path(tuned.out), tuning)
        return compare_fn(tuned, hooks)


def _keep_tuning(out: Path, tuning: dict) -> None:
    """The sweep into the tuned comparison's results.json, so that its report shows it wherever the folder
    is rendered (tuning.json stays beside the sweep's folders, which a committed report leaves out)."""
    out.mkdir(parents=True, exist_ok=True)
    with comparison_lock(out):
        results = Results.load_or_empty(out)
        if results.tuning != tuning:
            results.set_tuning(tuning)
            results.save(out)
