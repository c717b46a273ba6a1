"""The `none` floor: is a kind clearly better than no mixing between tokens, and does `none` pass a check too."""

from __future__ import annotations

from ..tables import Group
from .kept import Scale, gap_or_check, quality_gap, scale_of
from .records import Floor, NoneFloor, QualityGap
from .verdicts import CONTRADICTS, SUPPORTS, Check, judge_at_most

NONE_KIND = "none"  # the token mixer without mixing (attention/none.py): each position keeps its own value


def attention_use_gap(group: Group, kind: str) -> QualityGap | None:
    """The loss of ``kind`` against the group's ``none`` row (negative = better than no mixing), with the
    claims' interval; None without a ``none`` row or a metric on either side. Where the kept-share scale
    is undefined the loss is in raw units of the metric (phi): only the sign of the interval matters here."""
    row, floor = group.row(kind), group.row(NONE_KIND)
    if kind == NONE_KIND or row is None or floor is None or row.metric_mean is None or floor.metric_mean is None:
        return None
    scale = scale_of(group)
    if isinstance(scale, Check):
        stand_in = Scale(group.metric, 1.0, None, group.metric == "perplexity", group.higher_is_better, gain=1.0)
        return quality_gap(group, row, floor, stand_in, shown=False)
    return quality_gap(group, row, floor, scale)


def uses_attention(group: Group, kind: str) -> bool | None:
    """Is ``kind`` clearly better than ``none`` (the whole 95% interval of its loss against none below 0, as
    the claims' "better" checks)? None where the group has no ``none`` row or either has no metric. The one
    rule behind the tables' flag and the claims' attention gate."""
    gap = attention_use_gap(group, kind)
    # strictly below 0: identical predictions give a bootstrap interval of exactly [0, 0], which is no gain
    return None if gap is None else gap.high < 0.0


def no_attention_passes(group: Group, ref: str, threshold: float) -> NoneFloor | None:
    """The floor of an "at most ``threshold`` worse than ``ref``" check: None where ``none`` (no mixing between
    tokens) clearly fails it (its whole loss interval above ``threshold``), so passing it says something about
    attention; else why a pass does not (``none`` passes or may pass too), which turns the pass into "cannot
    tell". Without ``none`` it cannot be checked."""
    if group.row(NONE_KIND) is None:
        return NoneFloor(Floor.NOT_CHECKED, ref)
    gap = gap_or_check(group, NONE_KIND, ref)
    if isinstance(gap, Check):
        return NoneFloor(Floor.NOT_MEASURED, ref, cause=gap.finding)
    verdict = judge_at_most(gap, threshold)
    if verdict == CONTRADICTS:
        return None
    return NoneFloor(Floor.PASSES if verdict == SUPPORTS else Floor.MAY_PASS, ref, gap)


def unused(group: Group, *kinds: str) -> tuple[QualityGap, ...]:
    """The loss against ``none`` of each of ``kinds`` whose table flags it not clearly better than ``none``."""
    gaps = (attention_use_gap(group, kind) for kind in kinds if group.judged(kind).ignores_attention)
    return tuple(gap for gap in gaps if gap is not None)
