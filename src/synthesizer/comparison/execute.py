"""Executing a plan on this machine: one run at a time in this process, or ``jobs`` at a time in child
processes; signals (Ctrl-C, SIGTERM) stop the runs in progress as they stop ``synthesizer train``.

A run's record is the experiment runner's result dict, or a failure ``{"task", "data", "attention",
"seed", "error"}`` (a run that raised, or whose process died): one broken variant does not stop the
comparison. A run stopped by a signal gives no record (None): the next call resumes it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
import warnings
from pathlib import Path
from typing import Callable, Iterator

from ..runs.files import WEIGHTS_NAME, read_result
from ..runs.results import STOPPED, Failure, outcome
from ..runs.plan import PlannedRun
from .plan import is_finished, run_config
from ..errors import InputError

WARNINGS_KEY = "_warnings"  # a run record's warnings on their way to progress.Warned (never saved)

# (runs done so far, the run, its record or None when stopped, seconds it took here: 0 when read back)
Finished = tuple[int, PlannedRun, "dict | None", float]


def execute(plan: list[PlannedRun], run_fn: Callable, jobs: int, threads: int | None) -> Iterator[Finished]:
    """Yield ``(n_done, run, record, seconds)`` as runs finish: in plan order with one job, else as the
    ``jobs`` child processes finish them, one process per run (``run_fn`` must then be picklable).

    Stopping (Ctrl-C, SIGTERM to this process, or the caller closing the generator) stops the runs in
    progress as a signal stops ``synthesizer train``: each child gets SIGTERM, saves its checkpoint and
    returns, and this waits for them, so no child is left training and the next call resumes them all.
    A child that dies without a word (killed, out of memory) gives a failed record; the others go on.
    """
    if jobs == 1:
        for done, item in enumerate(plan, 1):
            # one run at a time: its step bar (on a terminal) shows it is alive
            yield done, item, *run_one(item, run_fn, progress=True)
        return
    finished, todo = [], []
    for item in plan:
        (finished if is_finished(item) else todo).append(item)
    for done, item in enumerate(finished, 1):  # read back here: no process needed
        yield done, item, *run_one(item, run_fn)
    with _sigterm_raises_interrupt():
        yield from _in_processes(todo, len(finished), run_fn, jobs, threads)


def _in_processes(todo: list[PlannedRun], done: int, run_fn: Callable, jobs: int,
                  threads: int | None) -> Iterator[Finished]:
    """:func:`execute`'s child processes: ``jobs`` at a time until ``todo`` is empty; counts from ``done``."""
    # spawn, not fork: a forked child would inherit the parent's torch thread pool state
    context = multiprocessing.get_context("spawn")
    running: dict = {}  # the receiving end of each child's pipe -> (process, plan item)
    try:
        while todo or running:
            while todo and len(running) < jobs:
                item = todo.pop(0)
                receiver, sender = context.Pipe(duplex=False)
                process = context.Process(target=_run_in_child, args=(sender, threads, item, run_fn),
                                          name=f"synthesizer-{item.kind}-seed{item.seed}")
                with _children_ignore_sigint():
                    process.start()
                sender.close()  # the child holds the only writing end: EOF here once it is gone
                running[receiver] = (process, item)
            for receiver in multiprocessing.connection.wait(list(running)):
                process, item = running.pop(receiver)
                try:
                    (record, took), died = receiver.recv(), False
                except EOFError:  # gone without a word: killed, or out of memory
                    record, took, died = None, 0.0, True
                receiver.close()
                process.join()
                if died:
                    record = failure(item, f"the process training it died ({_exit_reason(process.exitcode)})")
                done += 1
                yield done, item, record, took
    except BaseException:
        for process, _ in running.values():
            if process.is_alive():
                process.terminate()  # SIGTERM: a training run saves its checkpoint and returns
        for receiver, (process, _) in running.items():
            process.join()
            receiver.close()
        raise


def _exit_reason(exitcode: int) -> str:
    return f"killed by {signal.Signals(-exitcode).name}" if exitcode < 0 else f"exit code {exitcode}"


def _run_in_child(sender, threads: int | None, item: PlannedRun, run_fn: Callable) -> None:
    """One run in a child process of :func:`execute`; its (record, seconds) go back through ``sender``."""
    set_threads(threads)
    try:
        sender.send(run_one(item, run_fn))
    except KeyboardInterrupt:  # a SIGINT sent to this process itself, outside training (a Trainer returns)
        sender.send((None, 0.0))


@contextlib.contextmanager
def _children_ignore_sigint():
    """Processes started within the block ignore SIGINT (inherited through exec), so a Ctrl-C, which
    reaches every process of the terminal, stops the comparison alone: it stops its runs with SIGTERM
    (a child interrupted while starting up would print its own traceback). A Ctrl-C that arrives here
    meanwhile is held back, not lost: blocked, it is delivered when the block ends."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: the children keep this process's handling
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


@contextlib.contextmanager
def _sigterm_raises_interrupt():
    """Within the block, SIGTERM to this process raises KeyboardInterrupt (as Ctrl-C does), so what is in
    progress stops cleanly instead of the process vanishing; a second SIGTERM acts as it did before."""
    def handler(signum, frame):
        signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: signals cannot be caught here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def set_threads(threads: int | None) -> None:
    """Torch's CPU threads in this process (None: torch's choice)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def threads_per_run(jobs: int, threads: int | None) -> int | None:
    """Torch threads for each run: ``threads``, else with several jobs the cores shared out among them (one
    job: None, torch's choice)."""
    if jobs > 1:
        return threads or max(1, (os.cpu_count() or 1) // jobs)
    return threads


def run_one(item: PlannedRun, run_fn: Callable, progress: bool = False) -> tuple[dict | None, float]:
    """(result record, seconds) of one run: read back if finished, else trained (or resumed)."""
    run_dir = item.folder
    if is_finished(item):
        _check_weights_revision(run_dir)
        return read_result(run_dir), 0.0
    t0 = time.perf_counter()
    resume = run_dir.is_dir() and any(run_dir.iterdir())
    # the run's warnings go back with its record (it may train in a child process): the comparison prints
    # each distinct one once (progress.Warned), not once per run, e.g. a split's truncated sequences
    with warnings.catch_warnings(record=True) as caught:
        try:
            result = run_fn(run_config(item), run_dir, resume=resume, progress=progress)
        except KeyboardInterrupt:
            raise
        except Exception as e:  # one broken variant must not stop the comparison; the report lists it
            result = failure(item, f"{type(e).__name__}: {e}")
    if outcome(result) == STOPPED:  # stopped by a signal: resume next time
        return None, time.perf_counter() - t0
    said = list(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))
    if said:
        result[WARNINGS_KEY] = said
    return result, time.perf_counter() - t0


def failure(item: PlannedRun, error: str) -> Failure:
    """The record of a run that failed: the report lists it, the comparison goes on."""
    return {"task": item.task, "data": item.data, "attention": item.kind, "seed": item.seed, "error": error}


def _check_weights_revision(run_dir: Path) -> None:
    """InputError for a finished run whose checkpoint an older synthesizer wrote: its numbers are another
    model's, and a report must not mix them with this one's."""
    from ..training.checkpoint import CheckpointError, check_weights_revision, finished_checkpoint

    try:
        check_weights_revision(finished_checkpoint(run_dir) / WEIGHTS_NAME)
    except FileNotFoundError:  # a run that failed, or a fake's: nothing to mix in
        return
    except CheckpointError as e:
        raise InputError(f"{run_dir} was trained by an older synthesizer ({e}); give the comparison a new --out "
                         "folder (compare render still reads the old one's results.json)") from None
