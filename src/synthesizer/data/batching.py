"""Token ids -> tensors: padding, LM blocks, and a length-bucketed dynamic batch sampler."""

from __future__ import annotations

import math
from typing import Iterator, Sequence

import torch
from torch.utils.data import Sampler

from ..errors import InputError, positive_int


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int, max_len: int | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id sequences into one batch.

    Returns ids (B, n) long and pad_mask (B, n) bool, True = padding, where n is the longest
    sequence (or `max_len`, which must be at least that long; pass it to get fixed shapes).
    """
    if len(seqs) == 0:
        raise ValueError("pad_sequences needs at least one sequence")
    longest = max(len(s) for s in seqs)
    n = longest if max_len is None else max_len
    if n < longest:
        raise ValueError(f"max_len={max_len} is shorter than the longest sequence ({longest})")
    ids = torch.full((len(seqs), n), pad_id, dtype=torch.long)
    mask = torch.ones((len(seqs), n), dtype=torch.bool)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
        mask[i, : len(s)] = False
    return ids, mask


def lm_blocks(docs: Sequence[Sequence[int]], block_size: int, eos_id: int) -> torch.Tensor:
    """Concatenate documents (EOS after each) and cut the stream into blocks for next-token training.

    Returns (N, block_size + 1) long: inputs are `blocks[:, :-1]`, targets `blocks[:, 1:]`.
    Consecutive blocks overlap by one token, so every token of the stream except the first is
    a target exactly once; the leftover tail shorter than a block is dropped.
    """
    positive_int("block_size", block_size)
    stream: list[int] = []
    for d in docs:
        stream.extend(d)
        stream.append(eos_id)
    n_blocks = (len(stream) - 1) // block_size
    if n_blocks == 0:
        raise InputError(f"{len(stream)} tokens (with EOS) are too few for one block of {block_size + 1}")
    data = torch.tensor(stream[: n_blocks * block_size + 1], dtype=torch.long)
    return data.unfold(0, block_size + 1, block_size)


def length_batches(lengths: Sequence[int], max_tokens: int, max_sentences: int | None = None) -> list[list[int]]:
    """Group example indices into batches of similar length.

    Indices are sorted by length (ties by index) and filled greedily while the padded size
    `len(batch) * longest` stays <= `max_tokens` and `len(batch) <= max_sentences`. An example
    longer than `max_tokens` gets a batch of its own (callers truncate to the model's max length).
    """
    positive_int("max_tokens", max_tokens)
    if max_sentences is not None:
        positive_int("max_sentences", max_sentences)
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i in order:
        n = max(1, lengths[i])
        full = max_sentences is not None and len(cur) >= max_sentences
        if cur and (full or (len(cur) + 1) * max(longest, n) > max_tokens):
            batches.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, n)
    if cur:
        batches.append(cur)
    return batches


class LengthBucketSampler(Sampler[list[int]]):
    """Batch sampler with a padded-token budget, for `DataLoader(ds, batch_sampler=...)`.

    Batches are built once by `length_batches`; each epoch their order is shuffled with a generator
    seeded by `seed + epoch` (call `set_epoch` like `DistributedSampler`). With `world_size > 1`
    the batch list is padded by repeating its first batches to a multiple of `world_size`, then
    rank r takes every world_size-th batch from r: every rank yields the same number of batches
    (needed so collective ops in the training step stay in lockstep).
    """

    def __init__(self, lengths: Sequence[int], max_tokens: int, max_sentences: int | None = None, *,
                 shuffle: bool = True, seed: int = 0, rank: int = 0, world_size: int = 1) -> None:
        if len(lengths) == 0:
            raise InputError("LengthBucketSampler needs at least one example")
        if world_size < 1 or not 0 <= rank < world_size:
            raise InputError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
        self.batches = length_batches(lengths, max_tokens, max_sentences)
        self.shuffle, self.seed, self.rank, self.world_size = shuffle, seed, rank, world_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return math.ceil(len(self.batches) / self.world_size)

    def __iter__(self) -> Iterator[list[int]]:
        order = list(range(len(self.batches)))
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(len(order), generator=g).tolist()
        total = len(self) * self.world_size
        order = (order * math.ceil(total / len(order)))[:total]
        for b in order[self.rank :: self.world_size]:
            yield list(self.batches[b])
