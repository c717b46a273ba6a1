"""The `none` floor: is a kind clearly better than no mixing between tokens, and does `none` pass a check too."""

from __future__ import annotations

import math

from ..tables import Group, Share
from .kept import Gap, Scale, _quality_gap, quality_gap, scale_of
from .verdicts import CONTRADICTS, SUPPORTS, Check, judge_at_most

NONE_KIND = "none"  # the token mixer without mixing (attention/none.py): each position keeps its own value
NO_ATTENTION_USE = f"not clearly better than {NONE_KIND}"  # the interval fails to exclude no gain: said with it
USE_NOT_MEASURED = "use of attention not measured"  # against none, with no interval: one seed, no per-example scores


def attention_use_gap(group: Group, kind: str) -> Gap | None:
    """The loss of ``kind`` against the group's ``none`` row (negative = better than no mixing), with the
    claims' interval; None without a ``none`` row or a metric on either side. Where the kept-share scale
    is undefined the loss is in raw units of the metric (phi): only the sign of the interval matters here."""
    row, floor = group.row(kind), group.row(NONE_KIND)
    if kind == NONE_KIND or row is None or floor is None or row.metric_mean is None or floor.metric_mean is None:
        return None
    scale = scale_of(group)
    if isinstance(scale, Check):
        scale = Scale(group.metric, 1.0, "", group.metric == "perplexity", group.higher_is_better, gain=1.0)
    return quality_gap(group, row, floor, scale)


def uses_attention(group: Group, kind: str) -> bool | None:
    """Is ``kind`` clearly better than ``none`` (the whole 95% interval of its loss against none below 0, as
    the claims' "better" checks)? None where the group has no ``none`` row or either has no metric. The one
    rule behind the tables' flag and the claims' attention gate."""
    gap = attention_use_gap(group, kind)
    # strictly below 0: identical predictions give a bootstrap interval of exactly [0, 0], which is no gain
    return None if gap is None else gap.high < 0.0


def measured(gap: Gap) -> bool:
    """Was an interval measured for ``gap`` (not the unbounded one of a single seed without per-example scores)?"""
    return not (gap.low == -math.inf and gap.high == math.inf)


def flag_unused_attention(group: Group) -> None:
    """Mark every row not clearly better than ``none`` (:func:`uses_attention`): ``ignores_attention`` and a
    status note; where no interval could be measured, only the note that says so. Only where the group trained
    ``none``."""
    for row in group.rows:
        if uses_attention(group, row.kind) is not False:
            continue
        if row.attention_note:  # flagged already
            continue
        gap = attention_use_gap(group, row.kind)
        row.ignores_attention = measured(gap)
        row.attention_note = NO_ATTENTION_USE if row.ignores_attention else USE_NOT_MEASURED
        interval = f" ({gap.brief or gap.note})" if row.ignores_attention else ""
        row.status = f"{row.status}; {row.attention_note}{interval}"

NO_NONE = f"no `{NONE_KIND}` trained"

def no_attention_passes(group: Group, ref: str, threshold: float) -> str:
    """The floor of an "at most ``threshold`` worse than ``ref``" check: "" where ``none`` (no mixing between
    tokens) clearly fails it (its whole loss interval above ``threshold``), so passing it says something about
    attention; else why a pass does not ("none keeps 93% [92%, 94%] of vanilla's gain: no attention passes
    this test too"), which turns the pass into "cannot tell". Without ``none`` it cannot be checked."""
    if group.row(NONE_KIND) is None:
        return f"{NO_NONE}, so whether a model without attention passes this test too is not checked"
    gap = _quality_gap(group, NONE_KIND, ref)
    if isinstance(gap, Check):
        return f"whether a model without attention passes this test too is not measured ({gap.text.split(': ', 1)[-1]})"
    verdict = judge_at_most(gap, threshold)
    if verdict == CONTRADICTS:
        return ""
    if ref == "vanilla":
        shown = f"{NONE_KIND} keeps {Share(1 - gap.value, 1 - gap.high, 1 - gap.low).text()} of vanilla's gain"
    else:
        shown = f"{NONE_KIND} vs {ref}: {gap.brief or gap.note}"
    return f"{shown}: no attention {'passes' if verdict == SUPPORTS else 'may pass'} this test too"

def _attention_use_note(group: Group, *kinds: str) -> str:
    """"; fixed_random not clearly better than none (loss ... [..., ...], how measured)" for flagged kinds."""
    notes = []
    for kind in kinds:
        row = group.row(kind)
        gap = attention_use_gap(group, kind) if row is not None and row.ignores_attention else None
        if gap is not None:
            notes.append(f"{kind} {NO_ATTENTION_USE} ({gap.brief or gap.note}{f', {gap.how}' if gap.how else ''})")
    return "".join(f"; {n}" for n in notes)
