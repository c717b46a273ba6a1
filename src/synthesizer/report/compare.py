"""`synthesizer compare`: train a list of attention kinds on a preset's tasks, then write the report.

    synthesizer compare --preset lm [--size quick|standard|full] [--kinds ...] [--baselines linformer ...]
                        [--seeds N] [--out DIR] [--steps N] [--set key=value ...] [--jobs N --threads T]
    synthesizer compare --render DIR [DIR ...] [--out DIR]

Runs live in ``OUT/runs/<task>-<data>/<kind>/seed<k>/``. A run whose ``result.json`` exists is
read back, not retrained; a folder left by an interrupted run is resumed (``run_experiment(resume=True)``),
so running the same command again finishes an interrupted comparison, and running it with a larger
``--seeds N`` adds seeds up to N-1 (only those train) and writes the report over all of them. A run recorded as finished in
``OUT/results.json`` whose folder is gone counts as done too, so a comparison spread over machines
resumes from its ``results.json`` alone (the folders, with their checkpoints, need not travel; a run's
attention maps are taken into ``results.json`` as soon as the first seed of its kind finishes). A
finished run whose recorded config is not the one the command would train is refused, not mixed in.
With ``--jobs N`` the runs train N at a time, each in its own process (small models use few cores
well, so on a 2-core machine two one-thread runs finish a comparison almost twice as fast as one).
``OUT/results.json`` is updated after every run; ``OUT/report.md``, ``OUT/report.html`` and the PNGs
are written at the end.
Each run's record carries ``provenance`` (its data.json: corpus, origin, split and tokenizer hashes).
``OUT`` is locked while a comparison runs in it: a second ``compare`` on the same ``--out`` is refused
at once (each run folder is locked as well, against a ``synthesizer train`` into it).

A preset with a pretraining step (``presets.PretrainedPreset``, e.g. ``glue``) first runs its pretraining
config for every (kind, seed), ``--jobs`` at a time, in ``OUT/runs/pretrain-<data>/<kind>/seed<k>/``
(kept in ``results.json`` under ``"pretraining"``, not among the report's runs), then fine-tunes every task
from that folder (``init_from``); a fine-tuning run whose pretraining failed is recorded as failed. ``--set``
overrides apply to both, except ``data.*`` (the tasks' data only). At the end the GLUE-style average of the
tasks is added as the group ``glue-average`` (:func:`put_averages`), which claim 7 is judged on.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import multiprocessing
import multiprocessing.connection
import os
import shlex
import signal
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..errors import check_out_dir, path_component, positive_int
from ..runs.files import DATA_FILE, LOG_FILE, RESULT_FILE, read_json, read_result, window_speed
from ..runs.plan import PlannedRun
from ..training.lock import FolderLock
from .attention_maps import run_attention_maps
from .claims import GLUE_DATA, GLUE_TASK, attention_notes, evaluate_claims, trivial_key, verdict_label, verdict_reason
from .document import build_report, minutes
from .lead import LEAD_FIGURE, LEAD_TABLE, lead_preset, lead_text
from .presets import DEFAULT_KINDS, PRESETS, SIZES, get_preset, sized_tasks, steps_overrides, task_overrides
from .results import FILENAME, empty_results, load_results, merge_results, put_run, run_key, save_results
from .groups import build_groups
from .tables import group_key, group_label, speed_unit, table_rows, text_table


def data_name(cfg) -> str:
    """The name a run's data goes by (the built-in corpus, hub id or file stem), as run_experiment reports it."""
    d = cfg.data
    if "corpus" in d:
        return d["corpus"]
    if "corpora" in d:  # pretraining on several corpora (data/pretraining.py names it so)
        return "+".join(d["corpora"])
    if "hub" in d:
        return str(d["hub"])
    return d.get("name") or Path(d["train"]).name.split(".")[0]


