"""``synthesizer compare plan ...``: the ``synthesizer train`` command line of every run still to train,
for any scheduler (a Slurm array, GNU parallel, Kubernetes jobs) to run instead of the local pool.

Each line trains exactly the run the local pool would: the same config name and overrides (the preset's
size, ``--steps``, the user's ``--set``), then its seed (and, when fine-tuning, its pretraining folder),
the kind and its run folder. ``--resume`` makes a line safe to run again (a run stopped halfway
continues from its checkpoint; a fresh folder starts as without it). Paths are as the comparison
names them, so the lines run from the folder ``compare plan`` ran in. ``compare run`` with the same
options afterwards reads the finished folders back and writes the report.
"""

from __future__ import annotations

import json
import shlex
import sys
from typing import Callable

from ..runs.results import FILENAME, Results
from ..runs.plan import PlannedRun
from .scale import at_width
from .plan import Plan, build_comparison, check_same_code, from_pretrained, is_finished, plan_runs, pretraining_runs
from .study import BASELINES, SCALE, TUNING, Study, resolve
from ..errors import InputError

PROGRAM = "synthesizer"


def train_command(run: PlannedRun, threads: int | None = None) -> str:
    """The ``synthesizer train`` line that trains ``run`` into its folder (one line, quoted for a POSIX shell)."""
    if not run.config_name:
        raise InputError(f"{run.folder}: its config was not built from a config name, so no command trains it")
    sets = [*run.overrides, f"seed={run.seed}"]  # after the user's: the comparison's seed wins, as in the pool
    if run.config.init_from is not None:  # quoted as YAML: any folder name reads back as a string
        sets.append(f"init_from={json.dumps(str(run.config.init_from))}")
    args = [PROGRAM, "train", "--config", run.config_name, "--attention", run.kind]
    for item in sets:
        args += ["--set", item]
    args += ["--out", str(run.folder), "--resume", "--quiet"]
    if threads is not None:
        args += ["--threads", str(threads)]
    return shlex.join(args)


def plan_commands(study: Study, config_fn: Callable | None = None,
                  log: Callable[[str], None] | None = None) -> list[str]:
    """The command lines of the runs of ``study``'s comparison (or, a scale study, of every width's) not
    finished yet; nothing is written.

    For a pretrained preset, while a pretraining run the fine-tuning needs is unfinished, only the
    pretraining lines (the fine-tuning ones follow from the same plan once they have finished).
    ``log`` (default: standard error) says what the lines are and what to run next."""
    if config_fn is None:
        from ..tasks.config import ExperimentConfig

        config_fn = ExperimentConfig.from_file
    log = log or (lambda line: print(line, file=sys.stderr))
    if study.design in (TUNING, BASELINES):
        raise InputError("compare plan lists the runs of one comparison, and a study with --lrs or --positions chooses "
                         "its later runs (the rates, the position scheme) from the finished ones: train it with "
                         "compare run (it resumes), or plan one of its comparisons with --set train.lr=... / "
                         "model.positions=...")
    if study.design == SCALE:  # the lines of every width's comparison, each in its own folder, its lines named
        return [line for width in study.widths for line in plan_commands(
            resolve(at_width(study, width)), config_fn, lambda text, w=width: log(f"width {w}: {text}"))]
    comparison = build_comparison(study, config_fn, log)
    results = Results.load_or_empty(comparison.out)
    plan = plan_runs(comparison, results)
    plan.log_kept(comparison.out / FILENAME, log)
    todo = [run for run in plan.runs if not is_finished(run)]
    if todo and not study.options.allow_other_code:  # refused now, as the report would refuse them once trained
        check_same_code(results, comparison.out / FILENAME)
    pretraining = pretraining_runs(comparison, Plan(todo))
    unfinished = [run for run in pretraining if not is_finished(run)]
    if unfinished:
        log(f"{len(unfinished)} pretraining run(s) to train first; once they have finished, the same compare plan "
            f"gives the {len(todo)} fine-tuning run(s) that start from them")
        return [train_command(run, study.options.threads) for run in unfinished]
    folders = {(run.kind, run.seed): run.folder for run in pretraining}  # empty without a pretraining step
    todo = [from_pretrained(run, folders[(run.kind, run.seed)]) if folders else run for run in todo]
    rest = "then " if todo else ""
    log(f"{len(todo)} run(s) to train, one line each (in any order, or all at once); {rest}compare run with the "
        "same options writes the report")
    return [train_command(run, study.options.threads) for run in todo]
