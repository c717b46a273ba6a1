"""Factorized synthesizers: low-rank random logits and the tiled factorized dense logits."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..errors import InputError
from .dense import linear_init_
from .forms import FEATURES, LOGITS
from .random import xavier_per_head_
from .vanilla import split_heads


class FactorizedRandomLogits(nn.Module):
    """``(R1_h R2_h^T)[:n, :n]`` with ``R1, R2: (H, L, k)``; option ``k`` (default 8)."""

    form = FEATURES
    input_independent = True

    def __init__(self, d_model: int, n_heads: int, max_len: int, *, k: int = 8, **options):
        super().__init__()
        self.r1 = nn.Parameter(torch.empty(n_heads, max_len, k))
        self.r2 = nn.Parameter(torch.empty(n_heads, max_len, k))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        xavier_per_head_(self.r1)
        xavier_per_head_(self.r2)

    def logits(self, x: Tensor, start: int, n_keys: int) -> Tensor:
        """(1, H, t, n_keys) for the t = x.shape[1] rows from ``start``; x itself is not read."""
        return (self.r1[:, start : start + x.shape[1]] @ self.r2[:, :n_keys].transpose(-1, -2)).unsqueeze(0)

    def logits_at(self, x: Tensor, rows: Tensor, key_positions: Tensor) -> Tensor:
        """(B, H, t, n): ``R1[rows] R2[key_positions]^T`` per example (x not read)."""
        return (self.r1[:, rows] @ self.r2[:, key_positions].transpose(-1, -2)).transpose(0, 1)

    def bias(self, n: int) -> Tensor:
        """R1[:n] R2[:n]^T: (H, n, n)."""
        return self.r1[:, :n] @ self.r2[:, :n].transpose(-1, -2)

    def features(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """q = R1[:n], k = R2[:n], expanded over the batch of x: (B, H, n, k) each."""
        batch, n = x.shape[:2]
        q, k = self.r1[:, :n].unsqueeze(0), self.r2[:, :n].unsqueeze(0)
        return q.expand(batch, -1, -1, -1), k.expand(batch, -1, -1, -1)

    def features_at(self, x: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """q = R1[p], k = R2[p] at each example's own positions (B, n): (B, H, n, k) each."""
        return self.r1[:, positions].transpose(0, 1), self.r2[:, positions].transpose(0, 1)

    @staticmethod
    def flops(batch: int, seq: int, d_model: int, n_heads: int, max_len: int, *, k: int = 8, **options) -> int:
        """R1 R2^T 2 H n^2 k, once for the batch."""
        return 2 * n_heads * seq * seq * k


def default_split(max_len: int) -> int:
    """The largest divisor of max_len that is at most sqrt(max_len)."""
    return max(a for a in range(1, math.isqrt(max_len) + 1) if max_len % a == 0)


class FactorizedDenseLogits(nn.Module):
    """``S[i, j] = Pa[i, j // b] * Pb[i, j % b]`` with ``a * b = L``, ``Pa, Pb`` predicted from x_i.
    Option ``fd_split``: ``a`` (default: ``default_split(max_len)``)."""

    form = LOGITS

    def __init__(self, d_model: int, n_heads: int, max_len: int, *, fd_split: int | None = None, **options):
        super().__init__()
        a = default_split(max_len) if fd_split is None else fd_split
        if a < 1 or max_len % a != 0:
            raise InputError(f"factorized_dense needs a divisor a of max_len={max_len}, got a={a}")
        self.n_heads, self.a, self.b = n_heads, a, max_len // a
        d_head = d_model // n_heads
        self.hidden = nn.Linear(d_model, d_model)  # W0 for all heads: d -> H * dh
        self.wa = nn.Parameter(torch.empty(n_heads, d_head, self.a))
        self.ba = nn.Parameter(torch.empty(n_heads, self.a))
        self.wb = nn.Parameter(torch.empty(n_heads, d_head, self.b))
        self.bb = nn.Parameter(torch.empty(n_heads, self.b))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Wa, ba, Wb, bb (the hidden layer is an ``nn.Linear``, which resets itself)."""
        linear_init_(self.wa, self.ba, self.wa.shape[1])
        linear_init_(self.wb, self.bb, self.wb.shape[1])

    def factors(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Pa (B, H, t, a) and Pb (B, H, t, b) of the tokens of x."""
        hidden = torch.relu(split_heads(self.hidden(x), self.n_heads))  # (B, H, t, dh)
        pa = hidden @ self.wa.unsqueeze(0) + self.ba[None, :, None, :]
        pb = hidden @ self.wb.unsqueeze(0) + self.bb[None, :, None, :]
        return pa, pb

    def features(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """What the ``factorized_dense`` kernel takes: the factors Pa (B, H, n, a), Pb (B, H, n, b).
        Not a dot product (the component's form stays ``LOGITS``): the kernel tiles them itself."""
        return self.factors(x)

    def logits(self, x: Tensor, start: int, n_keys: int) -> Tensor:
        """(B, H, t, n_keys) for the tokens of x (position does not matter)."""
        pa, pb = self.factors(x)
        # Column j = u*b + v pairs Pa[u] (each repeated b times) with Pb[v] (tiled a times): an outer
        # product, flattened, then cut to the first n_keys columns.
        return (pa.unsqueeze(-1) * pb.unsqueeze(-2)).flatten(-2)[..., :n_keys]

    def logits_at(self, x: Tensor, rows: Tensor, key_positions: Tensor) -> Tensor:
        """(B, H, t, n): column j reads the tiled factors at key position ``p = key_positions[b, j]``,
        ``Pa[p // b] * Pb[p % b]`` (rows: the tokens of x, whatever their positions)."""
        pa, pb = self.factors(x)
        index = key_positions[:, None, None, :].expand(-1, pa.shape[1], pa.shape[2], -1)
        return pa.gather(-1, torch.div(index, self.b, rounding_mode="floor")) * pb.gather(-1, index % self.b)

    @staticmethod
    def flops(batch: int, seq: int, d_model: int, n_heads: int, max_len: int, **options) -> int:
        """W0 2 B n d^2, Wa and Wb 2 B n d (a + b) with a b = L (the outer product is elementwise)."""
        a = default_split(max_len)
        return 2 * batch * seq * d_model * d_model + 2 * batch * seq * d_model * (a + max_len // a)
