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

from ..runs.results import FILENAME, Results, failed
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
    have = {(r["task"], r["data"], r["attention"], r.get("seed", 0)) for r in target.runs if not failed(r)}
    planned = {}
    for task in comparison.tasks:
        for seed in range(comparison.seeds):
            if task.trains(seed):
                for kind in comparison.kinds:
                    run = task.run(comparison.out, kind, seed)
                    planned[(run.task, run.data, kind, seed)] = run
    carried = 0
    for source in sources:
        if not Results.exists(source):
            continue
        results = Results.load(source)
        for record in results.runs:
            key = (record["task"], record["data"], record["attention"], record.get("seed", 0))
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
            if maps is not None:
                target.maps_of(group).setdefault(record["attention"], maps)
            have.add(key)
            carried += 1
    if carried:
        target.save(comparison.out)
        hooks.log(f"{carried} finished run(s) of {', '.join(map(str, sources))} carried into "
                  f"{comparison.out / FILENAME} (the same config: read, not trained again)")
    return carried
