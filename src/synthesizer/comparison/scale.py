"""A scale study: one comparison per model width, then the report that reads the trend across widths.

``synthesizer compare run --preset scale`` (or ``--widths 32 64 128`` on any preset) trains every task of the
preset at each width ``W`` as an ordinary comparison in ``OUT/width-W/``: the preset's overrides at the
size asked for, then ``model.d_model=W model.d_ff=4W`` (heads and layers stay as the task has them), then
the user's ``--set``. Everything a comparison does holds per width: resuming, refusing runs of another
config or code, the one-at-a-time timing, its own report. The seeds come in rounds (seed 0 at every
width, then seed 1 at every width, ...), so an interrupted study already reads across all widths; the
timing runs once, in the last round. ``OUT/report.md`` (:mod:`..report.scale`) is rewritten after each
width, from the widths' ``results.json`` alone.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from ..report.scale import WIDTH_PREFIX, write_scale_report
from ..runs.lock import study_lock
from ..runs.results import Results
from .plan import StudyResults
from .study import Options, Study

FFN_RATIO = 4  # d_ff = 4 d_model at every width, as in the paper's (and most) Transformers


def width_overrides(width: int) -> list[str]:
    """The overrides that set a model's width: ``d_model`` and the feed-forward layer with it."""
    return [f"model.d_model={width}", f"model.d_ff={FFN_RATIO * width}"]


def at_width(study: Study, width: int, seeds: int | None = None) -> Options:
    """The comparison of one width: its folder ``OUT/width-W``, the width's overrides before the user's."""
    options = study.options
    return dataclasses.replace(options, widths=(), out=study.out / f"{WIDTH_PREFIX}{width}",
                               overrides=(*width_overrides(width), *options.overrides),
                               seeds=options.seeds if seeds is None else seeds)


def compare_widths(study: Study, hooks, compare_fn: Callable) -> StudyResults:
    """Train the comparison at every width of ``study``, seed round by seed round, with
    ``compare_fn(options, hooks)`` (run.compare); the report across widths is rewritten after each width.
    Returns each width's results (by width) and every run; the last round's timing only (``hooks.time_fn``)."""
    out = study.out
    out.mkdir(parents=True, exist_ok=True)
    done: dict[int, Results] = {}
    with study_lock(out):
        for seeds in range(1, study.seeds + 1):
            last = seeds == study.seeds
            for width in study.widths:
                hooks.log(f"width {width}, seeds 0-{seeds - 1}: {out / f'{WIDTH_PREFIX}{width}'}")
                round_hooks = hooks if last else dataclasses.replace(hooks, time_fn=None)
                done[width] = compare_fn(at_width(study, width, seeds), round_hooks)
                md = write_scale_report(out)
                hooks.log(f"scale report: {md}")
    return StudyResults.of(done)
