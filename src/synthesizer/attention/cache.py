"""The incremental-decoding cache of one attention layer."""

from __future__ import annotations

import copy

import torch
from torch import Tensor

from ..errors import InputError


class DecodingState:
    """Base of every layer's decoding cache: ``copy.deepcopy`` works whether or not it was filled with
    grad enabled. Torch refuses to deep-copy a tensor that is not a graph leaf; a copy here clones its
    tensors instead, keeping their autograd history, so decoding on from the copy behaves (and
    backpropagates) as decoding on from the original would."""

    def __deepcopy__(self, memo: dict) -> "DecodingState":
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        for name, value in self.__dict__.items():
            new.__dict__[name] = value.clone() if isinstance(value, Tensor) else copy.deepcopy(value, memo)
        return new


class AttentionCache(DecodingState):
    """Values of every position decoded so far, keys only where ``vanilla`` needs them.

    Synthesizer logits for position t depend on position t alone, so a pure synthesizer caches
    ``V`` and nothing else: half of what dot-product attention keeps.
    Shapes: ``keys``/``values`` (B, H, t, dh), ``padding`` (B, t) bool, True = padding; ``positions``
    (B, t) the position of every cached token where the layer was given per-token positions (each row
    its own, e.g. after left padding), else None (the positions are 0..t-1).
    """

    def __init__(self) -> None:
        self.keys: Tensor | None = None
        self.values: Tensor | None = None
        self.padding: Tensor | None = None
        self.positions: Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.values is None else self.values.shape[2]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.keys, self.values) if t is not None)

    def append(self, values: Tensor, keys: Tensor | None, padding: Tensor | None,
               positions: Tensor | None = None) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Add new positions (``positions`` (B, t): theirs, where the layer was given them); returns the
        full values, keys and padding mask (or None if no padding)."""
        grow = lambda old, new: new if old is None else torch.cat([old, new], dim=-2)  # noqa: E731
        previous = self.length
        if positions is not None:
            old = self.positions
            if old is None:  # filled without per-token positions so far: they were 0..previous-1
                old = torch.arange(previous, device=positions.device).expand(positions.shape[0], -1)
            self.positions = torch.cat([old, positions], dim=1)
        self.values = grow(self.values, values)
        if keys is not None:
            self.keys = grow(self.keys, keys)
        if padding is not None or self.padding is not None:
            b, t = values.shape[0], values.shape[2]
            old = self.padding if self.padding is not None else padding.new_zeros(b, previous)
            new = padding if padding is not None else old.new_zeros(b, t)
            self.padding = torch.cat([old, new], dim=1)
        return self.values, self.keys, self.padding

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions, forgetting the later ones (speculative decoding takes back
        the draft tokens the model rejected). A values-only cache is cut as a key/value one is."""
        if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= self.length:
            raise InputError(f"crop length must be an int in [0, {self.length}] (the cached positions), got {length!r}")
        for name in ("keys", "values"):
            t = getattr(self, name)
            if t is not None:
                setattr(self, name, t[:, :, :length])
        for name in ("padding", "positions"):
            t = getattr(self, name)
            if t is not None:
                setattr(self, name, t[:, :length])

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (beam search): every cached tensor is re-indexed along dim 0."""
        for name in ("keys", "values", "padding", "positions"):
            t = getattr(self, name)
            if t is not None:
                setattr(self, name, t.index_select(0, index))
