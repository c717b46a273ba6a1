"""The kept-share scale of a group and the 95% interval of a loss on it (see the package docstring)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np

from ..stats import DEFAULT_RESAMPLES, bootstrap_differences, per_example_of, t_interval
from ..tables import Group, Row, at_chance
from .records import Finding, Interval, QualityGap, Reason, Side, Trivial
from .verdicts import CANNOT_TELL, NOT_RUN, Check

MIN_SEEDS = 3                 # paired seeds needed for a seed interval
BOOTSTRAP_RESAMPLES = DEFAULT_RESAMPLES
BOOTSTRAP_SEED = 0

# the trivial predictor's score in the records' "baselines", by metric (generation metrics: copy_source_<metric>)
TRIVIAL_KEYS = {"perplexity": "unigram_perplexity", "accuracy": "majority_accuracy"}
CONSTANT_PREDICTION_METRICS = ("pearson", "spearman")  # a constant prediction correlates 0


@dataclass
class Scale:
    """The kept-share scale of a group: ``share(x) = (phi(x) - phi(trivial)) / gain``."""

    metric: str
    trivial: float
    over: Trivial | None      # the trivial predictor the share is of (None: a scale of another origin)
    log: bool                 # perplexity: phi = -ln x
    higher_is_better: bool
    gain: float = 0.0         # phi(vanilla) - phi(trivial), > 0 where the scale is defined
    origin: float | None = None  # phi of the share's 0 when not phi(trivial): none's mean phi (attention_scale)

    def phi(self, x: float) -> float:
        if self.log:
            return -math.log(x)
        return x if self.higher_is_better else -x

    def share(self, phi: float) -> float:
        return (phi - (self.phi(self.trivial) if self.origin is None else self.origin)) / self.gain


def trivial_key(metric: str) -> str:
    """The records' ``baselines`` key of the trivial predictor of ``metric``."""
    return TRIVIAL_KEYS.get(metric, f"copy_source_{metric}")


def trivial_score(group: Group) -> Trivial | None:
    """The trivial predictor of the group's metric, with its test score."""
    key = trivial_key(group.metric)
    for row in group.rows:
        if row.baselines.get(key) is not None:
            return Trivial(row.baselines[key], key=key)
    if group.metric in CONSTANT_PREDICTION_METRICS:
        return Trivial(0.0)
    if group.chance:
        return Trivial(group.chance["value"], chance=group.chance["why"])
    return None


def phis(row: Row, scale: Scale) -> dict[int, float]:
    """phi of the metric per ok seed (seed -> value); a row without per-seed values gives its mean (key None)."""
    if row.metric_values:
        return {s: scale.phi(v) for s, v in zip(row.ok_seeds, row.metric_values)}
    return {} if row.metric_mean is None else {None: scale.phi(row.metric_mean)}


def _cannot_tell(group: Group, reason: Reason, **numbers) -> Check:
    return Check(CANNOT_TELL, Finding(reason, **numbers), group.key)


def scale_of(group: Group) -> Scale | Check:
    """The group's kept-share scale, or the "cannot tell" Check saying why it is undefined."""
    vanilla = group.row("vanilla")
    if vanilla is None:
        return _cannot_tell(group, Reason.NO_VANILLA)
    if vanilla.metric_mean is None:
        return _cannot_tell(group, Reason.VANILLA_NO_METRIC, status=vanilla.status)
    trivial = trivial_score(group)
    if trivial is None:
        return _cannot_tell(group, Reason.NO_TRIVIAL, metric=group.metric)
    scale = Scale(group.metric, trivial.value, trivial, group.metric == "perplexity", group.higher_is_better)
    gains = [p - scale.phi(scale.trivial) for p in phis(vanilla, scale).values()]
    scale.gain = statistics.fmean(gains)
    unclear = (scale.gain <= 0 or at_chance(vanilla.metric_mean, group.chance, group.higher_is_better)
               or (len(gains) >= MIN_SEEDS and t_interval(gains).low <= 0))
    if unclear:
        return _cannot_tell(group, Reason.SCALE_UNDEFINED, metric=group.metric, value=vanilla.metric_mean,
                            trivial=trivial)
    return scale


def _per_example(row: Row, seeds: list[int], metric: str) -> dict[int, tuple[str, np.ndarray]]:
    out = {}
    for s, stats in zip(row.ok_seeds, row.per_example):
        found = per_example_of(stats, metric) if s in seeds else None
        if found:
            out[s] = (found[0], np.asarray(found[1], dtype=np.float64))
    return out


