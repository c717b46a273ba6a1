"""Attention's contribution: a kind's share of vanilla's gain over `none`, and how many seeds would decide."""

from __future__ import annotations

import math
import statistics

from ..stats import SEEDS_CAP, seeds_to_decide
from ..tables import Group, Share
from .floor import NONE_KIND, uses_attention
from .kept import Gap, Scale, _phis, scale_of
from .verdicts import Check

def attention_scale(group: Group) -> Scale | None:
    """The scale of attention's contribution: ``share(x) = (phi(x) - phi(none)) / (phi(vanilla) - phi(none))``,
    phi of each the mean over its ok seeds (log scale for perplexity, as the kept share). None without
    ``none`` or vanilla metrics, or where vanilla is not better than ``none`` on average (no gain to share)."""
    vanilla, floor = group.row("vanilla"), group.row(NONE_KIND)
    if vanilla is None or floor is None or vanilla.metric_mean is None or floor.metric_mean is None:
        return None
    scale = Scale(group.metric, floor.metric_mean, f"{NONE_KIND} (no mixing)", group.metric == "perplexity",
                  group.higher_is_better)
    scale.origin = statistics.fmean(_phis(floor, scale).values())
    scale.gain = statistics.fmean(_phis(vanilla, scale).values()) - scale.origin
    return scale if scale.gain > 0 else None


def _contribution_note(group: Group, kind: str, ref: str, gap: Gap) -> str:
    """"random keeps 91% [85%, 97%] of what vanilla's attention adds (its gain over none)": the loss ``gap``
    re-expressed in units of vanilla's gain over ``none`` (both intervals are linear in the unit, so the
    kept share's interval rescales exactly); "" where vanilla does not clearly beat ``none`` or is absent."""
    attention, scale = attention_scale(group), scale_of(group)
    if attention is None or isinstance(scale, Check) or not uses_attention(group, "vanilla"):
        return ""
    if not (math.isfinite(gap.value) and math.isfinite(gap.low) and math.isfinite(gap.high)):
        return ""
    unit = scale.gain / attention.gain
    value, low, high = gap.value * unit, gap.low * unit, gap.high * unit
    adds = f"of what vanilla's attention adds (its gain over {NONE_KIND})"
    if ref == "vanilla":
        return f"{kind} keeps {Share(1 - value, 1 - high, 1 - low).text()} {adds}"
    kept = {k: attention.share(statistics.fmean(_phis(group.row(k), attention).values())) for k in (kind, ref)}
    return (f"{kind} keeps {kept[kind]:.0%} and {ref} {kept[ref]:.0%} {adds}: a loss of {value:+.1%} "
            f"[{low:+.1%}, {high:+.1%}] of it")


def seeds_note(gap: Gap, threshold: float) -> str:
    """For an interval that straddles ``threshold``: about how many seeds would decide, from the paired
    per-seed losses (their mean and spread held), or "" where there are none."""
    if len(gap.per_seed) < 2:
        return ""
    n = seeds_to_decide(gap.per_seed, threshold)
    if n is None:
        return "no number of seeds would decide: the mean is on the threshold"
    if n > SEEDS_CAP:
        return f"more than {SEEDS_CAP} seeds would be needed to decide"
    if n <= len(gap.per_seed):  # the seeds decide; the interval over test examples is the wider one
        return "the seeds alone decide; the interval over test examples does not"
    text = f"about {n} seeds would decide, if the mean and spread of these {len(gap.per_seed)} held"
    if gap.over_examples is not None and gap.over_examples[0] <= threshold <= gap.over_examples[1]:
        text += " (the seed interval; the one over test examples straddles the threshold too)"
    return text
