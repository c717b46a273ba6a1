"""Uncertainty of a comparison between two variants: t-intervals over seeds, paired bootstrap over test examples.

No scipy: the t quantiles come from a table (two-sided 95%, df 1..30, then an interpolation in 1/df
towards the normal limit), and the bootstrap is plain numpy.

Per-example statistics (the ``per_example`` field of a run record, see :func:`per_example_of`):

* ``"accuracy"``: ``[n]`` 0/1 per test example; the metric is their mean (a fraction, like ``accuracy``);
* ``"rouge"``: ``[n]`` the example's ROUGE F-measure in points (0..100); the metric is their mean;
* ``"bleu"``: ``[n, 2 + 2N]`` sacreBLEU's sufficient statistics per sentence, ``[hyp_len, ref_len,
  correct_1..N, total_1..N]`` (N = 4 for BLEU, 1 for BLEU-1; ``tasks.metrics.bleu_sentence_stats``); the
  metric is corpus BLEU of the summed statistics, recomputed on every resample.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import positive_int

PER_EXAMPLE_KINDS = ("accuracy", "bleu", "rouge")
DEFAULT_RESAMPLES = 1000

# Two-sided 95% quantiles of Student's t, t_{0.975}(df), df = 1..30.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_Z975 = 1.959964  # the normal limit


@dataclass(frozen=True)
class Interval:
    """A difference and its confidence interval (``low <= estimate <= high`` for the usual cases)."""

    estimate: float
    low: float
    high: float


def t_quantile(df: int, confidence: float = 0.95) -> float:
    """Two-sided quantile of Student's t with ``df`` degrees of freedom (only 95% is tabulated).

    Beyond df 30 the quantile is interpolated linearly in 1/df between t(30) and the normal limit
    (within 0.001 of the exact value for every df)."""
    if confidence != 0.95:
        raise ValueError(f"confidence {confidence} is not tabulated; only 0.95 is")
    positive_int("degrees of freedom", df)
    if df <= len(_T975):
        return _T975[df - 1]
    return _Z975 + (_T975[-1] - _Z975) * len(_T975) / df


def t_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """Confidence interval of the mean of ``values`` (at least 2), e.g. paired per-seed differences."""
    if len(values) < 2:
        raise ValueError(f"a t-interval needs at least 2 values, got {len(values)}")
    mean = statistics.fmean(values)
    half = t_quantile(len(values) - 1, confidence) * statistics.stdev(values) / math.sqrt(len(values))
    return Interval(mean, mean - half, mean + half)


def paired_t_interval(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> Interval:
    """Interval of the mean of ``a[s] - b[s]`` (pairs: seed s of one variant against seed s of the other)."""
    if len(a) != len(b):
        raise ValueError(f"paired values need the same length, got {len(a)} and {len(b)}")
    return t_interval([x - y for x, y in zip(a, b)], confidence)


SEEDS_CAP = 100  # seeds_to_decide searches no further: beyond it, "more than SEEDS_CAP"


def seeds_to_decide(values: Sequence[float], threshold: float, cap: int = SEEDS_CAP) -> int | None:
    """About how many paired seeds would put the t-interval of the mean of ``values`` (per-seed differences)
    wholly on one side of ``threshold``, if their mean and sample std stayed as observed: the smallest
    n >= 2 with ``t(n-1) * std / sqrt(n) < |mean - threshold|``. None when no number would (the mean is on
    the threshold); ``cap + 1`` when more than ``cap`` would be needed."""
    if len(values) < 2:
        raise ValueError(f"a seed spread needs at least 2 values, got {len(values)}")
    distance = abs(statistics.fmean(values) - threshold)
    if distance == 0.0:
        return None
    spread = statistics.stdev(values)
    for n in range(2, cap + 1):  # the t quantile depends on n too: no closed form, so count up
        if t_quantile(n - 1) * spread / math.sqrt(n) < distance:
            return n
    return cap + 1


# ----------------------------------------------------------------------------- per-example statistics

def corpus_bleu_from_stats(sums: np.ndarray) -> np.ndarray:
    """Corpus BLEU (points) from summed sufficient statistics ``[..., 2 + 2N]``, as sacreBLEU computes it
    with its defaults (exponential smoothing of orders without a match, brevity penalty). Returns ``[...]``."""
    sums = np.asarray(sums, dtype=np.float64)
    order = (sums.shape[-1] - 2) // 2
    sys_len, ref_len = sums[..., 0], sums[..., 1]
    correct, total = sums[..., 2:2 + order], sums[..., 2 + order:2 + 2 * order]
    none = correct == 0
    # each order without a match halves the smoothed precision once more: 1 / (2^k total)
    k = np.cumsum(none, axis=-1)
    safe_total = np.where(total > 0, total, 1.0)
    precision = np.where(none, 100.0 / (2.0 ** k * safe_total), 100.0 * correct / safe_total)
    score = np.exp(np.log(precision).mean(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        bp = np.where(sys_len < ref_len, np.exp(1.0 - ref_len / np.where(sys_len > 0, sys_len, 1.0)), 1.0)
    bp = np.where(sys_len > 0, bp, 0.0)
    # no n-gram of some order at all, or no match of any order: BLEU is 0
    zero = (total == 0).any(axis=-1) | none.all(axis=-1)
    return np.where(zero, 0.0, bp * score)


def _as_stats(kind: str, values) -> np.ndarray:
    if kind not in PER_EXAMPLE_KINDS:
        raise ValueError(f"per-example kind {kind!r} is not one of {', '.join(PER_EXAMPLE_KINDS)}")
    x = np.asarray(values, dtype=np.float64)
    if kind == "bleu" and (x.ndim < 2 or x.shape[-1] < 4 or x.shape[-1] % 2):
        raise ValueError(f"BLEU statistics must be [n, 2 + 2N] per sentence, got shape {x.shape}")
    if x.shape[-1 - (kind == "bleu")] == 0:
        raise ValueError("no per-example statistics")
    return x


def metric_of(kind: str, values) -> float | np.ndarray:
    """The corpus metric of per-example statistics ``[..., n]`` (``[..., n, 2 + 2N]`` for BLEU)."""
    x = _as_stats(kind, values)
    return corpus_bleu_from_stats(x.sum(axis=-2)) if kind == "bleu" else x.mean(axis=-1)


def bootstrap_differences(kind: str, a, b, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> np.ndarray:
    """``metric(a) - metric(b)`` on ``n_resamples`` resamples of the test examples, the same resample for
    both systems (paired). ``a``, ``b``: ``[..., n]`` (``[..., n, 2 + 2N]`` for BLEU) on the same examples;
    leading axes (e.g. seeds) share each resample and their differences are averaged. Returns ``[n_resamples]``."""
    a, b = _as_stats(kind, a), _as_stats(kind, b)
    if a.shape != b.shape:
        raise ValueError(f"paired statistics need the same shape, got {a.shape} and {b.shape}")
    positive_int("n_resamples", n_resamples)
    counts = _resample_counts(a.shape[-2] if kind == "bleu" else a.shape[-1], n_resamples, seed)
    diff = _resampled_metric(kind, a, counts) - _resampled_metric(kind, b, counts)       # [..., R]
    return diff.reshape(-1, n_resamples).mean(axis=0)


def bootstrap_metric(kind: str, values, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> np.ndarray:
    """The metric of one system on ``n_resamples`` resamples of its test examples (the draws of
    :func:`bootstrap_differences` with the same seed). ``values``: ``[..., n]`` (``[..., n, 2 + 2N]`` for
    BLEU); leading axes share each resample and are averaged. Returns ``[n_resamples]``."""
    x = _as_stats(kind, values)
    positive_int("n_resamples", n_resamples)
    counts = _resample_counts(x.shape[-2] if kind == "bleu" else x.shape[-1], n_resamples, seed)
    return _resampled_metric(kind, x, counts).reshape(-1, n_resamples).mean(axis=0)


def _resample_counts(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """How often each of ``n`` examples is drawn in each resample: ``[R, n]`` (sums are then one matmul),
    read-only. A report draws the same few (n, R, seed) hundreds of times (every pair of kinds on a test
    set), and drawing is most of its time, so the draws of small enough sets are kept."""
    if n * n_resamples > _CACHED_COUNTS_MAX:
        return _draw_counts(n, n_resamples, seed)
    return _cached_counts(n, n_resamples, seed)


_CACHED_COUNTS_MAX = 2**23  # elements (64 MiB of float64) per kept draw; at most 8 draws are kept


def _draw_counts(n: int, n_resamples: int, seed: int) -> np.ndarray:
    counts = np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=n_resamples).astype(np.float64)
    counts.setflags(write=False)
    return counts


_cached_counts = functools.lru_cache(maxsize=8)(_draw_counts)


def _resampled_metric(kind: str, x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The metric of statistics ``x`` on each resample of ``counts`` ``[R, n]``: ``[..., R]``."""
    if kind == "bleu":
        return corpus_bleu_from_stats(counts @ x)
    return x @ counts.T / counts.shape[1]


