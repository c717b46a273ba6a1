"""Planning a comparison: its tasks and kinds, the run folder of every (task, kind, seed), and which runs
are done (finished in their folder, or recorded in ``results.json``) or refused (finished with another
config). Nothing here trains or writes anything.

Runs live in ``OUT/runs/<task>-<data>/<kind>/seed<k>/``; a pretrained preset's pretraining runs in
``OUT/runs/pretrain-<data>/<kind>/seed<k>/``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError, path_component
from .presets import PresetTask, steps_overrides, task_overrides
from .study import Study, check_kinds
from ..runs.files import group_key
from ..runs.results import Results, describe_code as describe, failed
from ..runs.code import code_provenance
from ..runs.files import RESULT_FILE, read_result
from ..runs.plan import PlannedRun


@dataclass(frozen=True)
class TaskPlan:
    """One task of a comparison: the config its runs start from, built from ``name`` and ``overrides``."""

    name: str  # a shipped config's name or a config file (PresetTask.config)
    overrides: tuple[str, ...]
    config: Any  # ExperimentConfig
    label: str = ""  # the preset's name for it, or "" on the user's own data
    max_seeds: int | None = None  # the seeds it trains at most (PresetTask.max_seeds)
    # kinds trained at their own learning rate: (kind, its overrides, its config), built like ``config``
    by_kind: tuple[tuple[str, tuple[str, ...], Any], ...] = ()

    @property
    def key(self) -> str:
        """The group of its runs, ``<task>-<data>``."""
        return group_key(self.config.task, self.config.data_name)

    def run(self, out: Path, kind: str, seed: int) -> PlannedRun:
        """The planned run of ``kind`` and ``seed`` in its folder under ``out``."""
        cfg, overrides = self.config, self.overrides
        for name, own, config in self.by_kind:
            if name == kind:
                cfg, overrides = config, own
        return PlannedRun(cfg.task, cfg.data_name, kind, seed, cfg, run_folder(out, cfg, kind, seed),
                          self.name, overrides)

    def trains(self, seed: int) -> bool:
        """Whether seed ``seed`` of this task is trained (its preset may cap the seeds)."""
        return self.max_seeds is None or seed < self.max_seeds


@dataclass(frozen=True)
class Comparison:
    """A comparison built from its :class:`~.study.Study`: checked kinds, the tasks' configs, the folder."""

    preset: str
    size: str
    kinds: list[str]
    seeds: int
    out: Path
    tasks: list[TaskPlan]
    pretrain: TaskPlan | None = None  # a pretrained preset's pretraining, run once per (kind, seed)
    left_out: dict[str, str] = field(default_factory=dict)  # {config: why} of the tasks left out at this size


@dataclass
class Plan:
    """The runs of a comparison still to train or to read back, in order (all kinds of seed 0 first)."""

    runs: list[PlannedRun]
    kept: int = 0  # finished runs recorded in results.json whose folders are gone: kept, not retrained

    def log_kept(self, saved: Path, log: Callable[[str], None]) -> None:
        """Say how many finished runs recorded in ``saved`` (results.json) are kept without their folders."""
        if self.kept:
            log(f"{self.kept} finished run(s) recorded in {saved} without their folders: kept, not retrained")


def run_folder(out: Path, cfg, kind: str, seed: int) -> Path:
    """``OUT/runs/<task>-<data>/<kind>/seed<N>``; each name must be one folder name, so that no run is
    written outside ``out`` (a data name such as ``x/../..`` would be)."""
    key = path_component("data name", group_key(cfg.task, cfg.data_name))
    return out / "runs" / key / path_component("attention kind", kind) / f"seed{seed}"


def build_comparison(study: Study, config_fn: Callable, log: Callable[[str], None]) -> Comparison:
    """The comparison ``study`` trains (one of its design COMPARISON): every task's config built with
    ``config_fn(name, overrides)``, the tasks the size leaves out said to ``log``."""
    options = study.options
    extra = steps_overrides(options.steps) if options.steps is not None else []
    sized = [(t, task_overrides(t, study.size, study.preset)) for t in study.tasks]
    for config, why in study.left_out.items():
        log(f"{config}: left out at the {study.size} size ({why})")
    tasks = [_task(t, [*size, *extra], list(options.overrides), config_fn, options.lr_by_run) for t, size in sized]
    pretrain = getattr(study.spec, "pretrain", None)
    if pretrain is not None:  # the user's data.* overrides are the fine-tuning tasks' data, not the pretraining's
        own = [o for o in options.overrides if not o.strip().startswith("data.")]
        pretrain = _task(pretrain, [*task_overrides(pretrain, study.size, study.preset), *extra], own, config_fn)
    return Comparison(study.preset, study.size, list(study.kinds), study.seeds, study.out, tasks, pretrain,
                      dict(study.left_out))


def _task(task: PresetTask, preset_overrides: list[str], own: list[str], config_fn: Callable,
          lr_by_run: tuple[tuple[str, str, float], ...] = ()) -> TaskPlan:
    """The task's config with the preset's overrides, then the user's ``own``. Its label is the preset's
    (e.g. "language modelling (State of the Union)") when it still trains the preset's data: a report on
    the user's own data names the group after the data its runs record. A kind given its own learning
    rate in ``lr_by_run`` gets a config of its own, with ``train.lr`` set last."""
    overrides = (*preset_overrides, *own)
    config = config_fn(task.config, list(overrides))
    preset_config = config_fn(task.config, list(preset_overrides)) if own else config
    label = task.label if config.data_name == preset_config.data_name else ""
    by_kind = []
    for key, kind, lr in lr_by_run:
        if key == group_key(config.task, config.data_name):
            kind_overrides = (*overrides, lr_override(lr))
            by_kind.append((check_kinds([kind])[0], kind_overrides, config_fn(task.config, list(kind_overrides))))
    return TaskPlan(task.config, overrides, config, label, task.max_seeds, tuple(by_kind))


