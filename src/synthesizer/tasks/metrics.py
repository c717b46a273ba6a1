"""Evaluation metrics for every task family.

Scales: BLEU and ROUGE are in points, 0..100 (as sacreBLEU prints them and papers report them);
accuracy, F1 and Matthews correlation are fractions in [0, 1] ([-1, 1] for MCC); Pearson and
Spearman are in [-1, 1]; losses are in nats. Generation metrics take detokenized strings.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..errors import InputError


# ----------------------------------------------------------------------------- language modelling

def perplexity(mean_nll: float) -> float:
    """exp of the mean negative log-likelihood per token (nats)."""
    return math.exp(mean_nll)


def bits_per_token(mean_nll: float) -> float:
    """Mean negative log-likelihood per token in bits."""
    return mean_nll / math.log(2)


def unigram_nll(train_ids: Sequence[int], target_ids: Sequence[int], vocab_size: int) -> float:
    """Mean negative log-likelihood (nats) of ``target_ids`` under an add-one smoothed unigram model of
    ``train_ids``: the trivial predictor of a perplexity."""
    counts = np.bincount(np.asarray(train_ids, dtype=np.int64), minlength=vocab_size).astype(np.float64) + 1.0
    logp = np.log(counts) - math.log(float(counts.sum()))
    return float(-logp[np.asarray(target_ids, dtype=np.int64)].mean())


def bits_per_byte(total_nll: float, n_bytes: int) -> float:
    """Total NLL (nats) over a text divided by its UTF-8 length in bits: compares tokenizers fairly."""
    if n_bytes <= 0:
        raise ValueError(f"n_bytes must be > 0, got {n_bytes}")
    return total_nll / (n_bytes * math.log(2))


# ----------------------------------------------------------------------------- generation

def _check_pairs(hyps: Sequence[str], refs: Sequence[str]) -> None:
    if len(hyps) != len(refs):
        raise ValueError(f"got {len(hyps)} hypotheses but {len(refs)} references")
    if not hyps:
        raise InputError("no hypotheses to score")


def corpus_bleu(hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a") -> float:
    """Corpus BLEU (sacreBLEU, default 13a tokenization) of detokenized hypotheses, one reference each."""
    from sacrebleu.metrics import BLEU

    _check_pairs(hyps, refs)
    return BLEU(tokenize=tokenize).corpus_score(list(hyps), [list(refs)]).score


def bleu1(hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a") -> float:
    """Corpus unigram BLEU: sacreBLEU with `max_ngram_order=1` (clipped unigram precision times
    the brevity penalty), the BLEU-1 usually reported for dialogue."""
    from sacrebleu.metrics import BLEU

    _check_pairs(hyps, refs)
    return BLEU(tokenize=tokenize, max_ngram_order=1).corpus_score(list(hyps), [list(refs)]).score


def bleu_sentence_stats(hyps: Sequence[str], refs: Sequence[str], max_ngram_order: int = 4,
                        tokenize: str = "13a") -> list[list[int]]:
    """sacreBLEU's sufficient statistics per sentence (one reference each): ``[n, 2 + 2N]`` as lists,
    ``[hyp_len, ref_len, correct_1..N, total_1..N]``, what a run record's ``per_example`` holds for BLEU
    (``max_ngram_order=1`` for BLEU-1); their sum gives the corpus BLEU (``report.stats.metric_of``)."""
    from sacrebleu.metrics import BLEU

    if len(hyps) != len(refs):
        raise ValueError(f"got {len(hyps)} hypotheses but {len(refs)} references")
    bleu = BLEU(tokenize=tokenize, max_ngram_order=max_ngram_order)
    return [[int(v) for v in s] for s in bleu._extract_corpus_statistics(list(hyps), [list(refs)])]


def rouge_per_example(hyps: Sequence[str], refs: Sequence[str],
                      types: Sequence[str] = ("rouge1", "rouge2", "rougeL")) -> dict[str, list[float]]:
    """ROUGE F-measure of every pair per type (rouge-score, Porter stemming), in points."""
    from rouge_score import rouge_scorer

    _check_pairs(hyps, refs)
    scorer = rouge_scorer.RougeScorer(list(types), use_stemmer=True)
    per = {t: [] for t in types}
    for h, r in zip(hyps, refs):
        scores = scorer.score(r, h)  # (target, prediction)
        for t in types:
            per[t].append(100.0 * scores[t].fmeasure)
    return per


def rouge(hyps: Sequence[str], refs: Sequence[str], types: Sequence[str] = ("rouge1", "rouge2", "rougeL")
          ) -> dict[str, float]:
    """Mean ROUGE F-measure per type over the pairs (rouge-score, Porter stemming), in points."""
    return {t: sum(v) / len(v) for t, v in rouge_per_example(hyps, refs, types).items()}


# ----------------------------------------------------------------------------- classification

def _labels(preds: Sequence[int], labels: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    p, y = np.asarray(preds), np.asarray(labels)
    if p.shape != y.shape or p.ndim != 1:
        raise ValueError(f"preds and labels must be 1-D of the same length, got {p.shape} and {y.shape}")
    if p.size == 0:
        raise InputError("no predictions to score")
    return p, y


def accuracy(preds: Sequence[int], labels: Sequence[int]) -> float:
    p, y = _labels(preds, labels)
    return float((p == y).mean())


def _f1_of(p: np.ndarray, y: np.ndarray, cls: int) -> float:
    tp = int(((p == cls) & (y == cls)).sum())
    fp = int(((p == cls) & (y != cls)).sum())
    fn = int(((p != cls) & (y == cls)).sum())
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def f1(preds: Sequence[int], labels: Sequence[int], average: str = "binary", positive: int = 1,
       num_classes: int | None = None) -> float:
    """F1 of class `positive` (average="binary") or the unweighted mean over classes ("macro").

    Macro averages over `range(num_classes)`, or over the classes seen in preds or labels.
    A class with no true positive scores 0.
    """
    p, y = _labels(preds, labels)
    if average == "binary":
        return _f1_of(p, y, positive)
    if average == "macro":
        classes = range(num_classes) if num_classes is not None else np.union1d(p, y)
        return float(np.mean([_f1_of(p, y, int(c)) for c in classes]))
    raise ValueError(f"unknown average {average!r}; allowed: 'binary', 'macro'")


def matthews_corrcoef(preds: Sequence[int], labels: Sequence[int]) -> float:
    """Matthews correlation, multiclass form (Gorodkin's R_K); 0 when undefined (a constant side)."""
    p, y = _labels(preds, labels)
    classes = np.union1d(p, y)
    cm = np.zeros((len(classes), len(classes)), dtype=np.float64)  # rows: truth, cols: prediction
    np.add.at(cm, (np.searchsorted(classes, y), np.searchsorted(classes, p)), 1)
    t, pk = cm.sum(axis=1), cm.sum(axis=0)
    c, s = np.trace(cm), cm.sum()
    denom = math.sqrt((s * s - pk @ pk) * (s * s - t @ t))
    return 0.0 if denom == 0 else float((c * s - t @ pk) / denom)


# ----------------------------------------------------------------------------- regression

def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson correlation; 0 when either side is constant (undefined)."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise ValueError(f"need two 1-D sequences of the same length >= 2, got {a.shape} and {b.shape}")
    a, b = a - a.mean(), b - b.mean()
    denom = math.sqrt(float(a @ a) * float(b @ b))
    return 0.0 if denom == 0 else float(a @ b) / denom


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, ties get the mean of the ranks they span."""
    order = np.argsort(x, kind="stable")
    sx = x[order]
    ranks = np.empty(len(x), dtype=np.float64)
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sx[j + 1] == sx[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation: Pearson of the (tie-averaged) ranks."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"need two 1-D sequences of the same length, got {a.shape} and {b.shape}")
    return pearson(_ranks(a), _ranks(b))


# ----------------------------------------------------------------------------- per-task bundles

def classification_metrics(preds: Sequence[int], labels: Sequence[int], num_classes: int) -> dict[str, float]:
    """accuracy, f1 (binary with class 1 positive for 2 classes, else macro) and mcc."""
    avg = "binary" if num_classes == 2 else "macro"
    return {"accuracy": accuracy(preds, labels), "f1": f1(preds, labels, avg, num_classes=num_classes),
            "mcc": matthews_corrcoef(preds, labels)}


def regression_metrics(preds: Sequence[float], labels: Sequence[float]) -> dict[str, float]:
    return {"pearson": pearson(preds, labels), "spearman": spearman(preds, labels)}


def lm_metrics(mean_nll: float) -> dict[str, float]:
    return {"nll": mean_nll, "ppl": perplexity(mean_nll), "bits_per_token": bits_per_token(mean_nll)}
