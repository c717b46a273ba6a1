"""Dot-product logits: ``Q_h K_h^T / sqrt(d_h)``, with rotary positions on Q and K where asked for."""

from __future__ import annotations

import math

import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import InputError
from .forms import FEATURES
from .positions import rotate


def split_heads(t: Tensor, n_heads: int) -> Tensor:
    """(B, n, H*dh) -> (B, H, n, dh)."""
    b, n, d = t.shape
    return t.view(b, n, n_heads, d // n_heads).transpose(1, 2)  # dh spelled out: -1 is ambiguous for B=0 or n=0


class VanillaLogits(nn.Module):
    """``Q K^T / sqrt(d_h)``: the only component whose rows look at other tokens (through their keys).

    ``rotary``: rotate queries and keys by their positions (RoPE, ``positions.rotate``), so the
    logits depend on ``i - j``; ``start`` is the position of x's first row.
    """

    form = FEATURES
    cached_keys = True  # its logits need the keys of earlier positions: a decoding cache keeps them
    folds_weight = True  # features(x, weight=) puts a mixture weight into q (``queries``), at no pass over q

    def __init__(self, d_model: int, n_heads: int, max_len: int | None = None, *, rotary: bool = False, **options):
        super().__init__()
        self.n_heads = n_heads
        self.rotary = rotary
        if rotary and (d_model // n_heads) % 2:
            raise InputError(f"rotary positions need an even head size, got d_model/n_heads={d_model // n_heads}")
        self.scale = 1.0 / math.sqrt(d_model // n_heads)
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)

    def queries(self, x: Tensor, start: int | Tensor = 0, weight: Tensor | None = None) -> Tensor:
        """(B, t, d) -> (B, H, t, dh), already multiplied by 1/sqrt(dh) and, where given, by ``weight`` (a
        mixture weight: 1 value, or one per head). Both factors go on the smaller side: into the projection's
        weight and bias where x has at least d rows (training: a pass over (d, d) numbers instead of two over
        q and three in the backward), onto q where it has fewer (decoding a few tokens)."""
        factor = self.scale if weight is None else self.scale * weight.reshape(-1, 1, 1)  # float, or (1|H, 1, 1)
        if x.shape[0] * x.shape[1] < x.shape[-1]:
            q = split_heads(self.query(x), self.n_heads) * factor
        else:  # rows of the weight and entries of the bias, head by head
            w = (self.query.weight.view(self.n_heads, -1, x.shape[-1]) * factor).flatten(0, 1)
            b = (self.query.bias.view(self.n_heads, -1, 1) * factor).flatten()
            q = split_heads(F.linear(x, w, b), self.n_heads)
        return rotate(q, start) if self.rotary else q

    def keys(self, x: Tensor, start: int = 0) -> Tensor:
        """(B, t, d) -> (B, H, t, dh): what a decoding cache stores (rotated, with ``rotary``)."""
        k = split_heads(self.key(x), self.n_heads)
        return rotate(k, start) if self.rotary else k

    def logits(self, x: Tensor, start: int = 0, n_keys: int | None = None, keys: Tensor | None = None) -> Tensor:
        """(B, H, t, n_keys). ``keys`` (B, H, n_keys, dh): those of every position, from the decoding
        cache; without them the keys come from x, which must then hold all the positions."""
        if keys is None:
            if start != 0 or (n_keys is not None and n_keys != x.shape[1]):
                raise ValueError(f"vanilla logits of rows {start}.. against {n_keys} keys need the cached keys: pass keys=")
            keys = self.keys(x)
        return self.queries(x, start) @ keys.transpose(-1, -2)

    def features(self, x: Tensor, weight: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """q (B, H, n, dh) scaled by 1/sqrt(dh) (and by a mixture ``weight``, see ``queries``), k (B, H, n, dh)."""
        return self.queries(x, weight=weight), self.keys(x)

    def features_at(self, x: Tensor, positions: Tensor, weight: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``features`` of the tokens of x at their own positions (B, n) (rotary queries and keys turn by them)."""
        return self.queries(x, positions, weight), self.keys(x, positions)

    def logits_at(self, x: Tensor, rows: Tensor, key_positions: Tensor, keys: Tensor | None = None) -> Tensor:
        """(B, H, t, n) for the tokens of x at positions ``rows`` (B, t) against keys at ``key_positions``
        (B, n): the keys given (a cache's, already rotated), or x's own (then ``key_positions`` are ``rows``).
        Positions matter only to rotary queries and keys."""
        if keys is None:
            keys = self.keys(x, rows)
        return self.queries(x, rows) @ keys.transpose(-1, -2)

    @staticmethod
    def flops(batch: int, seq: int, d_model: int, n_heads: int, max_len: int, **options) -> int:
        """Q, K projections 4 B n d^2, Q K^T 2 B n^2 d."""
        return 4 * batch * seq * d_model * d_model + 2 * batch * seq * seq * d_model
