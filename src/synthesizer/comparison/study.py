"""What ``synthesizer compare run`` (or ``plan``) is asked for, and what it decides from that once.

:class:`Options` is the request as the command line (or a caller of ``run_comparison``) gives it: a
preset at a size, and whatever the user set in place of the preset's defaults. :func:`resolve` turns it
into a :class:`Study`, the one place where the defaults are filled in and every option is checked: the
folder, the attention kinds, the tasks, the widths, the learning rates, the position schemes, and so
which kind of study it is (:data:`DESIGNS`). ``run`` (:mod:`.run`) and ``plan`` (:mod:`.command`) both
consume a Study; a study made of several comparisons (a width, a rate, a task of the baselines study)
resolves each of them the same way.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..attention.names import MODEL_POSITIONS
from ..errors import InputError, check_out_dir, positive_int
from .presets import DEFAULT_KINDS, Preset, PresetTask, get_preset, sized_tasks, steps_overrides, task_overrides

# where a study lives without --out; the one spelling of the default folder
DEFAULT_OUT = "runs/compare-{preset}-{size}"

# the designs, in the order they nest: a scale study's widths may each be a baselines or a tuning study, a
# baselines study's kinds are tuned; each part is resolved again as a study of its own
SCALE, BASELINES, TUNING, COMPARISON = "scale", "baselines", "tuning", "comparison"
DESIGNS = (SCALE, BASELINES, TUNING, COMPARISON)


@dataclass(frozen=True)
class Options:
    """What ``synthesizer compare`` is asked for: a preset at a size, the kinds and seeds, the folder,
    and how to train (``jobs`` runs at a time with ``threads`` torch threads each). None: the preset's."""

    preset: str
    size: str = "quick"
    kinds: list[str] | None = None  # default: the preset's kinds, else DEFAULT_KINDS
    baselines: list[str] | None = None  # default: the preset's baselines
    seeds: int = 1
    out: str | Path | None = None  # default: DEFAULT_OUT
    steps: int | None = None
    overrides: tuple[str, ...] = ()
    jobs: int = 1
    threads: int | None = None
    heatmaps: bool = True
    command: str = ""  # the command line, kept in results.json
    allow_other_code: bool = False  # add runs to a folder whose runs were trained by other code
    widths: tuple[int, ...] | None = None  # a scale study's model widths (comparison/scale.py); None: the preset's
    tasks: tuple[str, ...] | None = None  # the preset's tasks (config names) to train; None: all of them
    lrs: tuple[float, ...] | None = None  # a learning-rate sweep (comparison/tuning.py); None: the preset's
    # the learning rate of a (task group ``<task>-<data>``, kind), where the sweep chose one (comparison/tuning.py)
    lr_by_run: tuple[tuple[str, str, float], ...] = ()
    positions: tuple[str, ...] | None = None  # a baselines study's position schemes (comparison/baselines.py)


@dataclass(frozen=True)
class Study:
    """A request resolved: every default filled in, every option checked, nothing built or written yet.
    ``options`` is the request with the decided folder, widths, rates and schemes in place of None, so a
    part of the study derived from it (``dataclasses.replace``) starts from the same decisions."""

    design: str  # one of DESIGNS: a scale, baselines or tuning study, or one comparison
    options: Options
    spec: Preset
    out: Path
    kinds: tuple[str, ...]  # checked and canonical, the preset's baselines (or --baselines) after the kinds
    tasks: tuple[PresetTask, ...]  # the preset's tasks that train at this size (and --tasks), in its order
    left_out: Mapping[str, str]  # {config: why} of the preset's tasks left out at this size
    widths: tuple[int, ...]  # () for one width, the task's own
    lrs: tuple[float, ...]  # () for no sweep: the preset's learning rate
    positions: tuple[str, ...]  # () for no baselines study

    @property
    def preset(self) -> str:
        return self.spec.name

    @property
    def size(self) -> str:
        return self.options.size

    @property
    def seeds(self) -> int:
        return self.options.seeds


def resolve(options: Options) -> Study:
    """``options`` decided and checked once; ValueError (before any folder is made) naming a bad preset, size,
    kind, task, count, width, rate, scheme or folder."""
    spec = get_preset(options.preset)
    positive_int("--seeds", options.seeds)
    for name, value in (("--jobs", options.jobs), ("--threads", options.threads)):
        if value is not None:
            positive_int(name, value)
    kinds = check_kinds([*(options.kinds or spec.kinds or DEFAULT_KINDS),
                         *(spec.baselines if options.baselines is None else options.baselines)])
    if options.steps is not None:
        steps_overrides(options.steps)
    tasks, left_out = _tasks(spec, options)
    widths = _widths(spec.widths.get(options.size, ()) if options.widths is None else options.widths)
    lrs = _lrs(spec.lrs if options.lrs is None else options.lrs)
    positions = _positions(spec.positions if options.positions is None else options.positions)
    out = Path(options.out or DEFAULT_OUT.format(preset=options.preset, size=options.size))
    check_out_dir("--out", out)
    design = SCALE if widths else BASELINES if positions else TUNING if lrs else COMPARISON
    decided = dataclasses.replace(options, out=out, widths=widths, lrs=lrs, positions=positions)
    return Study(design, decided, spec, out, tuple(kinds), tuple(tasks), left_out, widths, lrs, positions)


def check_kinds(kinds: list[str]) -> list[str]:
    """Canonical, de-duplicated kinds (one kind, or a kind per layer: ``models.config.attention_text``);
    InputError naming a bad one and the allowed kinds."""
    from ..models.config import attention_text

    out = []
    for kind in kinds:
        name = attention_text(kind)
        if name not in out:
            out.append(name)
    return out


def _tasks(spec: Preset, options: Options) -> tuple[list[PresetTask], dict[str, str]]:
    """The preset's tasks at the size, only those of ``--tasks`` where given, each checked to have the size;
    and ``{config: why}`` of those the size leaves out."""
    runnable, left_out = sized_tasks(spec, options.size)
    if options.tasks is not None:
        known = [t.config for t in runnable]
        for name in options.tasks:
            if name not in known:
                raise InputError(f"--tasks: preset {options.preset!r} has no task {name!r} at the {options.size} size; "
                                 f"its tasks: {', '.join(known)}")
        runnable = [t for t in runnable if t.config in options.tasks]
    for task in runnable:  # each has the size, or none runs
        task_overrides(task, options.size, options.preset)
    return runnable, left_out


def _widths(widths: tuple[int, ...]) -> tuple[int, ...]:
    """The model widths, in the order given, each once; InputError for one that is not a positive integer."""
    for width in widths:
        positive_int("--widths", width)
    return tuple(dict.fromkeys(widths))


def _lrs(lrs: tuple[float, ...]) -> tuple[float, ...]:
    """The learning rates as floats, in the order given, each once; InputError for one that is not a positive
    finite number."""
    for lr in lrs:
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
            raise InputError(f"--lrs: a learning rate must be a positive number, got {lr!r}")
    return tuple(dict.fromkeys(float(lr) for lr in lrs))


def _positions(schemes: tuple[str, ...]) -> tuple[str, ...]:
    """The position schemes, in the order given, each once; InputError naming an unknown one and the allowed."""
    for scheme in schemes:
        if scheme not in MODEL_POSITIONS:
            raise InputError(f"--positions: unknown scheme {scheme!r}; allowed: {', '.join(MODEL_POSITIONS)}")
    return tuple(dict.fromkeys(schemes))
