"""What every task family gives the experiment runner, and the small helpers they share.

A task holds the tokenized splits of one corpus and supplies the Trainer's ``step_fn`` and
``train_batches``, a cheap validation ``evaluate`` (for model selection at every eval), the full
``metrics`` of a split (generation metrics included, for the end of a run) and trivial ``baselines``.
``metrics`` also keeps the per-example statistics of the primary metric where it has them
(``per_example(split)``), so a comparison can bootstrap over test examples without scoring twice.
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Callable, Iterable, Iterator

import torch
from torch import Tensor, nn

from ..data.batching import LengthBucketSampler
from ..data.packing import pack_rows
from ..data.records import Corpus, DataError
from ..data.tokenizer import Tokenizer
from ..errors import InputError
from .config import ExperimentConfig


class Task:
    """Base class; subclasses set the class attributes and implement the methods."""

    family: str = ""                 # model family for build_model: "lm", "seq2seq" or "classifier"
    primary_metric: str = ""         # the test metric a report leads with
    higher_is_better: bool = False
    select_metric: str = "loss"      # validation metric that picks the best checkpoint
    select_mode: str = "min"
    packs: bool = False              # trains on packed rows with batch.pack (data/packing.py)

    def __init__(self, cfg: ExperimentConfig, corpus: Corpus, tokenizer: Tokenizer, rank: int = 0,
                 world_size: int = 1) -> None:
        self.cfg, self.corpus, self.tok = cfg, corpus, tokenizer
        self.rank, self.world_size = rank, world_size
        self.max_len = cfg.model.max_len
        self.on_too_long = cfg.model.on_too_long
        self._per_example: dict[str, dict] = {}  # split -> the last ``metrics`` call's per-example statistics
        if cfg.batch.pack and not self.packs:
            raise InputError(f"batch.pack is not available for task {cfg.task!r}; it packs lm documents, translation, "
                             "summarization, dialogue and classification examples")

    def model_fields(self) -> dict:
        """ModelConfig fields the task fixes (e.g. ``n_classes``)."""
        return {}

    def step_fn(self, model: nn.Module, batch) -> tuple[Tensor, Tensor]:
        raise NotImplementedError

    def train_batches(self, epoch: int, skip: int) -> Iterable:
        raise NotImplementedError

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        raise NotImplementedError

    def metrics(self, model: nn.Module, split: str = "test") -> dict[str, float]:
        raise NotImplementedError

    def baselines(self, split: str = "test") -> dict[str, float]:
        return {}

    def per_example(self, split: str = "test") -> dict | None:
        """Per-example statistics of the primary metric from the last ``metrics(model, split)``, in the
        split's example order: ``{"metric", "kind": "accuracy" | "bleu" | "rouge", "values": [n] or
        [n, 2 + 2N]}`` (see ``report.stats``), or None where the metric has none (perplexity, correlations)."""
        return self._per_example.get(split)

    def keep_per_example(self, split: str, kind: str, values: list) -> None:
        """Record ``values`` as the per-example statistics of the primary metric on ``split``; floats
        rounded to 4 decimals, so a record stays small."""
        rounded = [round(v, 4) if isinstance(v, float) else v for v in values]
        self._per_example[split] = {"metric": self.primary_metric, "kind": kind, "values": rounded}

    def uniform_loss(self) -> float | None:
        """Training loss of a predictor that spreads its probability evenly: ln V over the vocabulary
        (language models, seq2seq), ln K over K classes; None for regression (no such predictor)."""
        if self.family == "classifier":
            k = self.corpus.num_labels
            return math.log(k) if k is not None and k > 1 else None
        return math.log(self.tok.vocab_size)

    # ------------------------------------------------------------------ shared helpers
    def fit(self, ids: list[int], limit: int, where: str, cap_key: str | None = None) -> list[int]:
        """Cut ``ids`` to ``limit`` tokens where the user chose truncation, else raise DataError.

        Truncation is chosen by ``model.on_too_long: truncate`` or by setting the batch cap ``cap_key``
        (``batch.max_src_len`` ...) explicitly.
        """
        if len(ids) <= limit:
            return ids
        if self.on_too_long == "truncate" or (cap_key is not None and getattr(self.cfg.batch, cap_key) is not None):
            self._truncated = getattr(self, "_truncated", 0) + 1
            return ids[:limit]
        raise DataError(f"{where}: {len(ids)} tokens, more than the limit of {limit} (model.max_len={self.max_len}); "
                        "set model.on_too_long=truncate (allowed: error, truncate), a batch cap such as "
                        "batch.max_src_len, or a larger model.max_len")

    def warn_truncated(self, split: str) -> None:
        n = getattr(self, "_truncated", 0)
        if n and self.rank == 0:
            warnings.warn(f"{self.corpus.name} {split}: {n} sequences were truncated to the length limit", stacklevel=2)
        self._truncated = 0

    def where(self, split: str, i: int) -> str:
        return f"{self.corpus.name} split {split!r} example {i + 1} ({self.corpus.origin})"

    @property
    def max_tokens(self) -> int:
        return self.cfg.batch.max_tokens

    @property
    def max_eval_examples(self) -> int | None:
        return self.cfg.eval.max_eval_examples


def split_of(corpus: Corpus, split: str) -> list:
    if split not in corpus.splits:
        raise DataError(f"corpus {corpus.name!r} has no {split!r} split; it has: {', '.join(corpus.splits)}")
    rows = corpus.splits[split]
    if not rows:
        raise DataError(f"corpus {corpus.name!r}: empty {split!r} split ({corpus.origin})")
    return rows


def bucket_sampler(lengths: list[int], max_tokens: int, max_sentences: int | None, seed: int, rank: int,
                   world_size: int) -> tuple[LengthBucketSampler, list[int]]:
    """A length-bucketed batch sampler over a fixed seeded permutation of the examples, and that permutation.

    Buckets break length ties by index; without the permutation a file sorted by label (or by book)
    would give batches of one class (one book), which stalls training. Map a sampled index j to
    example ``perm[j]``.
    """
    perm = torch.randperm(len(lengths), generator=torch.Generator().manual_seed(seed)).tolist()
    sampler = LengthBucketSampler([lengths[i] for i in perm], max_tokens, max_sentences, seed=seed, rank=rank,
                                  world_size=world_size)
    return sampler, perm


def skip_batches(batches: Iterator, skip: int) -> Iterator:
    """``batches`` without the first ``skip`` (consumed before a resume)."""
    return itertools.islice(batches, skip, None)


def shuffled_batches(n: int, batch_size: int, seed: int, epoch: int, rank: int, world_size: int,
                     make: Callable[[list[int]], object]) -> Iterator:
    """Fixed-size batches of a permutation of ``range(n)`` seeded by ``seed + epoch``; the batch list is
    padded by repetition to a multiple of ``world_size`` and rank r takes every world_size-th batch."""
    g = torch.Generator().manual_seed(seed + epoch)
    order = torch.randperm(n, generator=g).tolist()
    return rank_batches([order[i : i + batch_size] for i in range(0, n, batch_size)], rank, world_size, make)


def packed_batches(sizes: list[tuple[int, ...]], capacities: tuple[int, ...], max_tokens: int, seed: int, epoch: int,
                   rank: int, world_size: int, make: Callable[[list[list[int]]], object]) -> Iterator:
    """Batches of packed rows (``data.packing.pack_rows``) of a permutation of the examples seeded by
    ``seed + epoch``: ``max_tokens`` // (the longest part's row) rows each; ``make`` gets a batch's rows of
    example indices. Shared among ranks as ``shuffled_batches``."""
    g = torch.Generator().manual_seed(seed + epoch)
    order = torch.randperm(len(sizes), generator=g).tolist()
    rows_per_batch = max(1, max_tokens // max(capacities))
    return rank_batches(pack_rows(sizes, capacities, rows_per_batch, order), rank, world_size, make)


def rank_batches(batches: list, rank: int, world_size: int, make: Callable) -> Iterator:
    """``make(batch)`` of rank r's share of ``batches``: the list padded by repetition to a multiple of
    ``world_size``, then every world_size-th batch from r (every rank yields as many)."""
    total = math.ceil(len(batches) / world_size) * world_size
    batches = (batches * math.ceil(total / len(batches)))[:total]
    for b in batches[rank::world_size]:
        yield make(b)
