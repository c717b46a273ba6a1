"""Runs one comparison shares with another: a finished run is read from the folder that trained it, never
trained twice.

A study made of several comparisons (the learning-rate protocol, the baselines study) often plans in one
comparison a run that another has already finished with exactly the same config: the sweep's first seed
at the rate a kind then trains at, or vanilla with the chosen position scheme at the rate the sweep chose.
:func:`carry_runs` puts such records into the comparison's results.json, with ``run_dir`` pointing at
the folder that trained them (relative, so the study folder can move), and their attention maps; the
comparison then counts them as done (``plan.plan_runs``: recorded, its folder not here). Only records
whose config is the one the comparison plans, field for field (``plan.config_difference``), are carried.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..runs.results import FILENAME, Results, failed, run_key
from ..runs.files import group_key
from ..runs.lock import comparison_lock
from .plan import build_comparison, config_difference, run_config
from .study import Options, resolve


def carry_runs(options: Options, hooks, sources: list[Path]) -> int:
    """Carry into ``options``' comparison every finished run of the ``sources`` (comparison folders; a
    missing one is skipped) that it plans with the same config and does not hold yet. Returns how many
    were carried (0 once they are there: calling it again changes nothing)."""
    comparison = build_comparison(resolve(options), hooks.config_fn, lambda line: None)
    with comparison_lock(comparison.out):  # its results.json read and written back under the comparison's lock
        return _carry(comparison, hooks, sources)


def _carry(comparison, hooks, sources: list[Path]) -> int:
    """:func:`carry_runs` into the resolved ``comparison``, whose folder is locked."""
    target = Results.load_or_empty(comparison.out)
    planned = {}
    for task in comparison.tasks:
        for seed in range(comparison.seeds):
            if task.trains(seed):
                for kind in comparison.kinds:
                    run = task.run(comparison.out, kind, seed)
                    planned[(run.task, run.data, kind, seed)] = run
    held = {run_key(r): r for r in target.runs if not failed(r)}
    # a record carried here earlier whose config is no longer the planned one (a sweep's choice moved: another
    # rate was added, or the rule changed) gives way to the source that has it; the folder that trained it
    # keeps it. A run trained in this folder at another config is still refused (plan.check_same_config).
    moved = {key for key, r in held.items() if key in planned and _trained_elsewhere(r, comparison.out)
             and config_difference(r, run_config(planned[key])) is not None}
    have = set(held) - moved
    carried = 0
    for source in sources:
        if not Results.exists(source):
            continue
        results = Results.load(source)
        for record in results.runs:
            key = run_key(record)
            run = planned.get(key)
            if (run is None or key in have or failed(record) or "config" not in record
                    or config_difference(record, run_config(run)) is not None):
                continue
            record = dict(record)
            if "run_dir" in record:
                record["run_dir"] = os.path.relpath(Path(source) / record["run_dir"], comparison.out)
            target.put_run(record)
            group = group_key(record["task"], record["data"])
            maps = results.attention.get(group, {}).get(record["attention"])
            if maps is not None and (key in moved or record["attention"] not in target.maps_of(group)):
                target.maps_of(group)[record["attention"]] = maps
            have.add(key)
            carried += 1
    if carried:
        target.save(comparison.out)
        replaced = sorted(moved & have)
        if replaced:
            hooks.log(f"{len(replaced)} run(s) carried earlier at another config replaced: "
                      + ", ".join(f"{kind} seed {seed}" for _, _, kind, seed in replaced))
        hooks.log(f"{carried} finished run(s) of {', '.join(map(str, sources))} carried into "
                  f"{comparison.out / FILENAME} (the same config: read, not trained again)")
    return carried


def _trained_elsewhere(record: dict, out: Path) -> bool:
    """Whether ``record`` was carried here: its run folder lies outside the comparison's folder ``out``."""
    run_dir = record.get("run_dir")
    return run_dir is not None and not (Path(out) / run_dir).resolve().is_relative_to(Path(out).resolve())
