"""Span-corruption pretraining of the encoder-decoder (the T5 setting of the paper's GLUE/SuperGLUE rows).

The data is a text corpus (``data/pretraining.py``): each text is tokenized and cut into chunks of at
most ``batch.block_size`` tokens (default: ``model.max_len``); each chunk is span-corrupted
(``data/span_corruption.py``: 15% noise in spans of mean length 3) into a source with sentinels and a
target listing the dropped spans. A training chunk is corrupted afresh every epoch, from a seed made of
the run's seed, the epoch and the chunk's index, so a resumed run sees the same examples; a valid or
test chunk is corrupted once, the same way every time (``eval.max_eval_examples``: an evenly spaced
sample of that many chunks). The loss is the decoder's cross-entropy on the
target (label-smoothed as ``train.label_smoothing``, default 0: the objective is the denoising loss
itself); model selection and the metrics use the unsmoothed loss: ``loss``, ``perplexity``, against
a unigram model of the training targets (``unigram_perplexity``). Only the train split is trained on;
the best checkpoint has the lowest valid loss.
"""

from __future__ import annotations

import random

from ..data.span_corruption import sentinel_tokens, span_corrupt
from ..errors import InputError
from .base import Task, bucket_sampler, skip_batches, split_of
from .metrics import perplexity
from .seq2seq import Seq2SeqTask


class PretrainTask(Seq2SeqTask):
    packs = False  # span-corruption batches are built per step (tasks/pretrain.py), not packed
    primary_metric, higher_is_better = "loss", False

    def __init__(self, *args, **kwargs) -> None:
        Task.__init__(self, *args, **kwargs)  # not Seq2SeqTask's: it sets up generation metrics
        self.chunk = self.cfg.batch.block_size or self.max_len
        self.max_src = self.chunk
        self.max_tgt = self.max_len - 1
        self.label_smoothing = self.cfg.label_smoothing
        self.sentinels = self.tok.special_ids(sentinel_tokens())
        if not self.sentinels:
            raise InputError("pretraining needs a tokenizer with span-corruption sentinels (<extra_id_0> ...)")
        self._chunks: dict[str, list[list[int]]] = {}
        self._data: dict[str, tuple[list[list[int]], list[list[int]]]] = {}
        self._sampler = None

    def chunks(self, split: str) -> list[list[int]]:
        """Token ids of every text of ``split``, cut into pieces of at most ``self.chunk`` tokens; for valid
        and test at most ``eval.max_eval_examples`` of them, evenly spaced (every source corpus is sampled:
        the first ones would all come from the first corpus)."""
        if split not in self._chunks:
            out = []
            for ids in self.tok.encode_batch(split_of(self.corpus, split)):
                out += [ids[i : i + self.chunk] for i in range(0, len(ids), self.chunk)]
            cap = self.max_eval_examples
            if split != "train" and cap is not None and len(out) > cap:
                out = [out[i * len(out) // cap] for i in range(cap)]
            self._chunks[split] = out
        return self._chunks[split]

    def corrupt(self, split: str, i: int, ids: list[int], epoch: int = 0) -> tuple[list[int], list[int]]:
        """(source, target) of chunk ``i``: deterministic given the run's seed, the split, the epoch and ``i``."""
        rng = random.Random(f"span-corruption:{self.cfg.seed}:{split}:{epoch}:{i}")
        src, tgt = span_corrupt(ids, self.sentinels, rng)
        if len(tgt) > self.max_tgt:
            raise InputError(f"a span-corrupted target of {len(tgt)} tokens does not fit model.max_len="
                             f"{self.max_len}; lower batch.block_size (now {self.chunk})")
        return src, tgt

    def encoded(self, split: str) -> tuple[list[list[int]], list[list[int]]]:
        """(sources, targets) of the fixed corruption of ``split`` (valid and test; train's epoch 0)."""
        if split not in self._data:
            pairs = [self.corrupt(split, i, ids) for i, ids in enumerate(self.chunks(split))]
            self._data[split] = ([p[0] for p in pairs], [p[1] for p in pairs])
        return self._data[split]

    def train_batches(self, epoch: int, skip: int):
        chunks = self.chunks("train")
        if self._sampler is None:
            # a chunk of n tokens gives a source of at most n and a target of about 0.3 n tokens
            self._sampler, self._perm = bucket_sampler([len(c) for c in chunks], self.max_tokens,
                                                       self.cfg.batch.max_sentences, self.cfg.seed,
                                                       self.rank, self.world_size)
        self._sampler.set_epoch(epoch)
        perm = self._perm

        def batch(idx: list[int]):
            pairs = [self.corrupt("train", perm[j], chunks[perm[j]], epoch) for j in idx]
            return self.collate([p[0] for p in pairs], [p[1] for p in pairs])

        return skip_batches((batch(idx) for idx in self._sampler), skip)

    def metrics(self, model, split: str = "test") -> dict[str, float]:
        nll = self._nll(model, split)
        return {"loss": nll, "perplexity": perplexity(min(nll, 700.0))}

    def baselines(self, split: str = "test") -> dict[str, float]:
        """The unigram model of the (epoch 0) training targets, sentinels included, on ``split``'s targets:
        the trivial predictor of the denoising loss (no copy-the-source score: the target is what the
        source lacks)."""
        return {"unigram_perplexity": self._unigram_perplexity(split)}