def lr_override(lr: float) -> str:
    """The override that sets a run's learning rate (one spelling, so configs compare equal)."""
    return f"train.lr={lr!r}"


def plan_runs(comparison: Comparison, results: Results) -> Plan:
    """Every (seed, task, kind) not recorded as finished in ``results`` without its folder, in that
    order; a run finished in its folder stays in the plan (it is read back, not retrained). ValueError
    for a finished run whose config is not the one planned."""
    out = comparison.out
    recorded = {(r["task"], r["data"], r["attention"], int(r.get("seed", 0))): r
                for r in results.runs if not failed(r)}
    plan, seen = Plan([]), set()
    for seed in range(comparison.seeds):
        for task in comparison.tasks:
            if not task.trains(seed):
                continue
            for kind in comparison.kinds:
                run = task.run(out, kind, seed)
                if run.folder in seen:  # two tasks given the same data train it once
                    continue
                seen.add(run.folder)
                record = read_result(run.folder)
                in_folder = record is not None
                if not in_folder:
                    record = recorded.get((run.task, run.data, kind, seed))
                if record is not None:
                    check_same_config(record, run_config(run), run.folder.relative_to(out))
                    if not in_folder:  # recorded in results.json, trained elsewhere or its folder removed
                        plan.kept += 1
                        continue
                plan.runs.append(run)
    return plan


def pretraining_runs(comparison: Comparison, plan: Plan) -> list[PlannedRun]:
    """The pretraining run of every (kind, seed) that a run of ``plan`` fine-tunes from (finished ones
    need no pretraining folder); [] for a preset without pretraining."""
    if comparison.pretrain is None:
        return []
    needed = dict.fromkeys((run.kind, run.seed) for run in plan.runs)
    return [comparison.pretrain.run(comparison.out, kind, seed) for kind, seed in needed]


def run_config(run: PlannedRun):
    """The config a planned run trains: its task's config with its attention kind and seed."""
    return dataclasses.replace(run.config.with_attention(run.kind), seed=run.seed)


def config_difference(record: dict, cfg) -> tuple[str, Any, Any] | None:
    """The first field (name, the record's value, ``cfg``'s) in which the run ``record`` was trained with
    another config than ``cfg``, or None where they agree (or the record keeps no config: a fake's or a
    failed run's, nothing to compare)."""
    from ..tasks.config import flatten_config

    if "config" not in record:
        return None
    ours = flatten_config(json.loads(json.dumps(cfg.to_dict())))  # as JSON stores it (tuples become lists)
    theirs = flatten_config(record["config"])
    for name in sorted(set(ours) | set(theirs)):
        if name == "init_from":  # where the pretraining folder was: not what was trained
            continue
        if ours.get(name) != theirs.get(name):
            return name, theirs.get(name), ours.get(name)
    return None


def check_same_config(record: dict, cfg, where: Path) -> None:
    """InputError if the finished run ``record`` was trained with another config than ``cfg`` (the same
    command with other overrides, or another version's preset): its numbers would answer another question."""
    differs = config_difference(record, cfg)
    if differs is not None:
        name, theirs, ours = differs
        raise InputError(f"{where} finished with {name}={theirs!r}, but this comparison trains "
                         f"{name}={ours!r}; give the comparison a new --out folder (or the same "
                         "options as before)")


def check_same_code(results: Results, where: Path) -> None:
    """InputError where a finished run of ``results`` was trained by other code than this (another version or
    commit, or code not recorded) and new runs would join it: their numbers would mix two implementations.
    Runs without provenance (a failure's record) are not counted."""
    now = code_provenance()
    others: dict[str, int] = {}
    for record in results.runs:
        provenance = record.get("provenance")
        if not provenance or failed(record):
            continue
        code = provenance.get("code")
        if not code or (code.get("version"), code.get("commit"), code.get("modified")) != (
                now["version"], now["commit"], now["modified"]):
            others[describe(code)] = others.get(describe(code), 0) + 1
    if others:
        listed = "; ".join(f"{name}: {n} run(s)" for name, n in others.items())
        raise InputError(f"{where} holds runs trained by other code ({listed}) than this ({describe(now)}); new "
                         "runs would mix two implementations in one table: give the comparison a new --out folder, "
                         "or pass --allow-other-code to add them anyway (the report lists the code of every run)")


def is_finished(run: PlannedRun) -> bool:
    """Whether ``run`` finished in its folder (its result.json is there)."""
    return (run.folder / RESULT_FILE).exists()


def from_pretrained(run: PlannedRun, pretraining: Path) -> PlannedRun:
    """``run`` fine-tuned from the finished pretraining run in the folder ``pretraining`` (``init_from``)."""
    return dataclasses.replace(run, config=dataclasses.replace(run.config, init_from=str(pretraining.resolve())))


@dataclass(frozen=True)
class StudyResults:
    """What a study of several comparisons (widths, or the baselines study's tasks) returns: each comparison's
    results by its width or task (``parts``), and every run of them (``runs``)."""

    parts: dict
    runs: list[dict]

    @classmethod
    def of(cls, parts: dict) -> "StudyResults":
        return cls(parts, [run for results in parts.values() for run in results.runs])