def run_folder(out: Path, cfg, kind: str, seed: int) -> Path:
    """``OUT/runs/<task>-<data>/<kind>/seed<N>``; each name must be one folder name, so that no run is
    written outside ``out`` (a data name such as ``x/../..`` would be)."""
    key = path_component("data name", group_key(cfg.task, data_name(cfg)))
    return out / "runs" / key / path_component("attention kind", kind) / f"seed{seed}"


def planned_run(cfg, kind: str, seed: int, folder: Path) -> PlannedRun:
    """The planned run of ``cfg`` (a task's config) with attention ``kind`` and ``seed`` in ``folder``."""
    return PlannedRun(cfg.task, data_name(cfg), kind, seed, cfg, folder)


def check_kinds(kinds: list[str]) -> list[str]:
    """Canonical, de-duplicated kinds; ValueError naming a bad one and the allowed kinds."""
    from ..attention.factory import check_kind

    out = []
    for kind in kinds:
        name = check_kind(kind)
        if name not in out:
            out.append(name)
    return out


def _split_list(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [v for item in values for v in item.split(",") if v.strip()]


def run_comparison(preset: str, size: str = "quick", kinds: list[str] | None = None,
                   baselines: list[str] | None = None, seeds: int = 1, out: str | Path | None = None,
                   steps: int | None = None, overrides: list[str] = (), *, jobs: int = 1, threads: int | None = None,
                   heatmaps: bool = True, command: str = "",
                   run_fn: Callable | None = None, config_fn: Callable | None = None, load_fn: Callable | None = None,
                   log: Callable[[str], None] = print) -> dict:
    """Train every (task, kind, seed) of the comparison that is not finished yet, then write the report.

    ``run_fn(cfg, out_dir, resume=..., progress=...) -> result dict``, ``config_fn(name, overrides) ->
    ExperimentConfig`` and ``load_fn(run_dir) -> (model, tokenizer, cfg)`` default to the experiment
    runner's; tests pass fakes. ``jobs`` runs train at a time, each in a process of its own (``run_fn`` must then
    be picklable), each with ``threads`` torch threads (default: the cores shared out). Returns the
    results dict (also saved as ``OUT/results.json``).
    """
    if run_fn is None or config_fn is None or load_fn is None:
        from ..tasks.config import ExperimentConfig
        from ..tasks.experiment import load_trained, run_experiment

        run_fn = run_fn or run_experiment
        config_fn = config_fn or ExperimentConfig.from_file
        load_fn = load_fn or load_trained
    spec = get_preset(preset)
    positive_int("--seeds", seeds)
    for name, value in (("--jobs", jobs), ("--threads", threads)):
        if value is not None:
            positive_int(name, value)
    kinds = check_kinds(list(kinds or spec.kinds or DEFAULT_KINDS) + list(spec.baselines if baselines is None else baselines))
    extra = steps_overrides(steps) if steps is not None else []
    runnable, left_out = sized_tasks(spec, size)
    sized = [(t, task_overrides(t, size, preset)) for t in runnable]  # each one left has the size, or nothing runs
    for config, why in left_out.items():
        log(f"{config}: left out at the {size} size ({why})")
    tasks = []
    for t, size_overrides in sized:
        base = config_fn(t.config, [*size_overrides, *extra, *overrides])
        preset_cfg = config_fn(t.config, [*size_overrides, *extra]) if overrides else base
        tasks.append((t, base, _preset_label(t, base, preset_cfg)))
    pretrain = getattr(spec, "pretrain", None)
    if pretrain is not None:  # the user's data.* overrides are the fine-tuning tasks' data, not the pretraining's
        own = [o for o in overrides if not o.strip().startswith("data.")]
        pretrain = config_fn(pretrain.config, [*task_overrides(pretrain, size, preset), *extra, *own])
    out = Path(out or f"runs/compare-{preset}-{size}")
    check_out_dir("--out", out)
    with FolderLock(out, "comparison folder"):  # held until the report is written
        return _compare(preset, size, kinds, seeds, out, tasks, jobs, threads, heatmaps, command, run_fn, load_fn, log,
                        pretrain, left_out)


def _preset_label(task, base, preset) -> str:
    """The preset's label for ``task`` (e.g. "language modelling (State of the Union)") when ``base`` trains the data
    of ``preset`` (the same task's config without the user's overrides), else "": a report on the user's own
    data names the group after the data its runs record."""
    return task.label if data_name(base) == data_name(preset) else ""


def _compare(preset: str, size: str, kinds: list[str], seeds: int, out: Path, tasks: list, jobs: int,
             threads: int | None, heatmaps: bool, command: str, run_fn: Callable, load_fn: Callable,
             log: Callable[[str], None], pretrain=None, left_out: dict | None = None) -> dict:
    """The body of :func:`run_comparison`, run while ``out`` is locked. With a ``pretrain`` config, every
    (kind, seed) is pretrained first and every task then fine-tunes from that run (``init_from``)."""
    started, t0 = datetime.now(timezone.utc), time.perf_counter()

    results = load_results(out) if (out / FILENAME).exists() else empty_results()
    if preset not in results["presets"]:
        results["presets"].append(preset)
    results["size"] = size
    if left_out:
        results.setdefault("left_out", {}).update(left_out)
    if command and command not in results["commands"]:
        results["commands"].append(command)

    if jobs > 1:
        threads = threads or max(1, (os.cpu_count() or 1) // jobs)
    else:
        _set_threads(threads)  # the runs train in this process
    results["machine"]["parallel_runs"] = jobs
    if threads:
        results["machine"]["torch_threads"] = threads

    recorded = {run_key(r): r for r in results["runs"] if "error" not in r}
    plan, planned, kept = [], set(), 0
    for seed in range(seeds):
        for _, base, label in tasks:
            key = group_key(base.task, data_name(base))
            if label:
                results["labels"][key] = label
            for kind in kinds:
                run_dir = run_folder(out, base, kind, seed)
                if run_dir in planned:  # two tasks given the same data train it once
                    continue
                planned.add(run_dir)
                record = read_result(run_dir)
                in_folder = record is not None
                if not in_folder:
                    record = recorded.get((base.task, data_name(base), kind, seed))
                if record is not None:
                    _check_same_config(record, dataclasses.replace(base.with_attention(kind), seed=seed),
                                       run_dir.relative_to(out))
                    if not in_folder:  # recorded in results.json, trained elsewhere or its folder removed
                        kept += 1
                        continue
                plan.append(planned_run(base, kind, seed, run_dir))
    if kept:
        log(f"{kept} finished run(s) recorded in {out / FILENAME} without their folders: kept, not retrained")
    interrupted = False
    try:
        if pretrain is not None:
            # only where a fine-tuning run is left to train: finished ones need no pretraining folder
            needed = list(dict.fromkeys((item.kind, item.seed) for item in plan))
            pretrained = _pretrain(pretrain, needed, out, results, run_fn, jobs, threads, log)
            interrupted = pretrained is None
            plan = [] if interrupted else _from_pretrained(plan, pretrained, results, out)
        pace, warned = Pace(len(plan)), Warned(log)
        with contextlib.closing(_execute(plan, run_fn, jobs, threads)) as runs:  # stopped at once on error
            for done, item, record, took in runs:
                key, seed, run_dir = group_key(item.task, item.data), item.seed, item.folder
                where = f"[{done}/{len(plan)}] {key} {item.kind} seed{seed}"
                if record is not None:
                    warned(record, key)
                if record is None:
                    log(f"{where}: stopped before the end (interrupted); run the same command again to resume it")
                    interrupted = True
                    break
                record.setdefault("task", item.task)
                record.setdefault("data", item.data)
                record["run_dir"] = str(run_dir.relative_to(out))
                data_record = run_dir / DATA_FILE
                if "provenance" not in record and data_record.is_file():  # a failed run: its data is known all the same
                    record["provenance"] = read_json(data_record)
                if took and hasattr(os, "getloadavg"):  # how busy the machine was: timings are only as good as this
                    record["load_average_1min"] = round(os.getloadavg()[0], 2)
                speed = window_speed(run_dir / LOG_FILE)
                if speed is not None:
                    record["train_tokens_per_s_median"] = speed
                put_run(results, record)
                if heatmaps and seed == 0 and "error" not in record:  # while its checkpoint is surely here
                    _add_attention_maps(results, out, load_fn, log, only=record)
                save_results(results, out)
                log(f"{where}: {_summary(record, took)}{pace.after(done, took)}")
    except KeyboardInterrupt:
        log("interrupted; run the same command again to continue with the runs still missing")
        raise
    finally:
        elapsed = time.perf_counter() - t0
        results["wall_time_s"] = float(results.get("wall_time_s") or 0.0) + elapsed
        results["sessions"].append({"started": started.isoformat(timespec="seconds"),
                                    "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                    "wall_time_s": round(elapsed, 1)})
        save_results(results, out)
    if interrupted:
        return results
    if pretrain is not None:
        put_averages(results, [group_key(base.task, data_name(base)) for _, base, _ in tasks], kinds, seeds)
        save_results(results, out)

    if heatmaps:
        _add_attention_maps(results, out, load_fn, log)
        save_results(results, out)
    md, page = build_report(results, out)
    print_tables(results, log)
    log(f"report: {md} and {page}; raw numbers: {out / FILENAME}")
    _log_lead(results, out, log)
    return results


def _log_lead(results: dict, out: Path, log: Callable[[str], None]) -> None:
    """The reading of a preset with a lead (the demo), then where its picture and table are: the last lines."""
    if lead_preset(results) is None:
        return
    log("")
    log(lead_text(results, build_groups(results["runs"])))
    for path, what in ((out / LEAD_FIGURE, "learned attention"), (out / LEAD_TABLE, "table (markdown)")):
        if path.exists():
            log(f"{what}: {path}")
    log(f"more pictures (curves, every kind's attention): {out}/*.png")


def _pretrain(cfg, needed: list[tuple[str, int]], out: Path, results: dict, run_fn: Callable, jobs: int,
              threads: int | None, log: Callable[[str], None]) -> dict | None:
    """Run (or read back) the pretraining run of every (kind, seed) in ``needed``, ``jobs`` at a time; keep
    their records in ``results["pretraining"]`` (not among the runs: they are no task of the report).
    Returns ``{(kind, seed): (run folder, error or None)}``, or None when interrupted."""
    key = group_key(cfg.task, data_name(cfg))
    plan = [planned_run(cfg, kind, seed, run_folder(out, cfg, kind, seed)) for kind, seed in needed]
    done_runs: dict = {}
    kept = {(r["attention"], r.get("seed", 0)): r for r in results.get("pretraining", [])}
    pace, warned = Pace(len(plan)), Warned(log)
    with contextlib.closing(_execute(plan, run_fn, jobs, threads)) as runs:  # stopped at once on error
        for done, item, record, took in runs:
            kind, seed, run_dir = item.kind, item.seed, item.folder
            where = f"[pretraining {done}/{len(plan)}] {key} {kind} seed{seed}"
            if record is not None:
                warned(record, key)
            if record is None:
                log(f"{where}: stopped before the end (interrupted); run the same command again to resume it")
                return None
            # the curve stays: the report shows pretraining as a table of its own, with vanilla's flatness
            record = {k: v for k, v in record.items() if k not in ("per_example", "config", "provenance")}
            record["run_dir"] = str(run_dir.relative_to(out))
            kept[(kind, seed)] = record
            results["pretraining"] = list(kept.values())
            save_results(results, out)
            done_runs[(kind, seed)] = (run_dir, record.get("error"))
            log(f"{where}: {_summary(record, took)}{pace.after(done, took)}")
    return done_runs


def _from_pretrained(plan: list[PlannedRun], pretrained: dict, results: dict, out: Path) -> list[PlannedRun]:
    """The fine-tuning plan: each run starts from its (kind, seed)'s pretraining run; a run whose pretraining
    failed is recorded as failed, not started."""
    ready = []
    for item in plan:
        pre_dir, error = pretrained[(item.kind, item.seed)]
        if error is None:
            ready.append(dataclasses.replace(item, config=dataclasses.replace(item.config,
                                                                              init_from=str(pre_dir.resolve()))))
        else:
            put_run(results, {"task": item.task, "data": item.data, "attention": item.kind, "seed": item.seed,
                              "error": f"its pretraining run {pre_dir.relative_to(out)} failed: {error}"})
    return ready


def put_averages(results: dict, keys: list[str], kinds: list[str], seeds: int) -> None:
    """Add the GLUE-style average of every (kind, seed) fine-tuned on all the groups ``keys``: a record of
    group ``glue-average`` whose test metric is the mean of the tasks' test metrics (the trivial predictor:
    the mean of theirs), with per-example statistics weighted so that their mean is that average (each task
    counts once, whatever its size; the bootstrap then resamples the pooled test examples)."""
    runs = {(r["task"] + "-" + r["data"], r["attention"], r.get("seed", 0)): r for r in results["runs"]}
    for kind in kinds:
        for seed in range(seeds):
            parts = [runs.get((key, kind, seed)) for key in keys]
            if any(p is None for p in parts):
                continue
            record = glue_average(parts, kind, seed)
            put_run(results, record)
    results["labels"][group_key(GLUE_TASK, GLUE_DATA)] = f"GLUE-style average over {len(keys)} fine-tuned tasks"


def glue_average(parts: list[dict], kind: str, seed: int) -> dict:
    """The average record of one (kind, seed) from its fine-tuning records ``parts`` (see :func:`put_averages`)."""
    head = {"task": GLUE_TASK, "data": GLUE_DATA, "attention": kind, "seed": seed, "higher_is_better": True,
            "glue_tasks": [f"{p['task']}-{p['data']}" for p in parts]}
    failed = [f"{p['task']}-{p['data']}: {p['error']}" for p in parts if "error" in p]
    if failed:
        return {**head, "error": "; ".join(failed)}
    metrics = {p.get("primary_metric") for p in parts}
    metric = metrics.pop() if len(metrics) == 1 else "score"
    head["primary_metric"] = metric
    diverged = [p for p in parts if p.get("diverged")]
    values = [(p.get("test_metrics") or {}).get(p.get("primary_metric")) for p in parts]
    if diverged or any(v is None for v in values):
        return {**head, "test_metrics": {}, "diverged": bool(diverged),
                "diverged_step": min((p.get("diverged_step") or 0 for p in diverged), default=None)}
    record = {**head, "test_metrics": {metric: sum(values) / len(values)}, "diverged": False,
              "params": parts[0].get("params"), "steps": parts[0].get("steps"),
              "train_time_s": sum(p.get("train_time_s") or 0.0 for p in parts)}
    trivial = [(p.get("baselines") or {}).get(trivial_key(metric)) for p in parts]
    if all(t is not None for t in trivial):
        record["baselines"] = {trivial_key(metric): sum(trivial) / len(trivial)}
    stats = [p.get("per_example") for p in parts]
    if all(s and s.get("kind") == "accuracy" and s.get("metric") == metric for s in stats):
        n = sum(len(s["values"]) for s in stats)
        weighted = [v * n / (len(parts) * len(s["values"])) for s in stats for v in s["values"]]
        record["per_example"] = {"metric": metric, "kind": "accuracy", "values": [round(v, 6) for v in weighted]}
    return record


def _execute(plan: list[PlannedRun], run_fn: Callable, jobs: int, threads: int | None):
    """Yield ``(n_done, plan_item, record, seconds)`` as runs finish: in plan order with one job, else as
    the ``jobs`` child processes finish them, one process per run.

    Stopping (Ctrl-C, SIGTERM to this process, or the caller closing the generator) stops the runs in
    progress as a signal stops ``synthesizer train``: each child gets SIGTERM, saves its checkpoint and
    returns, and this waits for them, so no child is left training and the next call resumes them all.
    A child that dies without a word (killed, out of memory) gives a failed record; the others go on.
    """
    if jobs == 1:
        for done, item in enumerate(plan, 1):
            # one run at a time: its step bar (on a terminal) shows it is alive
            yield done, item, *_run_one(item, run_fn, progress=True)
        return
    finished, todo = [], []
    for item in plan:
        (finished if (item.folder / RESULT_FILE).exists() else todo).append(item)
    for done, item in enumerate(finished, 1):  # read back here: no process needed
        yield done, item, *_run_one(item, run_fn)
    # spawn, not fork: a forked child would inherit the parent's torch thread pool state
    context = multiprocessing.get_context("spawn")
    running: dict = {}  # the receiving end of each child's pipe -> (process, plan item)
    done = len(finished)
    with _sigterm_raises_interrupt():
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
                        record = _failure(item.config, item.kind, item.seed, f"the process training it died ({_exit_reason(process.exitcode)})")
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
    """One run in a child process of :func:`_execute`; its (record, seconds) go back through ``sender``."""
    _set_threads(threads)
    try:
        sender.send(_run_one(item, run_fn))
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


def _set_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


def _run_one(item: PlannedRun, run_fn: Callable, progress: bool = False) -> tuple[dict | None, float]:
    """(result record, seconds) of one run: read back if finished, else trained (or resumed)."""
    cfg, kind, seed, run_dir = item.config, item.kind, item.seed, item.folder
    if (run_dir / RESULT_FILE).exists():
        _check_weights_revision(run_dir)
        return read_result(run_dir), 0.0
    t0 = time.perf_counter()
    resume = run_dir.is_dir() and any(run_dir.iterdir())
    run_cfg = dataclasses.replace(cfg.with_attention(kind), seed=seed)
    # the run's warnings go back with its record (it may train in a child process): the comparison prints
    # each distinct one once (Warned), not once per run, e.g. a split's truncated sequences
    with warnings.catch_warnings(record=True) as caught:
        try:
            result = run_fn(run_cfg, run_dir, resume=resume, progress=progress)
        except KeyboardInterrupt:
            raise
        except Exception as e:  # one broken variant must not stop the comparison; the report lists it
            result = _failure(cfg, kind, seed, f"{type(e).__name__}: {e}")
    if "test_metrics" not in result and "error" not in result:  # stopped by a signal: resume next time
        return None, time.perf_counter() - t0
    said = list(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))
    if said:
        result[WARNINGS_KEY] = said
    return result, time.perf_counter() - t0


WARNINGS_KEY = "_warnings"  # a run record's warnings on their way to Warned (never saved)


class Warned:
    """Prints each distinct warning of a comparison's runs once per group (task and data), where the runs
    repeat it: a warning about a split's data (its text names the corpus and split) comes once, not once per
    kind and seed."""

    def __init__(self, log: Callable[[str], None]):
        self.log, self.seen = log, set()

    def __call__(self, record: dict, where: str) -> None:
        """Take the warnings out of ``record`` and print the new ones, each under ``where`` (the group key)."""
        for text in record.pop(WARNINGS_KEY, []):
            if (where, text) not in self.seen:
                self.seen.add((where, text))
                self.log(f"{where}: {text}")


def _check_same_config(record: dict, cfg, where: Path) -> None:
    """ValueError if the finished run ``record`` was trained with another config than ``cfg`` (the same
    command with other overrides, or another version's preset): its numbers would answer another question."""
    from ..tasks.config import flatten_config

    if "config" not in record:  # a fake's or a failed run's record: nothing to compare
        return
    ours = flatten_config(json.loads(json.dumps(cfg.to_dict())))  # as JSON stores it (tuples become lists)
    theirs = flatten_config(record["config"])
    for name in sorted(set(ours) | set(theirs)):
        if name == "init_from":  # where the pretraining folder was: not what was trained
            continue
        if ours.get(name) != theirs.get(name):
            raise ValueError(f"{where} finished with {name}={theirs.get(name)!r}, but this comparison trains "
                             f"{name}={ours.get(name)!r}; give the comparison a new --out folder (or the same "
                             "options as before)")


def _failure(cfg, kind: str, seed: int, error: str) -> dict:
    """The record of a run that failed: the report lists it, the comparison goes on."""
    return {"task": cfg.task, "data": data_name(cfg), "attention": kind, "seed": seed, "error": error}


def _check_weights_revision(run_dir: Path) -> None:
    """ValueError for a finished run whose checkpoint an older synthesizer wrote: its numbers are another
    model's, and a report must not mix them with this one's."""
    from ..training.checkpoint import WEIGHTS_NAME, CheckpointError, check_weights_revision, finished_checkpoint

    try:
        check_weights_revision(finished_checkpoint(run_dir) / WEIGHTS_NAME)
    except FileNotFoundError:  # a run that failed, or a fake's: nothing to mix in
        return
    except CheckpointError as e:
        raise ValueError(f"{run_dir} was trained by an older synthesizer ({e}); give the comparison a new --out "
                         "folder (--render still reads the old one's results.json)") from None


class Pace:
    """How long the runs of a plan still need, from the wall-clock pace of those trained so far by this
    invocation (runs read back do not count; parallel runs count as they overlap): rough, since runs
    of different tasks and kinds differ in length."""

    def __init__(self, total: int):
        self.total, self.trained, self.busy, self.last = total, 0, 0.0, time.perf_counter()

    def after(self, done: int, took: float) -> str:
        """"; about 12.5 min to go for 7 more runs" after run ``done`` of ``total`` (took 0: read back)."""
        left = self.total - done
        if left <= 0:
            return ""
        now = time.perf_counter()
        if took:  # trained here: the wall time since the previous run ended was spent on it
            self.busy += now - self.last
            self.trained += 1
        self.last = now  # a run read back took no time, wherever it comes in the plan
        if not self.trained:
            return ""
        seconds = self.busy / self.trained * left
        return f"; about {minutes(seconds)} to go for {left} more run{'s' if left > 1 else ''}"


def _summary(record: dict, took: float) -> str:
    if "error" in record:
        return f"FAILED: {record['error']}"
    metric = record.get("primary_metric", "")
    value = (record.get("test_metrics") or {}).get(metric)
    text = f"test {metric} {'n/a' if value is None else f'{value:.4g}'}"
    if record.get("diverged"):
        text += " (DIVERGED)"
    speed = record.get("train_tokens_per_s_median", record.get("train_tokens_per_s")) or 0.0
    text += f", {speed:,.0f} {speed_unit(record.get('task', ''))}/s, trained {record.get('train_time_s') or 0:.0f} s"
    return text + (f", {took:.0f} s in all" if took else " (done earlier)")


def _add_attention_maps(results: dict, out: Path, load_fn: Callable, log: Callable[[str], None],
                        only: dict | None = None) -> None:
    """Attention maps of the first seed of every kind that trained, once (kept in results.json); ``only``:
    of that run record alone, if its kind has none yet."""
    for run in [only] if only is not None else sorted(results["runs"], key=lambda r: r.get("seed", 0)):
        if "error" in run or "run_dir" not in run:
            continue
        maps = results["attention"].setdefault(group_key(run["task"], run["data"]), {})
        if run["attention"] in maps:
            continue
        try:
            maps[run["attention"]] = run_attention_maps(out / run["run_dir"], load_fn)
        except Exception as e:  # a missing checkpoint only costs the heatmap
            log(f"no attention maps for {run['attention']} ({run['run_dir']}): {type(e).__name__}: {e}")
            maps[run["attention"]] = []


def print_tables(results: dict, log: Callable[[str], None] = print) -> None:
    pretraining = build_groups(results.get("pretraining") or [])
    groups = build_groups(results["runs"])
    for group in pretraining + groups:
        log("")
        log(f"{group_label(group, results['labels'])} [{group.key}]")
        log(text_table(*table_rows(group)))
    log("")
    for group in pretraining + groups:  # did vanilla learn: the facts the verdicts below rest on
        if group.learning is not None:
            log(group.learning.summary())
    for note in attention_notes(groups):  # what the verdicts rest on: does attention matter on each task
        log(f"attention: {note}")
    for v in evaluate_claims(groups):
        log(f"claim {v.number}: {verdict_label(v)}: {verdict_reason(v)}")


def render(folders: list[str], out: str | None = None, log: Callable[[str], None] = print, command: str = "") -> dict:
    """Merge the results.json of ``folders`` and write the report into ``out`` (default: the first folder)."""
    target = Path(out or folders[0])
    check_out_dir("--out", target)
    results = merge_results([load_results(f) for f in folders])
    if command and command not in results["commands"]:
        results["commands"].append(command)
    md, page = build_report(results, target)
    print_tables(results, log)
    log(f"report: {md} and {page}")
    _log_lead(results, target, log)
    return results


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="synthesizer compare", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), help="the experiment family to run")
    p.add_argument("--size", choices=SIZES, default="quick",
                   help="quick: a demonstration, at most about 5 minutes on 2 cores with --jobs 2; standard: "
                        "trained until vanilla's validation curve has flattened, 30 minutes to 3 hours per "
                        "preset for 3 seeds with --jobs 2 (only for the presets that have it); full: the shipped "
                        "CPU configs as they are (default: quick)")
    p.add_argument("--kinds", nargs="+", metavar="KIND",
                   help=f"attention kinds to train (default: {' '.join(DEFAULT_KINDS)})")
    p.add_argument("--baselines", nargs="*", metavar="NAME",
                   help="baselines to train as well (linformer, lightconv, dynamicconv; default: the preset's)")
    p.add_argument("--seeds", type=int, default=1,
                   help="seeds per variant (0..N-1); on a folder of an earlier comparison only the missing seeds train")
    p.add_argument("--out", help="comparison folder (default: runs/compare-<preset>-<size>)")
    p.add_argument("--steps", type=int, help="training steps per run (scales eval/warm-up to fit)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for every run, e.g. train.lr=1e-3 (repeatable)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="runs to train at a time, each in its own process (default 1; 2 on a 2-core machine "
                        "nearly halves the wall time of small presets)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="CPU threads for torch in each run (default: torch's choice with one job, the cores "
                        "shared out with several; 1 is faster on a busy machine)")
    p.add_argument("--no-heatmaps", action="store_true", help="skip loading checkpoints for attention heatmaps")
    p.add_argument("--render", nargs="+", metavar="DIR", help="only re-render (and merge) existing results")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(argv)
    if args.render:
        render(args.render, args.out, command="synthesizer compare " + shlex.join(argv))
        return 0
    if not args.preset:
        raise ValueError(f"give --preset (one of {', '.join(sorted(PRESETS))}) or --render DIR")
    results = run_comparison(args.preset, args.size, _split_list(args.kinds), _split_list(args.baselines), args.seeds,
                      args.out, args.steps, args.overrides, jobs=args.jobs, threads=args.threads,
                      heatmaps=not args.no_heatmaps,
                      command="synthesizer compare " + shlex.join(argv))
    return 0 if results["runs"] else 1
