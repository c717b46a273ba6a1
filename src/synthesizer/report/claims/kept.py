"""The kept-share scale of a group and the 95% interval of a loss on it (see the package docstring)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np

from ..stats import DEFAULT_RESAMPLES, bootstrap_differences, per_example_of, t_interval
from ..tables import Group, Row, at_chance
from .verdicts import CANNOT_TELL, NOT_RUN, Check, Gap

MIN_SEEDS = 3                 # paired seeds needed for a seed interval
BOOTSTRAP_RESAMPLES = DEFAULT_RESAMPLES
BOOTSTRAP_SEED = 0

# the trivial predictor's score in the records' "baselines", by metric (generation metrics: copy_source_<metric>)
TRIVIAL_KEYS = {"perplexity": "unigram_perplexity", "accuracy": "majority_accuracy"}
TRIVIAL_NAMES = {"unigram_perplexity": "the unigram model", "majority_accuracy": "the majority class"}
CONSTANT_PREDICTION_METRICS = ("pearson", "spearman")  # a constant prediction correlates 0

@dataclass
class Scale:
    """The kept-share scale of a group: ``share(x) = (phi(x) - phi(trivial)) / gain``."""

    metric: str
    trivial: float
    why: str                  # "copying the source (copy_source_bleu 8.3)"
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


def trivial_score(group: Group) -> tuple[float, str] | None:
    """The trivial predictor's test score for the group's metric, and what it is."""
    key = trivial_key(group.metric)
    for row in group.rows:
        if row.baselines.get(key) is not None:
            name = TRIVIAL_NAMES.get(key, "copying the source")
            return row.baselines[key], f"{name} ({key} {row.baselines[key]:.4g})"
    if group.metric in CONSTANT_PREDICTION_METRICS:
        return 0.0, "a constant prediction (0)"
    if group.chance:
        return group.chance["value"], f"the at-chance line ({group.chance['why']})"
    return None


def _phis(row: Row, scale: Scale) -> dict[int, float]:
    """phi of the metric per ok seed (seed -> value); a row without per-seed values gives its mean (key None)."""
    if row.metric_values:
        return {s: scale.phi(v) for s, v in zip(row.ok_seeds, row.metric_values)}
    return {} if row.metric_mean is None else {None: scale.phi(row.metric_mean)}


def scale_of(group: Group) -> Scale | Check:
    """The group's kept-share scale, or the "cannot tell" Check saying why it is undefined."""
    vanilla = group.row("vanilla")
    if vanilla is None or vanilla.metric_mean is None:
        why = "not in this run" if vanilla is None else f"has no metric ({vanilla.status})"
        return Check(CANNOT_TELL, f"{group.key}: vanilla {why}, so there is no kept-share scale", key=group.key)
    trivial = trivial_score(group)
    if trivial is None:
        return Check(CANNOT_TELL, f"{group.key}: no trivial predictor's score for {group.metric}, so no kept-share scale",
                     key=group.key)
    scale = Scale(group.metric, trivial[0], trivial[1], group.metric == "perplexity", group.higher_is_better)
    gains = [p - scale.phi(scale.trivial) for p in _phis(vanilla, scale).values()]
    scale.gain = statistics.fmean(gains)
    unclear = (scale.gain <= 0 or at_chance(vanilla.metric_mean, group.chance, group.higher_is_better)
               or (len(gains) >= MIN_SEEDS and t_interval(gains).low <= 0))
    if unclear:
        return Check(CANNOT_TELL, f"{group.key}: vanilla's {group.metric} {vanilla.metric_mean:.4g} does not clearly "
                                  f"beat {scale.why}, so the kept-share scale is undefined", key=group.key)
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


