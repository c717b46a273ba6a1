"""What the claims add to a group's rows: the none flag and the kept and attention shares."""

from __future__ import annotations

import statistics

from ..tables import Group, Share
from .contribution import attention_scale
from .floor import uses_attention
from .kept import Scale, _interval, _phis, scale_of
from .verdicts import Check

def share_of(group: Group, kind: str, scale: Scale) -> Share | None:
    """``kind``'s share of vanilla's gain on ``scale`` (kept share: :func:`scale_of`; attention's: :func:`attention_scale`),
    its interval ``1 -`` that of its loss against vanilla (the claims' interval); None without a metric."""
    row, vanilla = group.row(kind), group.row("vanilla")
    if row is None or vanilla is None or row.metric_mean is None or vanilla.metric_mean is None:
        return None
    value = scale.share(statistics.fmean(_phis(row, scale).values()))
    if kind == "vanilla":
        return Share(1.0, 1.0, 1.0)
    low, high, *_ = _interval(group, scale, row, vanilla)
    return Share(value, 1.0 - high, 1.0 - low)


def put_shares(group: Group) -> None:
    """Each row's ``kept`` (share of vanilla's gain over the trivial predictor) and ``attention_share`` (of
    vanilla's gain over ``none``), where the scales are defined; the latter only where vanilla clearly beats none."""
    scale = scale_of(group)
    attention = attention_scale(group) if uses_attention(group, "vanilla") else None
    for row in group.rows:
        row.kept = None if isinstance(scale, Check) else share_of(group, row.kind, scale)
        row.attention_share = None if attention is None else share_of(group, row.kind, attention)
