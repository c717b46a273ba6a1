"""Training the runs of several small comparisons together, ``--jobs`` at a time.

A study made of comparisons (the baselines study's position schemes and widened vanillas, a learning-rate
sweep's rates) would otherwise train them one after another: a comparison of one run, or the last run of
each, leaves the other jobs idle. Here their unfinished runs train in one pool, each in the folder its
comparison gives it; the comparisons then read them back (a run's record is its own result.json), so what
they record, choose and report is what they would have trained themselves (each run's load average at its
end too). Each comparison's wall time gets its share of the pool's, as a session marked ``side_by_side``: the
pool's wall time in proportion to the training time of its runs that finished there.
"""

from __future__ import annotations

import contextlib
import time
from datetime import datetime, timezone
from pathlib import Path

from ..runs.code import code_provenance
from ..runs.files import RESULT_FILE, group_key, read_result, write_json
from ..runs.lock import comparison_lock
from ..runs.results import FILENAME, Results, failed, session_record
from .execute import execute, threads_per_run
from .machine import load_average
from .pace import Pace
from .plan import build_comparison, check_same_code, is_finished, plan_runs
from .progress import Warned, summary
from .study import Options, resolve


def train_side_by_side(parts: list[Options], hooks) -> None:
    """Train the runs that the comparisons ``parts`` still need, ``--jobs`` at a time, each in the folder its
    comparison gives it; the comparisons then read them back (each run's record is its own result.json). With
    one job, or fewer than two runs to train, nothing happens here: each comparison trains its own. Runs that
    would join a results.json of other code are refused first (InputError), unless ``--allow-other-code``. A run
    that fails here is tried again by its comparison, which records the failure. Stopped by a signal, the runs save
    their checkpoints and KeyboardInterrupt is raised; the next call resumes them."""
    if not parts or parts[0].jobs < 2:  # the parts of one study share its --jobs and --threads
        return
    jobs, threads = parts[0].jobs, threads_per_run(parts[0].jobs, parts[0].threads)
    todo, where = [], {}  # the runs, and the folder of each one's comparison
    for part in parts:
        comparison = build_comparison(resolve(part), hooks.config_fn, lambda line: None)
        if comparison.pretrain is not None:  # a fine-tuning run needs its pretraining, which its comparison runs
            continue
        results = Results.load_or_empty(comparison.out)
        runs = [run for run in plan_runs(comparison, results).runs if not is_finished(run)]
        if runs and not part.allow_other_code:  # refused here, as its comparison would refuse them, not after
            check_same_code(results, comparison.out / FILENAME)
        todo += runs
        where.update((run.folder, comparison.out) for run in runs)
    if len(todo) < 2:
        return
    n = len(set(where.values()))  # the comparisons with runs to train here
    hooks.log(f"{len(todo)} runs of {n} comparison{'s' * (n != 1)} side by side, {jobs} at a time")
    pace, warned = Pace(len(todo)), Warned(hooks.log)  # a run's warnings are said here: read back, it has none
    started, t0, spent = datetime.now(timezone.utc), time.perf_counter(), {}  # spent: {comparison: training s}
    try:
        with contextlib.closing(execute(todo, hooks.run_fn, jobs, threads)) as finished:
            for done, item, record, took in finished:
                _finished(done, item, record, took, f"[side by side {done}/{len(todo)}] {where[item.folder].name}",
                          hooks, warned, pace)
                spent[where[item.folder]] = spent.get(where[item.folder], 0.0) + (took or 0.0)
    finally:  # interrupted too: what the finished runs spent is kept
        _share_wall_time(spent, started, time.perf_counter() - t0)


def _finished(done: int, item, record, took, line: str, hooks, warned: Warned, pace: Pace) -> None:
    """Say how the run ``item`` ended and keep its load average in its record; KeyboardInterrupt where a signal
    stopped it."""
    key = group_key(item.task, item.data)
    line = f"{line}: {key} {item.kind} seed{item.seed}"
    if record is None:
        hooks.log(f"{line}: stopped before the end (interrupted); run the same command again to resume it")
        raise KeyboardInterrupt("a run was stopped by a signal")
    warned(record, key)
    load = load_average() if took and not failed(record) and is_finished(item) else None
    if load is not None:  # measured as it finished, kept in the run's own record, which its comparison reads
        write_json(item.folder / RESULT_FILE, {**read_result(item.folder), "load_average_1min": load})
    hooks.log(f"{line}: {summary(record, took)}{pace.after(done, took)}")


def _share_wall_time(spent: dict[Path, float], started: datetime, wall_s: float) -> None:
    """Give each comparison of ``spent`` its share of the pool's ``wall_s``, in proportion to its runs' training
    time, as a session of its results.json (a new one where it has none yet: its comparison completes it)."""
    total = sum(spent.values())
    code = code_provenance()
    for out, seconds in spent.items():
        if seconds <= 0:
            continue
        with comparison_lock(out):  # every writer of a comparison's results.json holds it
            results = Results.load_or_empty(out)
            results.add_session(session_record(started, wall_s * seconds / total, code, side_by_side=True))
            results.save(out)


__all__ = ["train_side_by_side"]
