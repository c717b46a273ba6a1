"""Diagnostic tasks as a causal language model scored at answer positions.

Why this framing: a decoder-only model has only self-attention, so the kind under test is the only
way information moves between tokens. Seq2seq would add a vanilla cross-attention that can do the
recall lookup by content whatever the self-attention kind; classification would give one answer per
sequence. Every kind (and ``none``) gets the same model, data and budget.

Rows are ``{"text", "answers"}`` (see ``data/generated.py``): the sequence, and the positions of the
tokens that are scored. The loss is next-token cross-entropy at those positions only: the other tokens
(random keys, values, symbols) are unpredictable by construction, and fitting their unigram would
only add noise. Metrics: ``accuracy`` (primary; the fraction of an example's answer tokens that the
greedy prediction gets right, averaged over examples, so each example weighs the same),
``token_accuracy`` (over all answer tokens) and ``exact_match`` (every answer of the example right).
Baselines: ``chance_accuracy``, a uniform guess among the answer symbols, and ``majority_accuracy``, the
most frequent training answer predicted everywhere (the trivial predictor a report's at-chance line uses). The per-example statistics
are the per-example accuracies (their mean is the primary metric).
"""

from __future__ import annotations

from collections import Counter

import torch
from torch import Tensor, nn

from ..data.batching import pad_sequences
from ..data.generated import GENERATED, N_SYMBOLS
from ..training.losses import sequence_cross_entropy
from .base import Task, shuffled_batches, skip_batches, split_of

IGNORE = -100  # target id of positions that are not scored


class AnswerLMTask(Task):
    family = "lm"
    primary_metric = "accuracy"
    higher_is_better = True
    select_metric, select_mode = "accuracy", "max"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._data: dict[str, tuple[list[list[int]], list[list[int]]]] = {}

    def encoded(self, split: str) -> tuple[list[list[int]], list[list[int]]]:
        """(token ids, answer positions) of every row of ``split`` (cached)."""
        if split not in self._data:
            rows = split_of(self.corpus, split)
            ids = self.tok.encode_batch([row["text"] for row in rows])
            for i, x in enumerate(ids):
                self.fit(x, self.max_len + 1, self.where(split, i))  # the last token is only a target
            self._data[split] = (ids, [row["answers"] for row in rows])
        return self._data[split]

    def _batch(self, split: str, idx: list[int]) -> tuple[Tensor, Tensor]:
        """(inputs (B, n), targets (B, n)): targets are the next tokens at answer positions, else IGNORE."""
        ids, answers = self.encoded(split)
        x, _ = pad_sequences([ids[i] for i in idx], self.tok.pad_id)
        targets = torch.full_like(x, IGNORE)
        for row, i in enumerate(idx):
            pos = torch.tensor(answers[i])
            targets[row, pos] = x[row, pos]
        # right padding needs no mask: a causal model never lets a position see the ones after it
        return x[:, :-1], targets[:, 1:]

    @property
    def batch_size(self) -> int:
        longest = max(len(x) for x in self.encoded("train")[0])
        return int(self.cfg.batch.max_sentences or max(1, self.max_tokens // longest))

    # ------------------------------------------------------------------ training
    def step_fn(self, model: nn.Module, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        inputs, targets = batch
        scored = targets != IGNORE
        return sequence_cross_entropy(model(inputs, logits_at=scored), targets[scored])

    def train_batches(self, epoch: int, skip: int):
        n = len(self.encoded("train")[0])
        gen = shuffled_batches(n, self.batch_size, self.cfg.seed, epoch, self.rank, self.world_size,
                               lambda idx: self._batch("train", idx))
        return skip_batches(gen, skip)

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def _score(self, model: nn.Module, split: str) -> tuple[float, list[float], int, int]:
        """(mean loss per answer token, per-example accuracies, correct answer tokens, answer tokens)."""
        device = next(model.parameters()).device
        n = len(self.encoded(split)[0])
        per_example: list[float] = []
        loss, correct, count = 0.0, 0, 0
        for start in range(0, n, self.batch_size):
            inputs, targets = (t.to(device) for t in self._batch(split, list(range(start, min(n, start + self.batch_size)))))
            scored = targets != IGNORE
            logits, answers = model(inputs, logits_at=scored), targets[scored]
            loss += float(sequence_cross_entropy(logits, answers)[0])
            hit = (logits.argmax(-1) == answers).float()
            hits_per_row = hit.new_zeros(len(targets)).index_add_(0, scored.nonzero()[:, 0], hit)
            correct, count = correct + int(hit.sum()), count + len(answers)
            per_example += (hits_per_row / scored.sum(1).float()).tolist()
        return loss / count, per_example, correct, count

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        loss, per_example, _, _ = self._score(model, "valid")
        return {"loss": loss, "accuracy": sum(per_example) / len(per_example)}

    def metrics(self, model: nn.Module, split: str = "test") -> dict[str, float]:
        loss, per_example, correct, count = self._score(model, split)
        self.keep_per_example(split, "accuracy", per_example)
        return {"loss": loss, "accuracy": sum(per_example) / len(per_example), "token_accuracy": correct / count,
                "exact_match": sum(a == 1.0 for a in per_example) / len(per_example)}

    def baselines(self, split: str = "test") -> dict[str, float]:
        """Uniform chance, and the most frequent training answer predicted everywhere (scored as ``accuracy``)."""
        ids, answers = self.encoded("train")
        counts = Counter(x[a] for x, pos in zip(ids, answers) for a in pos)
        majority = max(counts, key=lambda t: (counts[t], -t))
        ids, answers = self.encoded(split)
        fractions = [sum(x[a] == majority for a in pos) / len(pos) for x, pos in zip(ids, answers)]
        spec = GENERATED.get(self.cfg.data.corpus)
        symbols = spec.n_answers if spec is not None else N_SYMBOLS
        return {"chance_accuracy": 1.0 / symbols, "majority_accuracy": sum(fractions) / len(fractions)}
