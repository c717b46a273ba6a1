"""Dense synthesizer logits: each token predicts its own attention row.

``S_h = relu(x W1_h + b1_h) W2^T[:, :n] + b2[:n]``. The second layer is a key matrix that does not
depend on the input, so the logits are a dot product ``q k^T`` with ``q = [relu(x W1_h + b1_h), 1]``
and ``k = [W2, b2]``; the fast path relies on that form.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .forms import FEATURES
from .vanilla import split_heads


def linear_init_(weight: Tensor, bias: Tensor | None, fan_in: int) -> None:
    """nn.Linear's default initialisation, for weights stored outside an nn.Linear."""
    bound = 1.0 / math.sqrt(fan_in)
    nn.init.uniform_(weight, -bound, bound)
    if bias is not None:
        nn.init.uniform_(bias, -bound, bound)


class DenseLogits(nn.Module):
    """Option ``dense_per_head``: one ``W2, b2`` per head instead of one shared by the heads."""

    form = FEATURES

    def __init__(self, d_model: int, n_heads: int, max_len: int, *, dense_per_head: bool = False, **options):
        super().__init__()
        self.n_heads, self.per_head = n_heads, dense_per_head
        d_head = d_model // n_heads
        self.hidden = nn.Linear(d_model, d_model)  # W1 for all heads at once: d -> H * dh
        shape = (n_heads, max_len) if dense_per_head else (max_len,)
        self.w2 = nn.Parameter(torch.empty(*shape, d_head))  # (L, dh) or (H, L, dh)
        self.b2 = nn.Parameter(torch.empty(*shape))  # (L,) or (H, L)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """W2 and b2 (the hidden layer is an ``nn.Linear``, which resets itself)."""
        linear_init_(self.w2, self.b2, self.w2.shape[-1])

    def queries(self, x: Tensor) -> Tensor:
        """(B, t, d) -> relu(x W1 + b1) as (B, H, t, dh)."""
        return torch.relu(split_heads(self.hidden(x), self.n_heads))

    def key_matrix(self, n_keys: int) -> tuple[Tensor, Tensor]:
        """W2 and b2 cut to the first n_keys positions, shaped (1|H, n_keys, dh) and (1|H, n_keys)."""
        if self.per_head:
            return self.w2[:, :n_keys], self.b2[:, :n_keys]
        return self.w2[:n_keys].unsqueeze(0), self.b2[:n_keys].unsqueeze(0)

    def logits(self, x: Tensor, start: int, n_keys: int) -> Tensor:
        """Rows for the tokens of x (position does not matter), columns 0..n_keys-1: (B, H, t, n_keys)."""
        w2, b2 = self.key_matrix(n_keys)
        return self.queries(x) @ w2.transpose(-1, -2).unsqueeze(0) + b2.unsqueeze(0).unsqueeze(-2)

    def logits_at(self, x: Tensor, rows: Tensor, key_positions: Tensor) -> Tensor:
        """(B, H, t, n): the tokens of x (their positions do not matter) against the rows of W2 and b2
        at each example's key positions (B, n)."""
        w2, b2 = self.key_rows(key_positions)
        return self.queries(x) @ w2.transpose(-1, -2) + b2.unsqueeze(-2)

    def key_rows(self, key_positions: Tensor) -> tuple[Tensor, Tensor]:
        """The rows of W2 and b2 at each example's key positions (B, n): (B, H|1, n, dh) and (B, H|1, n)."""
        if self.per_head:  # (H, L, dh) -> (B, H, n, dh)
            return self.w2[:, key_positions].transpose(0, 1), self.b2[:, key_positions].transpose(0, 1)
        return self.w2[key_positions].unsqueeze(1), self.b2[key_positions].unsqueeze(1)  # (L, dh) -> (B, 1, n, dh)

    def features_at(self, x: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """``features`` with each example's keys at its own positions (B, n): k = [W2[p], b2[p]] per example."""
        q = torch.cat([self.queries(x), x.new_ones(x.shape[0], self.n_heads, x.shape[1], 1)], dim=-1)
        w2, b2 = self.key_rows(positions)
        k = torch.cat([w2, b2.unsqueeze(-1)], dim=-1)
        return q, k.expand(-1, self.n_heads, -1, -1)

    def features(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """q (B, H, n, dh+1) and k (B, H, n, dh+1), k expanded over the batch, with q k^T equal to the logits.

        q's constant feature comes out of the same product as the others: each head's W1 gets a zero row
        and b1 a 1, and relu(0 x + 1) = 1. So q is the one tensor that relu keeps for backward, not that
        plus a concatenated copy (32 MiB less at batch 8, seq 2048, d_model 512)."""
        d_model = x.shape[-1]
        w1 = self.hidden.weight.view(self.n_heads, -1, d_model)
        b1 = self.hidden.bias.view(self.n_heads, -1)
        w1 = torch.cat([w1, w1.new_zeros(self.n_heads, 1, d_model)], dim=1).flatten(0, 1)
        b1 = torch.cat([b1, b1.new_ones(self.n_heads, 1)], dim=1).flatten()
        q = split_heads(torch.relu_(F.linear(x, w1, b1)), self.n_heads)  # linear keeps x, not its output
        w2, b2 = self.key_matrix(x.shape[1])
        k = torch.cat([w2, b2.unsqueeze(-1)], dim=-1).unsqueeze(0)
        return q, k.expand(x.shape[0], self.n_heads, -1, -1)

    @staticmethod
    def flops(batch: int, seq: int, d_model: int, n_heads: int, max_len: int, **options) -> int:
        """W1 2 B n d^2, relu(x W1) W2^T 2 B n^2 d."""
        return 2 * batch * seq * d_model * d_model + 2 * batch * seq * seq * d_model
