"""What a check measured, as data: the gaps with their intervals and what a check found (a :class:`Reason` with
the numbers it needs). Nothing here is text: :mod:`.wording` writes every sentence from these records."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum, auto


@dataclass(frozen=True)
class Gap:
    """A loss (positive = worse / slower) with its interval ``[low, high]`` (unbounded: nothing measured)."""

    value: float
    low: float
    high: float
    per_seed: tuple[float, ...] = ()                  # the paired per-seed losses of the t-interval, if any
    over_examples: tuple[float, float] | None = None  # the bootstrap's interval over test examples, if any

    @property
    def measured(self) -> bool:
        """Was an interval measured (not the unbounded one of a single seed without per-example scores)?"""
        return not (self.low == -math.inf and self.high == math.inf)


@dataclass(frozen=True)
class Trivial:
    """The trivial predictor of a kept-share scale: a score the records hold under ``key``, else the group's
    at-chance line (``chance``: its reason as the table gives it), else a constant prediction (correlation 0)."""

    value: float
    key: str = ""
    chance: str | None = None


@dataclass(frozen=True)
class Interval:
    """How a gap's 95% interval was measured: a t-interval over ``t_seeds`` paired seeds (0: none) and/or a
    paired bootstrap over ``examples`` test examples of ``boot_seeds`` seeds (0: none); with neither,
    ``seeds`` is how many seeds the two variants share (nothing measured)."""

    t_seeds: int = 0
    examples: int = 0
    boot_seeds: int = 0
    seeds: int = 0


@dataclass(frozen=True)
class Side:
    """One variant as a quality gap shows it: its mean score (None: diverged), sample std and kept share."""

    kind: str
    mean: float | None
    std: float | None = None
    kept: float | None = None  # on the gap's kept-share scale (None: no such scale)


@dataclass(frozen=True, kw_only=True)
class QualityGap(Gap):
    """The loss of ``row`` against ``ref`` in units of vanilla's gain over ``over`` (None: raw units of the
    metric, where the kept-share scale is undefined); ``interval`` None where one of them diverged."""

    metric: str
    row: Side
    ref: Side
    over: Trivial | None
    interval: Interval | None


@dataclass(frozen=True)
class Timing:
    """The shape of a one-at-a-time timing: batch and sequence length as recorded, and the repeats paired."""

    batch: int | None
    seq: int | None
    repeats: int


@dataclass(frozen=True, kw_only=True)
class SpeedGap(Gap):
    """The slowdown of ``kind`` against ``ref`` (relative, positive = slower), give or take ``tolerance``:
    from the speeds of runs trained side by side (units per second), or, where ``timing`` is given, from
    their one-at-a-time timing (median step times in seconds)."""

    kind: str
    ref: str
    speeds: tuple[float, float]
    tolerance: float
    timing: Timing | None = None


@dataclass(frozen=True)
class Contribution:
    """A quality gap re-expressed in units of vanilla's gain over ``none`` (what its attention adds):
    ``shares`` are the two kinds' shares of it, given where the reference is not vanilla."""

    kind: str
    ref: str
    value: float
    low: float
    high: float
    shares: tuple[float, float] | None = None


class Decide(Enum):
    """What more seeds would do for an interval that straddles its threshold."""

    NEVER = auto()         # the mean is on the threshold
    TOO_MANY = auto()      # more than the cap
    SEEDS_DECIDE = auto()  # the seed interval decides; the one over test examples does not
    ABOUT = auto()         # about ``n`` seeds would


@dataclass(frozen=True)
class Seeds:
    decide: Decide
    n: int = 0                    # ABOUT: the seeds that would decide
    have: int = 0                 # ABOUT: the paired seeds measured
    examples_straddle: bool = False  # ABOUT: the interval over test examples straddles the threshold too


class Need(Enum):
    """What a quality rule asks of its kind against its reference."""

    AT_MOST = auto()      # a loss of at most the threshold
    BETTER = auto()       # better (threshold 0)
    BEHIND = auto()       # clearly behind: a loss above the threshold
    BEST = auto()         # better than the best other variant


