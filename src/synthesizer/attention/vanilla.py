"""Dot-product logits: ``Q_h K_h^T / sqrt(d_h)``."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def split_heads(t: Tensor, n_heads: int) -> Tensor:
    """(B, n, H*dh) -> (B, H, n, dh)."""
    b, n, d = t.shape
    return t.view(b, n, n_heads, d // n_heads).transpose(1, 2)  # dh spelled out: -1 is ambiguous for B=0 or n=0


class VanillaLogits(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.scale = 1.0 / math.sqrt(d_model // n_heads)
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)

    def queries(self, x: Tensor) -> Tensor:
        """(B, t, d) -> (B, H, t, dh), already multiplied by 1/sqrt(dh)."""
        return split_heads(self.query(x), self.n_heads) * self.scale

    def keys(self, x: Tensor) -> Tensor:
        """(B, t, d) -> (B, H, t, dh): what a decoding cache stores."""
        return split_heads(self.key(x), self.n_heads)

    @staticmethod
    def logits(q: Tensor, k: Tensor) -> Tensor:
        return q @ k.transpose(-1, -2)

