"""Training speed: a kind against another, timed one at a time (the claims' judge) or side by side (information)."""

from __future__ import annotations

import statistics

from ..tables import Group, Row
from .records import Finding, Reason, SpeedGap, Timing
from .verdicts import CANNOT_TELL, Check, judge_at_most

SPEED_TOLERANCE = 0.05


def slowdown(row: Row, ref: Row) -> SpeedGap | None:
    """Relative speed deficit of ``row`` against ``ref`` (positive = slower), from training speed (units per second)."""
    if not row.tokens_per_s or not ref.tokens_per_s:
        return None
    value = (ref.tokens_per_s - row.tokens_per_s) / ref.tokens_per_s
    spread = ((row.tokens_per_s_std or 0.0) + (ref.tokens_per_s_std or 0.0)) / ref.tokens_per_s
    u = max(spread, SPEED_TOLERANCE)
    return SpeedGap(value, value - u, value + u, kind=row.kind, ref=ref.kind,
                    speeds=(row.tokens_per_s, ref.tokens_per_s), tolerance=u)


def timed_slowdown(timing: dict, kind: str, ref: str) -> SpeedGap | None:
    """Relative slowdown of ``kind`` against ``ref`` (positive = slower) in the group's one-at-a-time timing
    (comparison/timing.py): the median of the paired per-repeat ratios of step times, less 1, give or take
    ``SPEED_TOLERANCE`` or half the ratios' interquartile range if larger; None where either was not timed."""
    kinds = timing.get("kinds", {})
    if kind not in kinds or ref not in kinds:
        return None
    ratios = [a / b for a, b in zip(kinds[kind]["step_s"], kinds[ref]["step_s"]) if b > 0]
    if not ratios:
        return None
    value = statistics.median(ratios) - 1.0
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    u = max(SPEED_TOLERANCE, (q3 - q1) / 2)
    return SpeedGap(value, value - u, value + u, kind=kind, ref=ref,
                    speeds=(kinds[kind]["median_s"], kinds[ref]["median_s"]), tolerance=u,
                    timing=Timing(timing.get("batch"), timing.get("seq"), len(ratios)))


def faster_check(group: Group, kind: str, ref: str) -> Check:
    """Is ``kind`` faster than ``ref``? Judged from the group's one-at-a-time timing only; the speeds of runs
    trained side by side are quoted as information where there is none."""
    gap = None if group.timing is None else timed_slowdown(group.timing, kind, ref)
    if gap is None:
        side_by_side = slowdown(group.row(kind), group.row(ref))
        return Check(CANNOT_TELL, Finding(Reason.NOT_TIMED, (kind, ref), side_by_side), group.key)
    # faster = slowdown < 0, i.e. slowdown <= 0 with the margin
    return Check(judge_at_most(gap, 0.0), Finding(Reason.TIMED, (kind, ref), gap), group.key)
