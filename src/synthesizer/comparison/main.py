"""`synthesizer compare`: train a list of attention kinds on a preset's tasks, then write the report.

    synthesizer compare run --preset lm [--size quick|standard|full] [--kinds ...] [--baselines linformer ...]
                        [--seeds N] [--out DIR] [--steps N] [--set key=value ...] [--jobs N --threads T]
    synthesizer compare run --preset scale [--widths 32 64 128 ...] ...   (a scale study: one comparison per width)
    synthesizer compare run --preset P --lrs 1e-3 3e-3 1e-2 ...   (every kind at its best learning rate: OUT/tuned)
    synthesizer compare run --preset baselines ...   (the strongest vanilla's positions, then every kind tuned)
    synthesizer compare plan --preset lm ...   (the options of run, less --jobs and --no-heatmaps)
    synthesizer compare render DIR [DIR ...] [--out DIR] [--against DIR ...]
    synthesizer compare time DIR
    synthesizer compare index DIR

Runs live in ``OUT/runs/<task>-<data>/<kind>/seed<k>/``; finished ones are read back, interrupted ones
resumed (:mod:`.run`); a folder whose runs other code trained takes no new ones without
``--allow-other-code``. At the end the kinds are timed one at a time at each task's shapes
(:mod:`.timing`; ``time DIR`` does only that, on a finished comparison, and re-renders it). With ``--jobs N``
the runs train N at a time, each in its own process (small models use few cores well, so on a 2-core machine
two one-thread runs finish a comparison almost twice as fast as one). ``plan`` trains nothing: it prints the
``synthesizer train`` line of every run still to train for another scheduler (:mod:`.command`), and ``run``
with the same options then writes the report. ``run`` and ``plan`` decide what they are asked once
(:func:`.study.resolve`). The flag forms of earlier releases (``--preset ...``, ``--plan``, ``--render``,
``--time``, ``--index``) still work, with a notice (:mod:`.legacy`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ..errors import InputError, check_out_dir
from .presets import DEFAULT_KINDS, PRESETS, SIZES
from ..report.index import write_index
from ..runs.results import FILENAME, Results
from ..report.scale import is_scale_folder, width_folders, write_scale_report
from ..runs.lock import FolderLock, comparison_lock, study_lock
from ..runs.code import code_provenance
from ..report.summary import render, write_and_print
from .baselines import is_baselines_folder
from ..report.baselines import write_baselines_report
from .legacy import translate
from .study import DEFAULT_OUT, Options, Study, resolve

SUBCOMMANDS = {  # name -> its line in `synthesizer compare --help` (one line of an 80-column terminal)
    "run": "train the runs of a preset's comparison, then write its report",
    "plan": "print the `synthesizer train` line of every run still to train",
    "render": "write the report again from existing results.json files",
    "time": "time a finished comparison's kinds one at a time, re-render it",
    "index": "rewrite the verdicts table of a results index (DIR/README.md)",
}


def _split_list(values: list[str] | None) -> list[str] | None:
    """``["a,b", "c"]`` -> ``["a", "b", "c"]``; None stays None (the preset's default)."""
    if values is None:
        return None
    return [v for item in values for v in item.split(",") if v.strip()]


def _add_study_options(p: argparse.ArgumentParser) -> None:
    """The options of ``run`` and ``plan``: what to train, and where."""
    p.add_argument("--preset", required=True, choices=sorted(PRESETS), metavar="PRESET",
                   help=f"the experiment family to run: {', '.join(sorted(PRESETS))}")
    p.add_argument("--size", choices=SIZES, default="quick",
                   help="quick: a demonstration, at most about 5 minutes on 2 cores with --jobs 2; standard: "
                        "trained until vanilla's validation curve has flattened, 30 minutes to 3 hours per "
                        "preset for 3 seeds with --jobs 2 (only for the presets that have it); full: the shipped "
                        "CPU configs as they are (default: quick)")
    p.add_argument("--kinds", nargs="+", metavar="KIND",
                   help=f"attention kinds to train, separated by spaces; a comma joins the layers' kinds of one model "
                        f"(random,vanilla: vanilla in every second layer; default: {' '.join(DEFAULT_KINDS)})")
    p.add_argument("--baselines", nargs="*", metavar="NAME",
                   help="baselines to train as well (linformer, lightconv, dynamicconv; default: the preset's)")
    p.add_argument("--seeds", type=int, default=1,
                   help="seeds per variant (0..N-1); on a folder of an earlier comparison only the missing seeds train")
    p.add_argument("--widths", nargs="+", type=int, metavar="W",
                   help="a scale study: train every task at each model width W (model.d_model=W, model.d_ff=4W) in "
                        "OUT/width-W, then write OUT/report.md, the gaps between the kinds against width (default: "
                        "the preset's; --preset scale: 32 64 128 at the standard size, 16 32 at quick; other presets: "
                        "one width, the task's own)")
    p.add_argument("--lrs", nargs="+", type=float, metavar="LR",
                   help="a learning-rate sweep: train the first seed of every kind at each rate (OUT/lr-RATE), pick "
                        "each kind's rate by its validation loss, then train every seed of every kind at its own rate "
                        "(OUT/tuned, whose report judges the claims; default: the preset's rates, if any)")
    p.add_argument("--positions", nargs="+", metavar="SCHEME",
                   help="a baselines study: vanilla with each position scheme (learned, sinusoidal, rope, relative, "
                        "alibi, none), then every kind with the strongest, each at its best learning rate, per task "
                        "in OUT/TASK (default: the preset's; --preset baselines: all six)")
    p.add_argument("--tasks", nargs="+", metavar="CONFIG", help="train only these tasks of the preset (config names)")
    p.add_argument("--out", help=f"comparison folder (default: {DEFAULT_OUT.format(preset='<preset>', size='<size>')})")
    p.add_argument("--steps", type=int, help="training steps per run (scales eval/warm-up to fit)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for every run, e.g. train.lr=1e-3 (repeatable)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="CPU threads for torch in each run (default: torch's choice with one job, the cores "
                        "shared out with several; 1 is faster on a busy machine)")
    p.add_argument("--allow-other-code", action="store_true",
                   help="add runs to a folder whose runs were trained by another version or commit of synthesizer "
                        "(refused by default: one table, one implementation)")


def _add_execution_options(p: argparse.ArgumentParser) -> None:
    """The options of ``run`` alone: how the runs train here."""
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="runs to train at a time, each in its own process (default 1; 2 on a 2-core machine "
                        "nearly halves the wall time of small presets)")
    p.add_argument("--no-heatmaps", action="store_true", help="skip loading checkpoints for attention heatmaps")


def parser() -> argparse.ArgumentParser:
    """``synthesizer compare SUBCOMMAND ...``: each subcommand with its own options and its handler."""
    p = argparse.ArgumentParser(prog="synthesizer compare", description=__doc__.split("\n\n")[0],
                                epilog="`synthesizer compare SUBCOMMAND --help` gives a subcommand's options.")
    sub = p.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    made = {name: sub.add_parser(name, help=line, description=line) for name, line in SUBCOMMANDS.items()}
    for name in ("run", "plan"):
        _add_study_options(made[name])
    _add_execution_options(made["run"])
    made["plan"].set_defaults(jobs=1, no_heatmaps=False)  # the plan trains nothing here
    made["render"].add_argument("dirs", nargs="+", metavar="DIR",
                                help="comparison folders (or their results.json), a scale study's or a baselines "
                                     "study's folder")
    made["render"].add_argument("--out", help="where to write the merged report (default: the first DIR)")
    made["render"].add_argument("--against", nargs="+", metavar="DIR",
                                help="with a baselines study: comparison folders (the committed ones it re-judges, "
                                     "e.g. docs/results/lm) whose verdicts on the same tasks the report puts beside "
                                     "the new ones")
    made["time"].add_argument("dir", metavar="DIR", help="a comparison folder: its kinds are timed at each task's "
                                                         "shapes, the timing stored in its results.json")
    made["index"].add_argument("dir", metavar="DIR", help="a results index: DIR/README.md, its table made from the "
                                                          "results.json of every standard-size comparison under DIR")
    for name, handler in (("run", _run), ("plan", _plan), ("render", _render), ("time", _time), ("index", _index)):
        made[name].set_defaults(handler=handler)
    return p


def _options(args: argparse.Namespace, command: str) -> Options:
    """The request of ``run`` or ``plan`` as :func:`.study.resolve` takes it."""
    for kind in args.kinds or []:
        if "," in kind:  # a comma once separated kinds here: say what it means now, since both spellings parse
            print(f"note: --kinds {kind!r} is one model with a kind per layer (a hybrid); give separate kinds as "
                  "separate arguments: --kinds vanilla random", file=sys.stderr)
    return Options(args.preset, args.size, args.kinds, _split_list(args.baselines), args.seeds,
                   args.out, args.steps, tuple(args.overrides), jobs=args.jobs, threads=args.threads,
                   heatmaps=not args.no_heatmaps, command=command, allow_other_code=args.allow_other_code,
                   widths=None if args.widths is None else tuple(args.widths),
                   lrs=None if args.lrs is None else tuple(args.lrs),
                   positions=None if args.positions is None else tuple(_split_list(args.positions)),
                   tasks=None if args.tasks is None else tuple(_split_list(args.tasks)))


def _run(args: argparse.Namespace, command: str) -> int:
    """``compare run``: 0 once the report is written, 1 if no run finished."""
    results = run_study(resolve(_options(args, command)))  # looked up here: a caller may wrap it (tests do)
    return 0 if results.runs else 1


def _plan(args: argparse.Namespace, command: str) -> int:
    """``compare plan``: the lines on standard output, what they are on standard error."""
    for line in plan_commands(resolve(_options(args, command))):
        print(line, flush=True)
    return 0


def _render(args: argparse.Namespace, command: str) -> int:
    """``compare render DIR ...``: a scale or baselines study's report in its folder, else the comparisons'
    results merged into one report in ``--out`` (default: the first DIR)."""
    if len(args.dirs) == 1 and is_scale_folder(args.dirs[0]):  # a scale study: its report across widths
        render_scale(args.dirs[0], args.out)
        return 0
    if len(args.dirs) == 1 and is_baselines_folder(args.dirs[0]):  # a baselines study: its own report
        if args.out:
            raise InputError("a baselines study's report is written in its own folder: leave out --out")
        with FolderLock(args.dirs[0], "baselines study folder"):  # the study's lock, as while it trains
            print(f"baselines report: {write_baselines_report(args.dirs[0], args.against or [])}")
        return 0
    if args.against:
        raise InputError("--against puts a baselines study's verdicts beside other comparisons': give render "
                         "a baselines study's folder")
    out = Path(args.out) if args.out else Results.folder_of(args.dirs[0])
    check_out_dir("--out", out)
    with comparison_lock(out):  # merged and written back under its lock: no compare or time adds to it meanwhile
        render(args.dirs, out, command=command, rendered_by=code_provenance())
    return 0


def _time(args: argparse.Namespace, command: str) -> int:
    time_comparison(existing_comparison("time", args.dir), command)
    return 0


def _index(args: argparse.Namespace, command: str) -> int:
    print(f"verdicts written into {write_index(args.dir)}")
    return 0


def existing_comparison(option: str, path: str | Path) -> Path:
    """The comparison folder that ``path`` names (the folder, or its results.json); InputError naming ``option``
    for a scale study's folder (its comparisons are its width folders) or a path that holds no results.json."""
    path = Results.folder_of(path)
    if is_scale_folder(path):
        widths = ", ".join(str(folder) for folder in width_folders(path).values())
        raise InputError(f"{option} {path}: a scale study's folder; give one of its comparisons, the width folders "
                         f"({widths})")
    if not Results.exists(path):
        raise InputError(f"{option} {path}: no {FILENAME} there; give a comparison folder (the --out of "
                         "`synthesizer compare run`)")
    return path


def time_comparison(folder: Path, command: str) -> None:
    """``time DIR``: time the kinds of the comparison in ``folder`` one at a time, then re-render it, holding
    its lock from reading its results.json to writing it back."""
    with comparison_lock(folder):
        results = add_timings(Results.load(folder))
        results.set_rendered_by(code_provenance())
        results.add_command(command)
        write_and_print(results, folder, print)


# The training side (torch) is imported by the commands that train or time: rendering imports no torch.
def run_study(study: Study, **hooks):
    """:func:`.run.run_study`, imported when a study trains."""
    from .run import run_study as run

    return run(study, **hooks)


def plan_commands(study: Study) -> list[str]:
    """:func:`.command.plan_commands`, imported when a study is planned."""
    from .command import plan_commands as plan

    return plan(study)


def add_timings(results: Results) -> Results:
    """:func:`.timing.add_timings`, imported when a comparison is timed: rendering imports no torch."""
    from .timing import add_timings as timed

    return timed(results)


def render_scale(root: str, out: str | None) -> None:
    """``render ROOT`` of a scale study: its report across widths, written in ROOT under the study's lock."""
    if out:
        raise InputError("a scale study's report is written in its own folder: leave out --out")
    with study_lock(root):
        print(f"scale report: {write_scale_report(root)}")


def main(argv: list[str] | None = None) -> int:
    """``synthesizer compare SUBCOMMAND ARGS``: 0 once the report is written (or the plan printed), 1 if no run
    finished. A comparison stopped by a signal raises KeyboardInterrupt (the command's status 130), what
    finished saved. A flag form of an earlier release is translated into its subcommand, with a notice."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = "synthesizer compare " + shlex.join(argv)  # as typed: results.json and the report's header keep it
    args = parser().parse_args(translate(argv, SUBCOMMANDS))
    return args.handler(args, command)