def _interval(group: Group, scale: Scale, row: Row, ref: Row
              ) -> tuple[float, float, str, list[float], tuple[float, float] | None]:
    """The 95% interval of the loss of ``row`` against ``ref``, how it was measured, the paired per-seed
    losses of its t-interval ([] without one) and the bootstrap's own interval (None without one)."""
    pr, pf = _phis(row, scale), _phis(ref, scale)
    seeds = sorted((set(pr) & set(pf)) - {None})
    bounds, how, per_seed, over_examples = [], [], [], None
    if len(seeds) >= MIN_SEEDS:
        per_seed = [(pf[s] - pr[s]) / scale.gain for s in seeds]
        iv = t_interval(per_seed)
        bounds.append((iv.low, iv.high))
        how.append(f"t-interval over {len(seeds)} paired seeds")
    boot = _bootstrap(group, row, ref, seeds)
    if boot is not None and not scale.log:  # per-example kinds are higher-is-better scores
        diffs, n, k = boot
        low, high = np.quantile(diffs / scale.gain, [0.025, 0.975])
        over_examples = (float(low), float(high))
        bounds.append(over_examples)
        how.append(f"paired bootstrap over {n} test examples ({BOOTSTRAP_RESAMPLES} resamples"
                   f"{f', {k} seeds' if k > 1 else ''})")
    if not bounds:
        n = min(len(pr), len(pf))
        reason = (f"{n} seed: no uncertainty measured" if n <= 1 else
                  f"{n} paired seeds: no uncertainty measured (a seed interval needs {MIN_SEEDS})")
        return -math.inf, math.inf, reason + ", no per-example statistics", [], None
    return min(b[0] for b in bounds), max(b[1] for b in bounds), "95% " + " and ".join(how), per_seed, over_examples


def _show(row: Row, group: Group, scale: Scale | None = None) -> str:
    if row.metric_mean is None:
        return f"({row.status})"
    std = f" ± {row.metric_std:.3g}" if row.metric_std is not None else ""
    kept = ""
    if scale is not None:
        phis = _phis(row, scale)
        kept = f" (keeps {scale.share(statistics.fmean(phis.values())):.1%})"
    return f"{group.metric} {row.metric_mean:.4g}{std}{kept}"


def quality_gap(group: Group, row: Row, ref: Row, scale: Scale) -> Gap | None:
    """Loss of ``row`` against ``ref`` on the kept-share scale; None if either has no metric and did not diverge."""
    if row.metric_mean is None or ref.metric_mean is None:
        if row.diverged and ref.metric_mean is not None:
            return Gap(math.inf, math.inf, math.inf, f"{row.kind} diverged, {ref.kind} {_show(ref, group, scale)}")
        if ref.diverged and row.metric_mean is not None:
            return Gap(-math.inf, -math.inf, -math.inf, f"{ref.kind} diverged, {row.kind} {_show(row, group, scale)}")
        return None
    value = scale.share(statistics.fmean(_phis(ref, scale).values())) - scale.share(statistics.fmean(_phis(row, scale).values()))
    low, high, how, per_seed, over_examples = _interval(group, scale, row, ref)
    shown = "" if not math.isfinite(low) else f" [{low:+.1%}, {high:+.1%}]"
    note = (f"{row.kind} {_show(row, group, scale)} vs {ref.kind} {_show(ref, group, scale)}, kept shares of vanilla's "
            f"gain over {scale.why}: loss {value:+.1%}{shown} ({how})")
    return Gap(value, low, high, note, f"loss {value:+.1%}{shown}", how, per_seed, over_examples)


def _scored_at_chance(row: Row | None) -> bool:
    return row is not None and row.at_chance


def _missing(group: Group, *kinds: str) -> Check | None:
    """A "not run" check when a variant is absent; a "cannot tell" one when a variant has no metric, or when
    every variant compared scored at chance (then their differences are noise, not signal)."""
    absent = [k for k in kinds if group.row(k) is None]
    if absent:
        return Check(NOT_RUN, f"{group.key}: {', '.join(absent)} not in this run", key=group.key)
    if len(kinds) > 1 and all(_scored_at_chance(group.row(k)) for k in kinds):
        return Check(CANNOT_TELL, f"{group.key}: {' and '.join(kinds)} {'both' if len(kinds) == 2 else 'all'} score at "
                                  f"chance ({group.chance.get('why', '')})", key=group.key)
    no_metric = [k for k in kinds if group.row(k).metric_mean is None and not group.row(k).diverged]
    if no_metric:
        return Check(CANNOT_TELL, f"{group.key}: no metric for {', '.join(no_metric)} ({group.row(no_metric[0]).status})",
                     key=group.key)
    return None


def _quality_gap(group: Group, kind: str, ref: str) -> Gap | Check:
    """The loss of ``kind`` vs ``ref``, or the "cannot tell" Check that stands in for it."""
    missing = _missing(group, kind, ref)
    if missing:
        return missing
    scale = scale_of(group)
    if isinstance(scale, Check):
        return scale
    gap = quality_gap(group, group.row(kind), group.row(ref), scale)
    return gap if gap is not None else Check(CANNOT_TELL, f"{group.key}: {kind} vs {ref}: no comparable metric",
                                             key=group.key)
