"""Attention's contribution: a kind's share of vanilla's gain over `none`, and how many seeds would decide."""

from __future__ import annotations

import math
import statistics

from ..stats import SEEDS_CAP, seeds_to_decide
from ..tables import Group
from .floor import NONE_KIND, uses_attention
from .kept import Scale, phis, scale_of
from .records import Contribution, Decide, Gap, Seeds
from .verdicts import Check


def attention_scale(group: Group) -> Scale | None:
    """The scale of attention's contribution: ``share(x) = (phi(x) - phi(none)) / (phi(vanilla) - phi(none))``,
    phi of each the mean over its ok seeds (log scale for perplexity, as the kept share). None without
    ``none`` or vanilla metrics, or where vanilla is not better than ``none`` on average (no gain to share)."""
    vanilla, floor = group.row("vanilla"), group.row(NONE_KIND)
    if vanilla is None or floor is None or vanilla.metric_mean is None or floor.metric_mean is None:
        return None
    scale = Scale(group.metric, floor.metric_mean, None, group.metric == "perplexity", group.higher_is_better)
    scale.origin = statistics.fmean(phis(floor, scale).values())
    scale.gain = statistics.fmean(phis(vanilla, scale).values()) - scale.origin
    return scale if scale.gain > 0 else None


def contribution(group: Group, kind: str, ref: str, gap: Gap) -> Contribution | None:
    """The loss ``gap`` re-expressed in units of vanilla's gain over ``none`` (both intervals are linear in the
    unit, so the kept share's interval rescales exactly), with both kinds' shares of that gain where ``ref`` is
    not vanilla; None where vanilla does not clearly beat ``none`` or is absent."""
    attention, scale = attention_scale(group), scale_of(group)
    if attention is None or isinstance(scale, Check) or not uses_attention(group, "vanilla"):
        return None
    if not (math.isfinite(gap.value) and math.isfinite(gap.low) and math.isfinite(gap.high)):
        return None
    unit = scale.gain / attention.gain
    shares = None
    if ref != "vanilla":
        kept = [attention.share(statistics.fmean(phis(group.row(k), attention).values())) for k in (kind, ref)]
        shares = (kept[0], kept[1])
    return Contribution(kind, ref, gap.value * unit, gap.low * unit, gap.high * unit, shares)


def seeds_to_settle(gap: Gap, threshold: float) -> Seeds | None:
    """For an interval that straddles ``threshold``: about how many seeds would decide, from the paired
    per-seed losses (their mean and spread held), or None where there are none."""
    if len(gap.per_seed) < 2:
        return None
    n = seeds_to_decide(list(gap.per_seed), threshold)
    if n is None:
        return Seeds(Decide.NEVER)
    if n > SEEDS_CAP:
        return Seeds(Decide.TOO_MANY)
    if n <= len(gap.per_seed):  # the seeds decide; the interval over test examples is the wider one
        return Seeds(Decide.SEEDS_DECIDE)
    straddles = gap.over_examples is not None and gap.over_examples[0] <= threshold <= gap.over_examples[1]
    return Seeds(Decide.ABOUT, n, len(gap.per_seed), straddles)