class Reason(Enum):
    """Why a check has its verdict: what it measured, or what kept it from measuring."""

    NO_TASK = auto()             # the run has no task at all
    NOT_ABOUT = auto()           # the run has no task of the claim's family
    DIAGNOSTICS = auto()         # the run holds only the diagnostics, which are not judged
    NOT_IN_RUN = auto()          # ``kinds`` were not trained
    AT_CHANCE = auto()           # every one of ``kinds`` scores at chance
    NO_METRIC = auto()           # ``kinds`` have no metric (``status``: the first one's)
    NO_VANILLA = auto()          # no kept-share scale: vanilla not trained
    VANILLA_NO_METRIC = auto()   # no kept-share scale: vanilla has no metric (``status``)
    NO_TRIVIAL = auto()          # no kept-share scale: no trivial predictor's score for ``metric``
    SCALE_UNDEFINED = auto()     # vanilla (``value``) does not clearly beat ``trivial``
    NOT_COMPARABLE = auto()      # ``kinds`` have no comparable metric
    NO_OTHER = auto()            # no other variant to rank ``kinds[0]`` against
    QUALITY = auto()             # the quality ``gap`` of ``kinds`` judged by ``need`` against ``threshold``
    NOT_TIMED = auto()           # ``kinds`` were not timed one at a time (``gap``: their speeds side by side)
    TIMED = auto()               # the one-at-a-time ``gap`` of ``kinds``: faster?
    NO_PARAM_COUNT = auto()      # no attention parameter count for ``kinds``
    PARAMS = auto()              # attention parameter ``counts`` of ``kinds``: fewer?
    PARAMS_CANNOT_SAVE = auto()  # the factorization cannot save parameters at ``max_len`` (``saves_from``)


@dataclass(frozen=True)
class Finding:
    """What a check found: its :class:`Reason` and the numbers that reason needs (the rest left out)."""

    reason: Reason
    kinds: tuple[str, ...] = ()
    gap: QualityGap | SpeedGap | None = None
    need: Need | None = None
    threshold: float = 0.0
    source: str = ""                     # QUALITY: where the threshold comes from (the claim's row says)
    contribution: Contribution | None = None
    seeds: Seeds | None = None
    unused: tuple[QualityGap, ...] = ()  # QUALITY: the compared kinds not clearly better than none, against it
    counts: tuple[int, int] | None = None
    max_len: int | None = None
    saves_from: int | None = None        # PARAMS_CANNOT_SAVE: 0 = at no length counted
    metric: str = ""
    value: float | None = None
    trivial: Trivial | None = None
    status: str = ""                     # a row's status as its table shows it
    chance: str = ""                     # AT_CHANCE: the group's at-chance line, as its table gives it
    family: str = ""                     # NOT_ABOUT: the claim's family of tasks


class Floor(Enum):
    """Why a pass of an "at most ... worse" check says nothing about attention: ``none`` passes it too."""

    NOT_CHECKED = auto()    # no ``none`` trained
    NOT_MEASURED = auto()   # ``none``'s gap could not be measured (``cause``)
    PASSES = auto()         # the whole interval of ``none``'s loss passes
    MAY_PASS = auto()       # it straddles the threshold


@dataclass(frozen=True)
class NoneFloor:
    """A pass turned into "cannot tell" because a model without attention passes (or may pass) too."""

    floor: Floor
    ref: str = ""
    gap: QualityGap | None = None
    cause: Finding | None = None


class GateReason(Enum):
    """Whether attention matters on a task: vanilla clearly better than ``none`` or not, or why it is unknown."""

    USES = auto()                    # vanilla clearly better than none: checks stand
    NOTHING_MEASURABLE = auto()      # not clearly better, with an interval: every check cannot tell
    CONTRIBUTION_NOT_MEASURED = auto()  # no interval at all (one seed, no per-example scores): the same
    NO_NONE = auto()                 # not checked (decided checks provisional): no ``none`` trained
    NONE_NO_METRIC = auto()          # ... ``none`` has no metric (``status``)
    NO_VANILLA = auto()              # ... vanilla not trained
    VANILLA_NO_METRIC = auto()       # ... vanilla has no metric (``status``)


@dataclass(frozen=True)
class Gate:
    """The attention gate of group ``key``: ``use`` True (attention matters), False (it contributes nothing
    measurable: ``gap`` is vanilla's loss against none) or None (not checked: ``reason`` says why)."""

    key: str
    use: bool | None
    reason: GateReason
    gap: QualityGap | None = None
    seeds: Seeds | None = None
    status: str = ""