def _bootstrap(group: Group, row: Row, ref: Row, seeds: list[int]) -> tuple[np.ndarray, int, int] | None:
    """Resampled raw differences ``metric(ref) - metric(row)`` (seed-averaged) where both rows hold
    per-example statistics of the same test examples: (differences, examples, seeds)."""
    a, b = _per_example(ref, seeds, group.metric), _per_example(row, seeds, group.metric)
    both = [s for s in seeds if s in a and s in b and a[s][0] == b[s][0] and a[s][1].shape == b[s][1].shape]
    if not both or len({a[s][0] for s in both}) > 1 or len({a[s][1].shape for s in both}) > 1:
        return None
    kind = a[both[0]][0]
    diffs = bootstrap_differences(kind, np.stack([a[s][1] for s in both]), np.stack([b[s][1] for s in both]),
                                  BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED)
    return diffs, a[both[0]][1].shape[0], len(both)


def interval(group: Group, scale: Scale, row: Row, ref: Row
             ) -> tuple[float, float, Interval, tuple[float, ...], tuple[float, float] | None]:
    """The 95% interval of the loss of ``row`` against ``ref``, how it was measured, the paired per-seed
    losses of its t-interval (() without one) and the bootstrap's own interval (None without one)."""
    pr, pf = phis(row, scale), phis(ref, scale)
    seeds = sorted((set(pr) & set(pf)) - {None})
    bounds, per_seed, over_examples, how = [], (), None, Interval()
    if len(seeds) >= MIN_SEEDS:
        per_seed = tuple((pf[s] - pr[s]) / scale.gain for s in seeds)
        iv = t_interval(list(per_seed))
        bounds.append((iv.low, iv.high))
        how = Interval(t_seeds=len(seeds))
    boot = _bootstrap(group, row, ref, seeds)
    if boot is not None and not scale.log:  # per-example kinds are higher-is-better scores
        diffs, n, k = boot
        low, high = np.quantile(diffs / scale.gain, [0.025, 0.975])
        over_examples = (float(low), float(high))
        bounds.append(over_examples)
        how = Interval(t_seeds=how.t_seeds, examples=n, boot_seeds=k)
    if not bounds:
        return -math.inf, math.inf, Interval(seeds=min(len(pr), len(pf))), (), None
    return min(b[0] for b in bounds), max(b[1] for b in bounds), how, per_seed, over_examples


def side(row: Row, scale: Scale | None) -> Side:
    """``row`` as a gap shows it, with its kept share on ``scale`` (None: without)."""
    kept = None if scale is None or row.metric_mean is None else scale.share(statistics.fmean(phis(row, scale).values()))
    return Side(row.kind, row.metric_mean, row.metric_std, kept)


def quality_gap(group: Group, row: Row, ref: Row, scale: Scale, shown: bool = True) -> QualityGap | None:
    """Loss of ``row`` against ``ref`` on the kept-share scale; None if either has no metric and did not diverge.
    ``shown``: the sides show their kept shares on ``scale`` (not where it is a stand-in)."""
    on = scale if shown else None
    over = scale.over if shown else None
    if row.metric_mean is None or ref.metric_mean is None:
        if row.diverged and ref.metric_mean is not None:
            return QualityGap(math.inf, math.inf, math.inf, metric=group.metric, row=Side(row.kind, None),
                              ref=side(ref, on), over=over, interval=None)
        if ref.diverged and row.metric_mean is not None:
            return QualityGap(-math.inf, -math.inf, -math.inf, metric=group.metric, row=side(row, on),
                              ref=Side(ref.kind, None), over=over, interval=None)
        return None
    value = scale.share(statistics.fmean(phis(ref, scale).values())) - scale.share(statistics.fmean(phis(row, scale).values()))
    low, high, how, per_seed, over_examples = interval(group, scale, row, ref)
    return QualityGap(value, low, high, per_seed, over_examples, metric=group.metric, row=side(row, on),
                      ref=side(ref, on), over=over, interval=how)


def missing(group: Group, *kinds: str) -> Check | None:
    """A "not run" check when a variant is absent; a "cannot tell" one when a variant has no metric, or when
    every variant compared scored at chance (then their differences are noise, not signal)."""
    absent = tuple(k for k in kinds if group.row(k) is None)
    if absent:
        return Check(NOT_RUN, Finding(Reason.NOT_IN_RUN, absent), group.key)
    if len(kinds) > 1 and all(group.row(k).at_chance for k in kinds):
        return _cannot_tell(group, Reason.AT_CHANCE, kinds=kinds, chance=group.chance.get("why", ""))
    no_metric = tuple(k for k in kinds if group.row(k).metric_mean is None and not group.row(k).diverged)
    if no_metric:
        return _cannot_tell(group, Reason.NO_METRIC, kinds=no_metric, status=group.row(no_metric[0]).status)
    return None


def gap_or_check(group: Group, kind: str, ref: str) -> QualityGap | Check:
    """The loss of ``kind`` vs ``ref``, or the "cannot tell" Check that stands in for it."""
    absent = missing(group, kind, ref)
    if absent:
        return absent
    scale = scale_of(group)
    if isinstance(scale, Check):
        return scale
    gap = quality_gap(group, group.row(kind), group.row(ref), scale)
    return gap if gap is not None else _cannot_tell(group, Reason.NOT_COMPARABLE, kinds=(kind, ref))
