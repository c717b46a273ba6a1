"""The flag forms of ``synthesizer compare`` from before its subcommands, kept for one release.

``--preset P ...`` was ``run``, ``--preset P ... --plan`` was ``plan``, and ``--render DIR ...``,
``--time DIR`` and ``--index DIR`` the subcommands of those names. :func:`translate` rewrites such a
command line into its subcommand's, saying so in one line on standard error; the subcommand's parser then
judges the rest, so an option the mode never used is refused as before. Delete this module, and its call
in :mod:`.main`, in the release after the subcommands'.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Container

from ..errors import InputError

MODES = ("preset", "render", "time", "index")  # the flags that chose what compare did: one of them


def _flags() -> argparse.ArgumentParser:
    """The flags that chose the mode, and those of training that ``--plan`` ignored (``plan`` has none of
    them); every other word is left for the subcommand's parser, in its order."""
    p = argparse.ArgumentParser(prog="synthesizer compare", add_help=False)
    p.add_argument("--preset")
    p.add_argument("--render", nargs="+")
    p.add_argument("--time")
    p.add_argument("--index")
    p.add_argument("--plan", action="store_true")
    p.add_argument("--jobs")
    p.add_argument("--no-heatmaps", action="store_true")
    return p


def translate(argv: list[str], subcommands: Container[str]) -> list[str]:
    """``argv`` in the subcommand form: as it is when it starts with a subcommand or uses no flag of a mode
    (``--help``, or nothing: the parser says what to give); else the flag form rewritten, after a one-line
    notice on standard error naming the new form. InputError for two modes at once."""
    if not argv or argv[0] in subcommands:
        return argv
    flags, rest = _flags().parse_known_args(argv)
    given = [name for name in MODES if getattr(flags, name)]
    if not given:
        return argv
    if len(given) > 1:
        raise InputError(f"give one subcommand (run, plan, render, time or index; see `synthesizer compare --help`), "
                         f"not {' and '.join(f'--{name}' for name in given)} together")
    mode = given[0]
    training = ([] if flags.jobs is None else ["--jobs", flags.jobs]) + (["--no-heatmaps"] if flags.no_heatmaps else [])
    if mode == "preset":
        new = ["plan", "--preset", flags.preset, *rest] if flags.plan else ["run", "--preset", flags.preset, *rest,
                                                                             *training]
    else:  # what these modes never used is handed on, for the subcommand's parser to refuse
        where = flags.render if mode == "render" else [getattr(flags, mode)]
        new = [mode, *where, *rest, *training, *(["--plan"] if flags.plan else [])]
    old = "--plan" if mode == "preset" and flags.plan else f"--{mode}"
    print(f"note: `synthesizer compare {old} ...` is deprecated and goes in the next release; the same command now: "
          f"synthesizer compare {shlex.join(new)}", file=sys.stderr)
    return new
