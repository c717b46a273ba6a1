"""Random synthesizer logits: one learned (or fixed) matrix per head, ``R_h[:n, :n]``."""

from __future__ import annotations

import torch
from torch import Tensor, nn


def xavier_per_head_(t: Tensor) -> Tensor:
    """Xavier-uniform on each (rows, cols) matrix of a (H, rows, cols) tensor."""
    with torch.no_grad():
        for h in range(t.shape[0]):
            nn.init.xavier_uniform_(t[h])
    return t


class RandomLogits(nn.Module):
    """``R: (H, L, L)``. With ``trainable=False`` it is a buffer: saved, never optimised."""

    def __init__(self, n_heads: int, max_len: int, trainable: bool = True):
        super().__init__()
        r = xavier_per_head_(torch.empty(n_heads, max_len, max_len))
        if trainable:
            self.r = nn.Parameter(r)
        else:
            self.register_buffer("r", r)

    def logits(self, start: int, n_rows: int, n_keys: int) -> Tensor:
        """Rows start..start+n_rows-1, columns 0..n_keys-1, as (1, H, n_rows, n_keys)."""
        r = self.r
        if start > 0 or n_rows < r.shape[1] or n_keys < r.shape[2]:  # a slice's backward would allocate a zero (H, L, L)
            r = r[:, start : start + n_rows, :n_keys]
        return r.unsqueeze(0)

