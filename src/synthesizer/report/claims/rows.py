"""What the claims' rules say of each row of a group, as its own record (:class:`.tables.RowJudgement`): the
flag "not clearly better than none" and the kept and attention shares. The rows themselves stay as built."""

from __future__ import annotations

import statistics

from ..tables import Group, RowJudgement, Share
from .contribution import attention_scale
from .floor import attention_use_gap, uses_attention
from .kept import Scale, interval, phis, scale_of
from .verdicts import Check


def share_of(group: Group, kind: str, scale: Scale) -> Share | None:
    """``kind``'s share of vanilla's gain on ``scale`` (kept share: :func:`scale_of`; attention's: :func:`attention_scale`),
    its interval ``1 -`` that of its loss against vanilla (the claims' interval); None without a metric."""
    row, vanilla = group.row(kind), group.row("vanilla")
    if row is None or vanilla is None or row.metric_mean is None or vanilla.metric_mean is None:
        return None
    value = scale.share(statistics.fmean(phis(row, scale).values()))
    if kind == "vanilla":
        return Share(1.0, 1.0, 1.0)
    low, high, *_ = interval(group, scale, row, vanilla)
    return Share(value, 1.0 - high, 1.0 - low)


def judge_rows(group: Group) -> dict[str, RowJudgement]:
    """Each row's judgement, by kind: not clearly better than ``none`` (:func:`uses_attention`, only where the
    group trained ``none``: with the loss against it, or "not measured" where no interval could be), its kept
    share (of vanilla's gain over the trivial predictor) and its attention share (of vanilla's gain over
    ``none``), where the scales are defined; the latter only where vanilla clearly beats none."""
    scale = scale_of(group)
    attention = attention_scale(group) if uses_attention(group, "vanilla") else None
    judged = {}
    for row in group.rows:
        gap = attention_use_gap(group, row.kind) if uses_attention(group, row.kind) is False else None
        loss = None if gap is None or not gap.measured else (gap.value, gap.low, gap.high)
        judged[row.kind] = RowJudgement(
            ignores_attention=loss is not None, use_not_measured=gap is not None and loss is None, loss=loss,
            kept=None if isinstance(scale, Check) else share_of(group, row.kind, scale),
            attention_share=None if attention is None else share_of(group, row.kind, attention))
    return judged
