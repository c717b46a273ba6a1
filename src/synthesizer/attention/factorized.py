"""Factorized synthesizers: low-rank random logits and the tiled factorized dense logits."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .dense import linear_init_
from .random import xavier_per_head_
from .vanilla import split_heads


class FactorizedRandomLogits(nn.Module):
    """``(R1_h R2_h^T)[:n, :n]`` with ``R1, R2: (H, L, k)``."""

    def __init__(self, n_heads: int, max_len: int, k: int = 8):
        super().__init__()
        self.r1 = nn.Parameter(xavier_per_head_(torch.empty(n_heads, max_len, k)))
        self.r2 = nn.Parameter(xavier_per_head_(torch.empty(n_heads, max_len, k)))

    def logits(self, start: int, n_rows: int, n_keys: int) -> Tensor:
        """(1, H, n_rows, n_keys)."""
        return (self.r1[:, start : start + n_rows] @ self.r2[:, :n_keys].transpose(-1, -2)).unsqueeze(0)

    def features(self, batch: int, n: int) -> tuple[Tensor, Tensor]:
        """q = R1[:n], k = R2[:n], expanded over the batch: (B, H, n, k) each."""
        q, k = self.r1[:, :n].unsqueeze(0), self.r2[:, :n].unsqueeze(0)
        return q.expand(batch, -1, -1, -1), k.expand(batch, -1, -1, -1)



def default_split(max_len: int) -> int:
    """The largest divisor of max_len that is at most sqrt(max_len)."""
    return max(a for a in range(1, math.isqrt(max_len) + 1) if max_len % a == 0)


class FactorizedDenseLogits(nn.Module):
    """``S[i, j] = Pa[i, j // b] * Pb[i, j % b]`` with ``a * b = L``, ``Pa, Pb`` predicted from x_i."""

    def __init__(self, d_model: int, n_heads: int, max_len: int, a: int | None = None):
        super().__init__()
        a = default_split(max_len) if a is None else a
        if a < 1 or max_len % a != 0:
            raise ValueError(f"factorized_dense needs a divisor a of max_len={max_len}, got a={a}")
        self.n_heads, self.a, self.b = n_heads, a, max_len // a
        d_head = d_model // n_heads
        self.hidden = nn.Linear(d_model, d_model)  # W0 for all heads: d -> H * dh
        self.wa = nn.Parameter(torch.empty(n_heads, d_head, self.a))
        self.ba = nn.Parameter(torch.empty(n_heads, self.a))
        self.wb = nn.Parameter(torch.empty(n_heads, d_head, self.b))
        self.bb = nn.Parameter(torch.empty(n_heads, self.b))
        linear_init_(self.wa, self.ba, d_head)
        linear_init_(self.wb, self.bb, d_head)

    def logits(self, x: Tensor, n_keys: int) -> Tensor:
        """(B, H, t, n_keys) for the tokens of x."""
        hidden = torch.relu(split_heads(self.hidden(x), self.n_heads))  # (B, H, t, dh)
        pa = hidden @ self.wa.unsqueeze(0) + self.ba[None, :, None, :]  # (B, H, t, a)
        pb = hidden @ self.wb.unsqueeze(0) + self.bb[None, :, None, :]  # (B, H, t, b)
        # Column j = u*b + v pairs Pa[u] (each repeated b times) with Pb[v] (tiled a times): an outer
        # product, flattened, then cut to the first n_keys columns.
        return (pa.unsqueeze(-1) * pb.unsqueeze(-2)).flatten(-2)[..., :n_keys]
