"""Language modelling: fixed-length blocks cut from the document stream, next-token cross-entropy.

Metrics: ``loss`` (mean NLL per token, nats), ``perplexity`` and ``bits_per_token`` over every
target token of the split's blocks. Baseline: a unigram model of the training tokens (add-one
smoothed), scored on exactly the same target tokens.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..data.batching import lm_blocks
from ..data.records import DataError
from ..errors import InputError
from ..training.losses import sequence_cross_entropy
from .base import Task, shuffled_batches, skip_batches, split_of
from .metrics import bits_per_token, perplexity, unigram_nll


class LMTask(Task):
    family = "lm"
    primary_metric = "perplexity"
    higher_is_better = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.block_size = self.cfg.batch.block_size or min(self.max_len, 256)
        if self.block_size > self.max_len:
            raise InputError(f"batch.block_size={self.block_size} exceeds model.max_len={self.max_len}")
        self.blocks_per_batch = max(1, self.max_tokens // self.block_size)
        self._blocks: dict[str, Tensor] = {}
        self._train_ids: list[list[int]] | None = None

    def blocks(self, split: str) -> Tensor:
        """(N, block_size + 1) token blocks of ``split`` (cached)."""
        if split not in self._blocks:
            ids = self.tok.encode_batch(split_of(self.corpus, split))
            if split == "train":
                self._train_ids = ids
            try:
                self._blocks[split] = lm_blocks(ids, self.block_size, self.tok.eos_id)
            except InputError as e:
                raise DataError(f"{self.corpus.name} split {split!r} ({self.corpus.origin}): {e}") from None
        return self._blocks[split]

    # ------------------------------------------------------------------ training
    def step_fn(self, model: nn.Module, batch: Tensor) -> tuple[Tensor, Tensor]:
        logits = model(batch[:, :-1])
        return sequence_cross_entropy(logits, batch[:, 1:])

    def train_batches(self, epoch: int, skip: int):
        blocks = self.blocks("train")
        gen = shuffled_batches(len(blocks), self.blocks_per_batch, self.cfg.seed, epoch, self.rank,
                               self.world_size, lambda idx: blocks[idx])
        return skip_batches(gen, skip)

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def _nll(self, model: nn.Module, blocks: Tensor) -> float:
        device = next(model.parameters()).device
        total, count = 0.0, 0
        for i in range(0, len(blocks), self.blocks_per_batch):
            batch = blocks[i : i + self.blocks_per_batch].to(device)
            loss, n = sequence_cross_entropy(model(batch[:, :-1]), batch[:, 1:])
            total, count = total + float(loss), count + int(n)
        return total / count

    def _metrics(self, nll: float) -> dict[str, float]:
        return {"loss": nll, "perplexity": perplexity(min(nll, 700.0)), "bits_per_token": bits_per_token(nll)}

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        nll = self._nll(model, self.blocks("valid"))
        return {"loss": nll, "perplexity": perplexity(min(nll, 700.0))}

    def metrics(self, model: nn.Module, split: str = "test") -> dict[str, float]:
        return self._metrics(self._nll(model, self.blocks(split)))

    def baselines(self, split: str = "test") -> dict[str, float]:
        """Add-one smoothed unigram model of the training tokens, on the same target tokens."""
        self.blocks("train")
        train = [i for ids in self._train_ids or [] for i in (*ids, self.tok.eos_id)]
        nll = unigram_nll(train, self.blocks(split)[:, 1:].reshape(-1).tolist(), self.tok.vocab_size)
        return {"unigram_perplexity": perplexity(nll), "unigram_bits_per_token": bits_per_token(nll)}