def paired_bootstrap(kind: str, a, b, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                     confidence: float = 0.95) -> Interval:
    """Percentile interval of ``metric(a) - metric(b)`` from a paired bootstrap over test examples.

    ``kind``: "accuracy", "rouge" or "bleu" (see the module docstring for the statistics); fixed ``seed``,
    so the interval is reproducible."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    diffs = bootstrap_differences(kind, a, b, n_resamples, seed)
    estimate = float(np.mean(metric_of(kind, a) - metric_of(kind, b)))
    low, high = np.quantile(diffs, [(1 - confidence) / 2, (1 + confidence) / 2])
    return Interval(estimate, float(low), float(high))


def per_example_of(stats: dict | None, metric: str) -> tuple[str, list] | None:
    """``(kind, values)`` from a run record's ``per_example`` field when it holds statistics of ``metric``.

    Field (written by the experiment runner next to ``test_metrics``)::

        "per_example": {"metric": "bleu", "kind": "bleu", "values": [[hyp_len, ref_len, c1..c4, t1..t4], ...]}

    ``metric`` may be left out when the statistics are of the primary metric."""
    if not stats or stats.get("kind") not in PER_EXAMPLE_KINDS or not stats.get("values"):
        return None
    if stats.get("metric", metric) != metric:
        return None
    return stats["kind"], stats["values"]
