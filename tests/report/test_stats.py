"""Statistics behind the claims: t quantiles and intervals, corpus BLEU from sufficient statistics, paired bootstrap."""

import numpy as np
import pytest

from synthesizer.report.stats import (bootstrap_differences, metric_of, paired_bootstrap, paired_t_interval,
                                      per_example_of, t_interval, t_quantile)
from synthesizer.tasks.metrics import bleu_sentence_stats


@pytest.mark.parametrize("df, expected", [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (9, 2.262), (10, 2.228),
                                          (20, 2.086), (30, 2.042)])
def test_t_quantile_table(df, expected):
    assert t_quantile(df) == pytest.approx(expected, abs=5e-4)


@pytest.mark.parametrize("df, expected", [(40, 2.0211), (60, 2.0003), (120, 1.9799), (10_000, 1.9602)])
def test_t_quantile_beyond_the_table_tends_to_the_normal(df, expected):
    assert t_quantile(df) == pytest.approx(expected, abs=1e-3)


def test_t_quantile_rejects_what_it_cannot_give():
    with pytest.raises(ValueError, match="0.9"):
        t_quantile(5, confidence=0.9)
    with pytest.raises(ValueError, match="got 0"):
        t_quantile(0)


def test_t_interval_known_values():
    iv = t_interval([1.0, 2.0, 3.0, 4.0, 5.0])  # mean 3, sd sqrt(2.5), t(4) = 2.776
    assert iv.estimate == 3.0
    assert iv.low == pytest.approx(3 - 2.776 * 2.5 ** 0.5 / 5 ** 0.5, abs=1e-9)
    assert iv.high == pytest.approx(4.963, abs=1e-3)
    paired = paired_t_interval([10.0, 12.0, 11.0], [9.0, 10.0, 10.0])  # differences 1, 2, 1
    assert paired.estimate == pytest.approx(4 / 3)
    assert paired.high - paired.estimate == pytest.approx(4.303 * (1 / 3) ** 0.5 / 3 ** 0.5, abs=1e-9)
    with pytest.raises(ValueError, match="at least 2"):
        t_interval([1.0])


SENTENCES = [  # (hypothesis, reference): matches of every order, no 4-gram match, a short hypothesis, no match
    ("the cat sat on the mat", "the cat sat on the mat"),
    ("a dog ran in the park today", "the dog ran in a park"),
    ("hello there", "hello there my friend, how are you?"),
    ("completely unrelated words", "nothing in common here"),
    ("the cat is on the red mat", "a cat was on the mat"),
]


@pytest.mark.parametrize("order", [4, 1])
@pytest.mark.parametrize("subset", [slice(None), slice(1, 4), slice(2, 4), slice(3, 4)])
def test_corpus_bleu_from_sufficient_statistics_equals_sacrebleu(order, subset):
    from sacrebleu.metrics import BLEU

    hyps, refs = zip(*SENTENCES[subset])
    stats = bleu_sentence_stats(hyps, refs, max_ngram_order=order)
    assert np.asarray(stats).shape == (len(hyps), 2 + 2 * order)
    expected = BLEU(max_ngram_order=order).corpus_score(list(hyps), [list(refs)]).score
    assert float(metric_of("bleu", stats)) == pytest.approx(expected, abs=1e-9)


def test_bootstrap_of_no_difference_is_around_zero():
    rng = np.random.default_rng(1)
    a, b = rng.random(2000) < 0.7, rng.random(2000) < 0.7  # same accuracy, independent errors
    iv = paired_bootstrap("accuracy", a, b)
    assert iv.low < 0 < iv.high and iv.high - iv.low < 0.06
    assert abs(iv.estimate - (a.mean() - b.mean())) < 1e-12
    same = paired_bootstrap("rouge", rng.random(300) * 100, np.zeros(300) + 50.0, n_resamples=200)
    assert same.low < same.estimate < same.high
    twin = paired_bootstrap("accuracy", a, a)
    assert (twin.low, twin.high) == (0.0, 0.0)


