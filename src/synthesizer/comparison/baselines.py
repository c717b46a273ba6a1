"""The baselines study: every kind judged against the strongest vanilla, each at its own best learning rate.

A random synthesizer is a learned position-by-position attention matrix, and the mixtures add a
positional prior to vanilla's logits; a vanilla with learned absolute positions only may lose to them
for want of positions, not of attention. ``synthesizer compare run --preset baselines`` (or
``--positions S1 S2 ...`` on any preset) answers that, per task of the preset, in ``OUT/<task config>/``:

1. vanilla with each position scheme (``model.positions``: learned, sinusoidal, rope, relative, alibi,
   none), seed 0, at the preset's learning rate: ``positions-<scheme>/``;
2. the strongest scheme: the lowest validation loss of seed 0 (the learning-rate protocol's rule);
3. every kind with that scheme through the learning-rate protocol (:mod:`.tuning`: ``lr-*/``, then
   ``tuned/``, every seed; without learning rates, ``tuned/`` at the preset's rate). The claims are
   judged in ``tuned/``'s report;
4. the other seeds of every scheme (the intervals of what a scheme changes), reading the best scheme's
   runs from ``tuned/`` where vanilla kept the preset's rate (:mod:`.carry`);
5. for each kind with at least 10% more parameters than vanilla (random and random+vanilla, whose R
   holds ``H L^2`` per layer), vanilla widened in ``d_ff`` to the same count, at vanilla's chosen rate,
   every seed: ``matched-<kind>/``.

Stages 1, 4 and 5 are small comparisons (one scheme, or one widened vanilla, each); with ``--jobs`` above 1
their runs train side by side in their own folders first (:mod:`.side_by_side`), so that no job waits
for a comparison of one run, and each comparison then reads its runs back.

``study.json`` in ``OUT/<task config>/`` records the choices (the scheme, the rates, the widened
``d_ff``); ``OUT/report.md`` (report/baselines.py) reads the folders' results.json alone.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from ..attention.names import MODEL_POSITIONS
from ..report.baselines import strongest
from ..runs.results import Results, failed
from ..runs.files import MATCHED_PREFIX, POSITIONS_PREFIX, STUDY_FILE, write_json
from ..runs.lock import FolderLock
from .carry import carry_runs
from .plan import StudyResults, lr_override
from .side_by_side import train_side_by_side
from .study import Options, Study, resolve
from .tuning import TUNED, at_lr, read_tuning

MATCH_AT = 1.10  # a kind with at least this many times vanilla's parameters gets a vanilla of its size
VANILLA = "vanilla"
RULE = "every choice by the lowest validation loss of seed 0"


def positions_override(scheme: str) -> str:
    return f"model.positions={scheme}"


def task_folders(study: Study) -> list[tuple[str, int, Path]]:
    """(task config, its seeds, its study folder) of every task of the study."""
    seeds = study.seeds
    return [(t.config, min(seeds, t.max_seeds or seeds), study.out / t.config) for t in study.tasks]


def _vanilla_at(options: Options, scheme: str, folder: Path, seeds: int) -> Options:
    return dataclasses.replace(options, kinds=[VANILLA], baselines=[], seeds=seeds, out=folder,
                               overrides=(*options.overrides, positions_override(scheme)), lrs=(), lr_by_run=())


def matched_d_ff(vanilla: dict, kind: dict) -> int | None:
    """The ``d_ff`` that gives vanilla (its run record ``vanilla``) the parameter count of ``kind``'s run, or
    None where the kind has fewer than ``MATCH_AT`` times vanilla's. Every layer's feed-forward holds
    ``d_ff (2 d + 1) + d`` parameters (two linear maps with biases)."""
    total_v, total_k = vanilla["params"]["total"], kind["params"]["total"]
    if total_k < MATCH_AT * total_v:
        return None
    model = vanilla["config"]["model"]
    d, d_ff = model["d_model"], model.get("d_ff") or 4 * model["d_model"]
    ffn = vanilla["params"]["by_component"]["ffn"]
    layers = round(ffn / (d_ff * (2 * d + 1) + d))
    return d_ff + round((total_k - total_v) / (layers * (2 * d + 1)))


def _first_seed(results: Results, kind: str) -> dict | None:
    return next((r for r in results.runs if r["attention"] == kind and r.get("seed", 0) == 0 and not failed(r)), None)


def compare_baselines(study: Study, hooks, compare_fn: Callable) -> StudyResults:
    """The study of every task (see the module's steps), each with ``compare_fn(options, hooks)``; returns
    each task's tuned results (by config) and every tuned run."""
    schemes, lrs, out = study.positions, study.lrs, study.out
    out.mkdir(parents=True, exist_ok=True)
    quiet = dataclasses.replace(hooks, time_fn=None)
    done: dict[str, Results] = {}
    with FolderLock(out, "baselines study folder"):
        for config, seeds, folder in task_folders(study):
            task = dataclasses.replace(study.options, tasks=(config,), seeds=seeds, positions=(), widths=())
            # 1-2: vanilla with every scheme, seed 0; the strongest by validation
            parts = {s: _vanilla_at(task, s, folder / f"{POSITIONS_PREFIX}{s}", 1) for s in schemes}
            train_side_by_side(list(parts.values()), hooks)
            first = {s: compare_fn(part, quiet) for s, part in parts.items()}
            best = strongest(schemes, first)
            hooks.log(f"{config}: the strongest vanilla by seed 0's validation loss has positions={best}")
            write_json(folder / STUDY_FILE, {"positions": list(schemes), "strongest": best, "lrs": list(lrs),
                                             "rule": RULE})  # the choices so far; completed below
            # 3: every kind with it, each at its best rate
            kinds = dataclasses.replace(task, out=folder, lrs=lrs,
                                        overrides=(*task.overrides, positions_override(best)))
            if not lrs:
                kinds = dataclasses.replace(kinds, out=folder / TUNED)
            kinds_study = resolve(kinds)
            for lr in lrs:  # vanilla's seed 0 at the preset's rate is the scheme's run: read, not trained again
                carry_runs(at_lr(kinds_study, lr), hooks, [folder / f"{POSITIONS_PREFIX}{best}"])
            tuned = compare_fn(kinds, hooks)
            done[config] = tuned
            # 4: every scheme's other seeds, reading what tuned/ trained with the same config
            parts = [_vanilla_at(task, s, folder / f"{POSITIONS_PREFIX}{s}", seeds) for s in schemes]
            for part in parts:
                carry_runs(part, hooks, [folder / TUNED])
            train_side_by_side(parts, hooks)
            for part in parts:
                compare_fn(part, quiet)
            # 5: vanilla of the size of each kind that has at least MATCH_AT times its parameters
            tuning = read_tuning(folder) or {}
            vanilla_lr = _vanilla_rate(tuning)
            vanilla = _first_seed(tuned, VANILLA)
            matched, wide = {}, {}
            for kind in (k for k in kinds_study.kinds if k != VANILLA):
                record = _first_seed(tuned, kind)
                d_ff = None if vanilla is None or record is None else matched_d_ff(vanilla, record)
                if d_ff is None:
                    continue
                matched[kind] = d_ff
                extra = ([lr_override(vanilla_lr)] if vanilla_lr is not None else [])
                wide[kind] = dataclasses.replace(
                    _vanilla_at(task, best, folder / f"{MATCHED_PREFIX}{kind}", seeds),
                    overrides=(*task.overrides, positions_override(best), f"model.d_ff={d_ff}", *extra))
                hooks.log(f"{config}: vanilla with d_ff={d_ff}, the parameters of {kind}")
            train_side_by_side(list(wide.values()), hooks)
            for part in wide.values():
                compare_fn(part, quiet)
            write_json(folder / STUDY_FILE, {"positions": list(schemes), "strongest": best, "lrs": list(lrs),
                                             "chosen_lrs": tuning.get("chosen", {}), "matched_d_ff": matched,
                                             "rule": RULE})
        _write_report(out, hooks)
    return StudyResults.of(done)


def _vanilla_rate(tuning: dict) -> float | None:
    """The rate the sweep chose for vanilla (a study folder holds one task), or None (no sweep, or none chosen)."""
    for by_kind in (tuning.get("chosen") or {}).values():
        if by_kind.get(VANILLA) is not None:
            return float(by_kind[VANILLA])
    return None


def _write_report(out: Path, hooks) -> None:
    from ..report.baselines import write_baselines_report

    hooks.log(f"baselines report: {write_baselines_report(out)}")


def is_baselines_folder(folder: str | Path) -> bool:
    """Whether ``folder`` holds a baselines study (a task folder with ``study.json`` or ``positions-*``)."""
    folder = Path(folder)
    return folder.is_dir() and not Results.exists(folder) and any(
        (sub / STUDY_FILE).is_file() or any(sub.glob(f"{POSITIONS_PREFIX}*")) for sub in folder.iterdir() if sub.is_dir())

