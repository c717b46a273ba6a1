"""Language modelling: fixed-length blocks cut from the document stream, next-token cross-entropy.

Metrics: ``loss`` (mean NLL per token, nats), ``perplexity`` and ``bits_per_token`` over every
target token of the split's blocks. Baseline: a unigram model of the training tokens (add-one
smoothed), scored on exactly the same target tokens.

With ``batch.pack`` training reads the documents, not the stream: each document (its EOS included) is cut
into pieces of at most a block (``data.packing.document_pieces``) and the pieces are packed into rows of
``block_size`` tokens, positions restarting at 0 at each piece and no attention or target crossing from one
to the next (a document's first token is not predicted). Evaluation keeps the blocks of the stream.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..data.batching import lm_blocks
from ..data.packing import document_pieces, packed_tensors
from ..data.records import DataError
from ..errors import InputError
from ..training.losses import sequence_cross_entropy
from .base import Task, packed_batches, shuffled_batches, skip_batches, split_of
from .metrics import bits_per_token, perplexity, unigram_nll


class LMTask(Task):
    family = "lm"
    primary_metric = "perplexity"
    higher_is_better = False
    packs = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.block_size = self.cfg.batch.block_size or min(self.max_len, 256)
        if self.block_size > self.max_len:
            raise InputError(f"batch.block_size={self.block_size} exceeds model.max_len={self.max_len}")
        self.blocks_per_batch = max(1, self.max_tokens // self.block_size)
        self._blocks: dict[str, Tensor] = {}
        self._train_ids: list[list[int]] | None = None
        self._pieces: list[list[int]] | None = None  # batch.pack: the documents in pieces (``pieces``)

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
    def step_fn(self, model: nn.Module, batch: Tensor | dict) -> tuple[Tensor, Tensor]:
        if isinstance(batch, dict):  # packed rows (batch.pack)
            logits = model(batch["ids"], batch["padding"], positions=batch["positions"], documents=batch["documents"])
            return sequence_cross_entropy(logits, batch["targets"], self.tok.pad_id)
        logits = model(batch[:, :-1])
        return sequence_cross_entropy(logits, batch[:, 1:])

    def pieces(self) -> list[list[int]]:
        """The training documents, EOS after each, in pieces of at most ``block_size + 1`` tokens."""
        if self._pieces is None:
            self.blocks("train")  # reads the documents
            eos = self.tok.eos_id
            self._pieces = [p for ids in self._train_ids or [] for p in document_pieces([*ids, eos], self.block_size)]
            if not self._pieces:
                raise DataError(f"{self.corpus.name} split 'train' ({self.corpus.origin}): no document to pack")
        return self._pieces

    def packed(self, pieces: list[list[int]]) -> dict[str, Tensor]:
        """A packed batch of document pieces (``pieces``: the rows' pieces): inputs, next-token targets
        (``pad_id`` on padding), padding, positions and documents."""
        inputs = packed_tensors([[p[:-1] for p in row] for row in pieces], self.tok.pad_id)
        targets = packed_tensors([[p[1:] for p in row] for row in pieces], self.tok.pad_id)
        return {"ids": inputs.ids, "targets": targets.ids, "padding": inputs.padding, "positions": inputs.positions,
                "documents": inputs.documents}

    def train_batches(self, epoch: int, skip: int):
        if self.cfg.batch.pack:
            pieces = self.pieces()
            gen = packed_batches([(len(p) - 1,) for p in pieces], (self.block_size,), self.max_tokens, self.cfg.seed,
                                 epoch, self.rank, self.world_size,
                                 lambda rows: self.packed([[pieces[i] for i in row] for row in rows]))
            return skip_batches(gen, skip)
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
