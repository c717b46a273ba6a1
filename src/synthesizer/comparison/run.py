"""`synthesizer compare run`: train every run of a comparison not finished yet, then write the report.

A run whose ``result.json`` exists is read back, not retrained; a folder left by an interrupted run is
resumed, so running the same command again finishes an interrupted comparison, and running it with a
larger ``--seeds N`` adds seeds up to N-1 (only those train) and writes the report over all of them. A
run recorded as finished in ``OUT/results.json`` whose folder is gone counts as done too, so a
comparison spread over machines resumes from its ``results.json`` alone (a run's attention maps are
taken into ``results.json`` as soon as the first seed of its kind finishes). A finished run whose
recorded config is not the one the command would train is refused, not mixed in (:mod:`.plan`).
``OUT/results.json`` is updated after every run; ``OUT/report.md``, ``OUT/report.html`` and the PNGs
are written at the end. Each run's record carries ``provenance`` (its data.json). ``OUT`` is locked
while a comparison runs in it: a second ``compare`` on the same ``--out`` is refused at once.

A preset with a pretraining step (``presets.PretrainedPreset``, e.g. ``glue``) first runs its pretraining
config for every (kind, seed) in ``OUT/runs/pretrain-<data>/<kind>/seed<k>/`` (kept in ``results.json``
under ``"pretraining"``, not among the report's runs), then fine-tunes every task from that folder
(``init_from``); a fine-tuning run whose pretraining failed is recorded as failed. ``--set`` overrides
apply to both, except ``data.*`` (the tasks' data only). At the end the GLUE-style average of the tasks
is added as the group ``glue-average`` (``report.average``), which claim 7 is judged on.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Iterator

from .attention_maps import run_attention_maps
from ..report.average import put_averages
from ..report.summary import write_and_print
from ..runs.results import FILENAME, Results, failed, run_key, session_record
from ..runs.files import group_key
from ..runs.code import code_provenance
from ..runs.files import DATA_FILE, LOG_FILE, read_json, window_speed
from ..runs.plan import PlannedRun
from ..runs.lock import comparison_lock
from .execute import execute, failure, set_threads, threads_per_run
from .pace import Pace
from .machine import load_average, machine_info
from .presets import get_preset
from .plan import (Comparison, Plan, StudyResults, build_comparison, check_same_code, from_pretrained, plan_runs,
                   pretraining_runs)
from .scale import compare_widths
from .baselines import compare_baselines
from .study import BASELINES, COMPARISON, SCALE, TUNING, Options, Study, resolve
from .tuning import compare_lrs
from .timing import add_timings
from .progress import Warned, summary


# what a comparison adds to a run's record as the run finishes (its folder's result.json does not hold it), kept
# when the record is read back from the folder by a later invocation
MEASURED_AS_IT_FINISHED = ("load_average_1min",)


@dataclass(frozen=True)
class Hooks:
    """The experiment runner's functions, and where progress lines go. ``run_fn(cfg, out_dir, resume=...,
    progress=...) -> result dict``, ``config_fn(name, overrides) -> ExperimentConfig``, ``load_fn(run_dir)
    -> (model, tokenizer, cfg)``; tests pass fakes."""

    run_fn: Callable
    config_fn: Callable
    load_fn: Callable
    log: Callable[[str], None] = print
    time_fn: Callable | None = None  # time_fn(results, log): the one-at-a-time timing (timing.add_timings)

    @classmethod
    def of(cls, run_fn: Callable | None = None, config_fn: Callable | None = None, load_fn: Callable | None = None,
           log: Callable[[str], None] = print, time_fn: Callable | None = None) -> "Hooks":
        """The functions given, the experiment runner's for those left None; the timing of the kinds by default
        only with the real runner (fake runs have nothing to time)."""
        if time_fn is None and run_fn is None:
            time_fn = add_timings
        if run_fn is None or config_fn is None or load_fn is None:
            from ..tasks.config import ExperimentConfig
            from ..tasks.experiment import run_experiment
            from ..tasks.trained import load_trained

            run_fn = run_fn or run_experiment
            config_fn = config_fn or ExperimentConfig.from_file
            load_fn = load_fn or load_trained
        return cls(run_fn, config_fn, load_fn, log, time_fn)


def run_comparison(preset: str, size: str = "quick", *, run_fn: Callable | None = None,
                   config_fn: Callable | None = None, load_fn: Callable | None = None,
                   log: Callable[[str], None] = print, time_fn: Callable | None = None, **options) -> Results:
    """Train every (task, kind, seed) of the comparison that is not finished yet, then write the report:
    :func:`run_study` of ``options`` (by keyword: :class:`~.study.Options`'s fields) resolved, with the
    functions (:class:`Hooks`'s, the experiment runner's where left None). ``jobs`` runs train at a time, each
    in a process of its own (``run_fn`` must then be picklable), each with ``threads`` torch threads (default:
    the cores shared out). Returns the results (also saved as ``OUT/results.json``); a study of several
    comparisons, its :class:`~.plan.StudyResults`."""
    for name in ("overrides", "widths", "lrs", "positions", "tasks"):  # a list from a caller, a tuple in the frozen plan
        if options.get(name) is not None:
            options[name] = tuple(options[name])
    return compare(Options(preset, size, **options), Hooks.of(run_fn, config_fn, load_fn, log, time_fn))


def run_study(study: Study, *, run_fn: Callable | None = None, config_fn: Callable | None = None,
              load_fn: Callable | None = None, log: Callable[[str], None] = print,
              time_fn: Callable | None = None) -> Results | StudyResults:
    """``synthesizer compare run``: train what is left of the resolved ``study``, then write its reports, with
    the functions given (the experiment runner's where left None). Returns the results (:func:`conduct`)."""
    return conduct(study, Hooks.of(run_fn, config_fn, load_fn, log, time_fn))


def compare(options: Options, hooks: Hooks) -> Results | StudyResults:
    """:func:`conduct` of ``options`` resolved: each part of a study made of several comparisons is one."""
    return conduct(resolve(options), hooks)


def conduct(study: Study, hooks: Hooks) -> Results | StudyResults:
    """Train ``study`` as its design says: a scale study one comparison per width (:mod:`.scale`), a baselines
    study its position schemes, then its kinds tuned (:mod:`.baselines`), a tuning study its learning-rate
    sweep (:mod:`.tuning`), each part with :func:`compare`; one comparison in its folder, locked until the report
    is written."""
    if study.design != COMPARISON:
        return DESIGN_RUNNERS[study.design](study, hooks, compare)
    comparison = build_comparison(study, hooks.config_fn, hooks.log)
    with comparison_lock(comparison.out):  # held until the report is written
        return _Session.open(comparison, study.options, hooks).run()


# how a study made of several comparisons trains them (each with ``compare``)
DESIGN_RUNNERS: dict[str, Callable] = {SCALE: compare_widths, BASELINES: compare_baselines, TUNING: compare_lrs}


@dataclass
class _Session:
    """One invocation of a comparison, while its folder is locked: its results and how it trains."""

    comparison: Comparison
    results: Results
    hooks: Hooks
    jobs: int
    threads: int | None
    heatmaps: bool
    allow_other_code: bool = False

    @classmethod
    def open(cls, comparison: Comparison, options: Options, hooks: Hooks) -> "_Session":
        """The folder's results.json (or a new one) with this invocation's preset, size and command."""
        out = comparison.out
        machine = machine_info()
        results = Results.load_or_empty(out, machine)
        if "cpu" not in results.machine:  # a folder a study first wrote by carrying runs into it: it trains here
            results.set_machine(**machine)
        results.add_preset(comparison.preset)
        lead = get_preset(comparison.preset).lead
        if lead:  # the report opens with these maps (report/lead.py): it reads them here, not from the presets
            results.set_lead(lead)
        results.set_size(comparison.size)
        if comparison.left_out:
            results.add_left_out(comparison.left_out)
        results.add_command(options.command)
        for task in comparison.tasks:
            if task.label:
                results.set_label(task.key, task.label)
        threads = threads_per_run(options.jobs, options.threads)
        if options.jobs == 1:
            set_threads(threads)  # the runs train in this process
        results.set_machine(parallel_runs=options.jobs)
        if threads:
            results.set_machine(torch_threads=threads)
        return cls(comparison, results, hooks, options.jobs, threads, options.heatmaps, options.allow_other_code)

    def log(self, line: str) -> None:
        self.hooks.log(line)

    def save(self) -> None:
        self.results.save(self.comparison.out)

    def run(self) -> Results:
        """Train what is left, then write the report; returns the results. Stopped by a signal (Ctrl-C, SIGTERM),
        it saves what finished and raises KeyboardInterrupt."""
        started, t0 = datetime.now(timezone.utc), time.perf_counter()
        plan = plan_runs(self.comparison, self.results)
        plan.log_kept(self.comparison.out / FILENAME, self.log)
        recorded = {run_key(r) for r in self.results.runs if not failed(r)}
        joining = [run for run in plan.runs if (run.task, run.data, run.kind, run.seed) not in recorded]
        if joining and not self.allow_other_code:  # trained here or found finished in their folders: new records
            check_same_code(self.results, self.comparison.out / FILENAME)
        try:
            finished = self._train(plan)
        except KeyboardInterrupt:
            self.log("interrupted; run the same command again to continue with the runs still missing")
            raise
        finally:
            elapsed = time.perf_counter() - t0
            self.results.add_session(session_record(started, elapsed, code_provenance()))
            self.results.set_rendered_by(code_provenance())
            self.save()
        if not finished:  # a run stopped by a signal: so does the command (a scale study's next widths too)
            raise KeyboardInterrupt("a run was stopped by a signal")
        self._finish()
        return self.results

    def _train(self, plan: Plan) -> bool:
        """Train (or read back) the plan's runs, after their pretraining; False when stopped by a signal."""
        runs = plan.runs
        if self.comparison.pretrain is not None:
            pretrained = self._pretrain(pretraining_runs(self.comparison, plan))
            if pretrained is None:
                return False
            runs = self._fine_tuning(runs, pretrained)
        with contextlib.closing(self._finished(runs, "")) as finished:
            for item, record, took in finished:
                if record is None:
                    return False
                self._record(item, record, took)
                if self.heatmaps and item.seed == 0 and not failed(record):  # while its checkpoint is surely here
                    self._add_attention_maps(only=record)
                self.save()
        return True

    def _pretrain(self, runs: list[PlannedRun]) -> dict | None:
        """Run (or read back) the pretraining ``runs``; keep their records in ``results["pretraining"]``
        (not among the runs: they are no task of the report). Returns ``{(kind, seed): (run folder, error
        or None)}``, or None when stopped by a signal."""
        out, done = self.comparison.out, {}
        kept = {(r["attention"], r.get("seed", 0)): r for r in self.results.pretraining}
        with contextlib.closing(self._finished(runs, "pretraining ")) as finished:
            for item, record, _ in finished:
                if record is None:
                    return None
                # the curve stays: the report shows pretraining as a table of its own, with vanilla's flatness
                record = {k: v for k, v in record.items() if k not in ("per_example", "config", "provenance")}
                record["run_dir"] = str(item.folder.relative_to(out))
                kept[(item.kind, item.seed)] = record
                self.results.set_pretraining(list(kept.values()))
                self.save()
                done[(item.kind, item.seed)] = (item.folder, record.get("error"))
        return done

    def _fine_tuning(self, runs: list[PlannedRun], pretrained: dict) -> list[PlannedRun]:
        """Each run starts from its (kind, seed)'s pretraining run; a run whose pretraining failed is
        recorded as failed, not started."""
        ready = []
        for item in runs:
            folder, error = pretrained[(item.kind, item.seed)]
            if error is None:
                ready.append(from_pretrained(item, folder))
            else:
                self.results.put_run(failure(item, f"its pretraining run {folder.relative_to(self.comparison.out)} "
                                                   f"failed: {error}"))
        return ready

    def _finished(self, runs: list[PlannedRun], stage: str) -> Iterator[tuple[PlannedRun, dict | None, float]]:
        """Execute ``runs``, yielding each ``(run, record, seconds)`` as it finishes and printing its line
        once the caller has kept it; a None record (stopped by a signal) is the last one."""
        pace, warned = Pace(len(runs)), Warned(self.log)
        with contextlib.closing(execute(runs, self.hooks.run_fn, self.jobs, self.threads)) as finished:
            for done, item, record, took in finished:  # stopped at once on error: closing() stops the runs
                key = group_key(item.task, item.data)
                where = f"[{stage}{done}/{len(runs)}] {key} {item.kind} seed{item.seed}"
                if record is None:
                    self.log(f"{where}: stopped before the end (interrupted); run the same command again to "
                             "resume it")
                    yield item, None, took
                    return  # the caller stops here: closing() stops the runs still in progress
                warned(record, key)
                yield item, record, took
                self.log(f"{where}: {summary(record, took)}{pace.after(done, took)}")

    def _record(self, item: PlannedRun, record: dict, took: float) -> None:
        """Put a finished run's record into the results, with its folder, data provenance and speed."""
        record.setdefault("task", item.task)
        record.setdefault("data", item.data)
        record["run_dir"] = str(item.folder.relative_to(self.comparison.out))
        data_record = item.folder / DATA_FILE
        if "provenance" not in record and data_record.is_file():  # a failed run: its data is known all the same
            record["provenance"] = read_json(data_record)
        load = load_average() if took else None
        if load is not None:  # how busy the machine was: timings are only as good as this
            record["load_average_1min"] = load
        elif not failed(record):  # read back from its folder: what was measured as it finished stays
            earlier = next((r for r in self.results.runs if run_key(r) == run_key(record) and not failed(r)), {})
            for name in MEASURED_AS_IT_FINISHED:
                if name in earlier and name not in record:
                    record[name] = earlier[name]
        speed = window_speed(item.folder / LOG_FILE)
        if speed is not None:
            record["train_tokens_per_s_median"] = speed
        self.results.put_run(record)

    def _finish(self) -> None:
        """The GLUE-style average (a pretrained preset), the attention maps, then the report."""
        comparison, out = self.comparison, self.comparison.out
        if comparison.pretrain is not None:
            put_averages(self.results, [task.key for task in comparison.tasks], comparison.kinds, comparison.seeds)
            self.save()
        if self.heatmaps:
            self._add_attention_maps()
            self.save()
        if self.hooks.time_fn is not None:  # the speed verdicts read this, not the speeds of runs trained side by side
            self.hooks.time_fn(self.results, self.log)
            self.save()
        write_and_print(self.results, out, self.log, raw=out / FILENAME)

    def _add_attention_maps(self, only: dict | None = None) -> None:
        """Attention maps of the first seed of every kind that trained, once (kept in results.json; where reading
        them failed, none is kept and the next resume tries again); ``only``: of that run record alone, if its kind
        has none yet."""
        results, out = self.results, self.comparison.out
        for run in [only] if only is not None else sorted(results.runs, key=lambda r: r.get("seed", 0)):
            if failed(run) or "run_dir" not in run:
                continue
            maps = results.maps_of(group_key(run["task"], run["data"]))
            if run["attention"] in maps:
                continue
            try:
                maps[run["attention"]] = run_attention_maps(out / run["run_dir"], self.hooks.load_fn)
            except Exception as e:  # a missing checkpoint only costs the heatmap; nothing is stored, so a resume tries again
                self.log(f"no attention maps for {run['attention']} ({run['run_dir']}): {type(e).__name__}: {e} "
                         "(tried again when the comparison resumes)")
