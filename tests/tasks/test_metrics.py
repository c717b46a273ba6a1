import math

import pytest

from synthesizer.tasks import metrics as M


def test_lm_metrics():
    assert M.perplexity(math.log(10.0)) == pytest.approx(10.0)
    assert M.bits_per_token(3 * math.log(2)) == pytest.approx(3.0)
    assert M.bits_per_byte(8 * math.log(2), 4) == pytest.approx(2.0)
    assert M.lm_metrics(0.0) == {"nll": 0.0, "ppl": 1.0, "bits_per_token": 0.0}


def test_corpus_bleu_hand_computed():
    # precisions 5/6, 3/5, 2/4, 1/3 (the repeated "the" is clipped); equal lengths so BP = 1
    bleu = M.corpus_bleu(["the cat sat on the mat"], ["the cat sat on a mat"])
    assert bleu == pytest.approx(100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25, abs=1e-6)
    assert M.corpus_bleu(["Hello, world!"], ["Hello, world!"]) == pytest.approx(100.0)


def test_bleu1_brevity_penalty():
    assert M.bleu1(["the cat"], ["the cat sat"]) == pytest.approx(100 * math.exp(1 - 3 / 2))
    assert M.bleu1(["a b c"], ["a b d"]) == pytest.approx(100 * 2 / 3)
    with pytest.raises(ValueError, match="got 1 hypotheses but 2 references"):
        M.bleu1(["a"], ["a", "b"])


def test_rouge_hand_computed():
    r = M.rouge(["the cat was found under the bed"], ["the cat was under the bed"])
    assert r["rouge1"] == pytest.approx(100 * 12 / 13)  # P = 6/7, R = 1
    assert r["rouge2"] == pytest.approx(100 * 16 / 22)  # P = 4/6, R = 4/5
    assert r["rougeL"] == pytest.approx(100 * 12 / 13)  # LCS = 6
    assert M.rouge(["cats running"], ["cat runs"])["rouge1"] == pytest.approx(100.0)  # stemming
    both = M.rouge(["a b", "x"], ["a b", "y"])
    assert both["rouge1"] == pytest.approx(50.0)  # mean over pairs


def test_accuracy_f1():
    p, y = [1, 0, 1, 1], [1, 0, 0, 1]
    assert M.accuracy(p, y) == 0.75
    assert M.f1(p, y) == pytest.approx(0.8)  # tp 2, fp 1, fn 0
    assert M.f1(p, y, "macro") == pytest.approx((0.8 + 2 / 3) / 2)
    assert M.f1([0, 0], [0, 0], "macro", num_classes=2) == pytest.approx(0.5)  # absent class counts 0
    with pytest.raises(ValueError, match="unknown average 'micro'"):
        M.f1(p, y, "micro")
    with pytest.raises(ValueError, match="same length"):
        M.accuracy([1], [1, 0])


def test_matthews():
    assert M.matthews_corrcoef([1, 0, 1, 1], [1, 0, 0, 1]) == pytest.approx(2 / math.sqrt(12))
    assert M.matthews_corrcoef([0, 1, 0], [0, 1, 0]) == pytest.approx(1.0)
    assert M.matthews_corrcoef([1, 0, 1], [0, 1, 0]) == pytest.approx(-1.0)
    assert M.matthews_corrcoef([1, 1, 1], [0, 1, 0]) == 0.0
    # three classes: c = 4, s = 6, t = (2,2,2), p = (2,3,1)
    mcc = M.matthews_corrcoef([0, 1, 1, 1, 2, 0], [0, 0, 1, 1, 2, 2])
    assert mcc == pytest.approx(12 / math.sqrt(22 * 24))


def test_correlations():
    assert M.pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(5 / math.sqrt(2 * 114 / 9))
    assert M.pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert M.pearson([1, 1, 1], [1, 2, 3]) == 0.0
    assert M.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(22.5))  # tied ranks 2.5
    assert M.spearman([1, 10, 100], [2, 3, 50]) == pytest.approx(1.0)  # monotone, not linear
    assert M.regression_metrics([1, 2, 3], [1, 2, 3]) == {"pearson": pytest.approx(1.0), "spearman": pytest.approx(1.0)}


def test_classification_bundle():
    two = M.classification_metrics([1, 0, 1, 1], [1, 0, 0, 1], num_classes=2)
    assert two == {"accuracy": 0.75, "f1": pytest.approx(0.8), "mcc": pytest.approx(2 / math.sqrt(12))}
    three = M.classification_metrics([0, 1, 2], [0, 1, 1], num_classes=3)
    assert three["f1"] == pytest.approx((1 + 2 / 3 + 0) / 3)


def test_rouge_per_example_is_each_pairs_f_in_points_and_averages_to_rouge():
    hyps, refs = ["the cat sat", "a dog ran home", "nothing alike"], ["the cat sat down", "a dog ran home", "cat mat"]
    per = M.rouge_per_example(hyps, refs, ("rouge1", "rougeL"))
    assert per["rouge1"][1] == pytest.approx(100.0) and per["rouge1"][2] == 0.0
    assert per["rouge1"][0] == pytest.approx(100 * 2 * 1.0 * 0.75 / 1.75)  # P 3/3, R 3/4
    means = M.rouge(hyps, refs, ("rouge1", "rougeL"))
    assert means == {t: pytest.approx(sum(v) / 3) for t, v in per.items()}


def test_bleu_sentence_stats_sum_to_the_corpus_bleu():
    from synthesizer.report.stats import metric_of

    hyps, refs = ["the cat sat on the mat", "a dog ran", "big red house here"], ["the cat sat on a mat", "a dog ran home", "the big red house"]
    for order, corpus in ((4, M.corpus_bleu), (1, M.bleu1)):
        stats = M.bleu_sentence_stats(hyps, refs, max_ngram_order=order)
        assert len(stats) == 3 and all(len(s) == 2 + 2 * order for s in stats)
        assert metric_of("bleu", stats) == pytest.approx(corpus(hyps, refs), abs=1e-6)