def test_bootstrap_of_a_clear_difference_excludes_zero():
    rng = np.random.default_rng(2)
    good, bad = rng.random(500) < 0.9, rng.random(500) < 0.6
    iv = paired_bootstrap("accuracy", good, bad)
    assert 0 < iv.low < iv.estimate < iv.high
    hyps_good = [h for h, _ in SENTENCES] * 40
    refs = [r for _, r in SENTENCES] * 40
    hyps_bad = ["words"] * len(refs)
    bleu = paired_bootstrap("bleu", bleu_sentence_stats(hyps_good, refs), bleu_sentence_stats(hyps_bad, refs))
    assert bleu.low > 0


def test_bootstrap_is_deterministic_given_the_seed():
    rng = np.random.default_rng(3)
    a, b = rng.random(400) * 100, rng.random(400) * 100
    assert paired_bootstrap("rouge", a, b, seed=7) == paired_bootstrap("rouge", a, b, seed=7)
    assert paired_bootstrap("rouge", a, b, seed=7) != paired_bootstrap("rouge", a, b, seed=8)
    assert bootstrap_differences("rouge", a, b, n_resamples=50).shape == (50,)


def test_kept_draws_are_the_fresh_ones_and_cannot_be_changed(monkeypatch):
    from synthesizer.report import stats

    kept = stats._resample_counts(50, 200, 3)
    assert kept is stats._resample_counts(50, 200, 3)  # drawn once
    assert np.array_equal(kept, stats._draw_counts(50, 200, 3)) and (kept.sum(axis=1) == 50).all()
    with pytest.raises(ValueError):
        kept[0, 0] = 1.0
    monkeypatch.setattr(stats, "_CACHED_COUNTS_MAX", 50 * 200 - 1)  # too large to keep: drawn every time
    assert stats._resample_counts(50, 200, 3) is not stats._resample_counts(50, 200, 3)


def test_bootstrap_averages_seeds_on_shared_resamples():
    rng = np.random.default_rng(4)
    a, b = rng.random((3, 200)) < 0.8, rng.random((3, 200)) < 0.5  # 3 seeds, same 200 examples
    diffs = bootstrap_differences("accuracy", a, b, n_resamples=100)
    one = [bootstrap_differences("accuracy", a[s], b[s], n_resamples=100) for s in range(3)]
    assert np.allclose(diffs, np.mean(one, axis=0))


def test_bootstrap_rejects_bad_statistics():
    with pytest.raises(ValueError, match="'chrf'"):
        paired_bootstrap("chrf", [1.0], [1.0])
    with pytest.raises(ValueError, match="same shape"):
        paired_bootstrap("accuracy", [1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match=r"2 \+ 2N"):
        paired_bootstrap("bleu", [[1, 2, 3]], [[1, 2, 3]])


def test_per_example_field_of_a_record():
    field = {"metric": "bleu1", "kind": "bleu", "values": [[3, 3, 2, 3]]}
    assert per_example_of(field, "bleu1") == ("bleu", [[3, 3, 2, 3]])
    assert per_example_of(field, "rougeL") is None  # statistics of another metric
    assert per_example_of({"kind": "accuracy", "values": [1, 0]}, "accuracy") == ("accuracy", [1, 0])
    assert per_example_of(None, "accuracy") is None and per_example_of({"kind": "x", "values": [1]}, "accuracy") is None


def test_seeds_to_decide_by_hand():
    from synthesizer.report.stats import SEEDS_CAP, seeds_to_decide

    # mean 0.04, sd 0.02, 0.0263 from the threshold: n=4 gives 3.182 * 0.02 / 2 = 0.0318 (too wide),
    # n=5 gives 2.776 * 0.02 / sqrt(5) = 0.0248 (decides)
    assert seeds_to_decide([0.02, 0.04, 0.06], 0.0137) == 5
    assert seeds_to_decide([0.02, 0.04, 0.06], 0.0663) == 5  # the other side: the same distance
    assert seeds_to_decide([0.02, 0.04, 0.06], 0.04) is None  # the mean on the threshold: never
    assert seeds_to_decide([-1.0, 0.0, 1.0], 0.001) == SEEDS_CAP + 1  # about 4 million: "more than" the cap
    assert seeds_to_decide([0.5, 0.5], 0.0) == 2  # no spread: any two seeds decide
    with pytest.raises(ValueError, match="at least 2"):
        seeds_to_decide([0.1], 0.0)
