"""Random synthesizer logits: one learned (or fixed) matrix per head, ``R_h[:n, :n]``.

In a causal layer the upper triangle of R is never read (its gradient is zero), yet AdamW still
steps it. Storing only the lower triangle was measured and does not pay (docs/bench/kernels.md:
the optimizer step is a tiny share of a training step), so R stays (H, L, L), while packing would add
a gather in every forward and a scatter in every backward. Masking the
gradient saves nothing at all: AdamW reads and writes every element whatever its gradient. What the
upper triangle does cost is memory: 16 bytes per element with AdamW (weight, gradient, two
moments), 64 MiB per layer at L = 1024 and 8 heads.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .forms import BIAS


def xavier_per_head_(t: Tensor) -> Tensor:
    """Xavier-uniform on each (rows, cols) matrix of a (H, rows, cols) tensor."""
    with torch.no_grad():
        for h in range(t.shape[0]):
            nn.init.xavier_uniform_(t[h])
    return t


class RandomLogits(nn.Module):
    """``R: (H, L, L)``, learned. ``FixedRandomLogits`` keeps it as a buffer: saved, never optimised."""

    form = BIAS
    input_independent = True
    trainable = True

    def __init__(self, d_model: int, n_heads: int, max_len: int, **options):
        super().__init__()
        r = torch.empty(n_heads, max_len, max_len)
        if self.trainable:
            self.r = nn.Parameter(r)
        else:
            self.register_buffer("r", r)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        xavier_per_head_(self.r)

    def _block(self, start: int, n_rows: int, n_keys: int) -> Tensor:
        """Rows start..start+n_rows-1, columns 0..n_keys-1 of R: (H, n_rows, n_keys)."""
        r = self.r
        if start > 0 or n_rows < r.shape[1] or n_keys < r.shape[2]:  # a slice's backward would allocate a zero (H, L, L)
            r = r[:, start : start + n_rows, :n_keys]
        return r

    def logits(self, x: Tensor, start: int, n_keys: int) -> Tensor:
        """(1, H, t, n_keys) for the t = x.shape[1] rows from ``start``; x itself is not read."""
        return self._block(start, x.shape[1], n_keys).unsqueeze(0)

    def logits_at(self, x: Tensor, rows: Tensor, key_positions: Tensor) -> Tensor:
        """(B, H, t, n): ``R[h, rows[b, i], key_positions[b, j]]``, each row's own positions (x not read)."""
        return self.r[:, rows.unsqueeze(-1), key_positions.unsqueeze(-2)].transpose(0, 1)

    def bias(self, n: int) -> Tensor:
        """R[:, :n, :n]: (H, n, n)."""
        return self._block(0, n, n)

    @staticmethod
    def flops(batch: int, seq: int, d_model: int, n_heads: int, max_len: int, **options) -> int:
        """Nothing: R is read, not computed."""
        return 0


class FixedRandomLogits(RandomLogits):
    """``fixed_random``: R drawn once at init from the same distribution, a buffer in the state_dict."""

    trainable = False
