"""Position schemes of the dot-product component: rotary embeddings on its queries and keys, and an
additive bias on its logits (T5's bucketed relative bias, or ALiBi's distance penalty).

A synthesizer component keeps its own definition (SPEC.md): random and dense logits are indexed by
absolute position already, so a scheme here touches the ``vanilla`` component only. In a mixture the
bias is part of vanilla's logits, so it is weighted by vanilla's mixture weight:
``S = w_v (Q K^T / sqrt(d_h) + B) + sum_c w_c S_c``.

* ``rope`` (Su et al., 2021): the queries and keys of head h are rotated pairwise by angles
  ``p * theta_i`` with ``theta_i = 10000^(-2i/d_h)``, so ``q_i . k_j`` depends on ``i - j`` only. The
  pairs are the two halves of a head's features (the GPT-NeoX layout).
* ``relative`` (Raffel et al., 2020, T5): a learned scalar per head and bucket of the key's offset
  ``j - i``; exact buckets for small offsets, logarithmic ones up to ``max_distance``, one bucket
  beyond. Encoders use both directions (half the buckets each), decoders the past only. One table
  per stack, shared by its layers, as T5 does: the model computes the bias once per forward pass.
* ``alibi`` (Press et al., 2022): ``-m_h |i - j|`` with ALiBi's fixed slopes ``m_h`` (a geometric
  sequence from ``2^(-8/H)``), no parameters.

Biases are computed from query and key positions, so a decoding step (rows ``start..start+t-1``
against keys ``0..start+t-1``) gets exactly the rows of the full pass.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..errors import InputError
from .names import ABSOLUTE, BIAS_SCHEMES, LAYER_SCHEMES, MODEL_POSITIONS  # noqa: F401 (read from here too)

ROPE_BASE = 10000.0


# ---------------------------------------------------------------------------------------- rotary
def rotary_angles(positions: Tensor, d_head: int, base: float = ROPE_BASE) -> tuple[Tensor, Tensor]:
    """cos and sin (n, d_head/2) of the rotation of each position (float32, ``positions`` (n,) ints)."""
    if d_head % 2:
        raise InputError(f"rotary positions need an even head size, got d_head={d_head}")
    inv_freq = base ** (-torch.arange(0, d_head, 2, device=positions.device, dtype=torch.float32) / d_head)
    angles = positions.to(torch.float32).unsqueeze(-1) * inv_freq
    return angles.cos(), angles.sin()


def rotate(x: Tensor, start: int | Tensor = 0) -> Tensor:
    """x (B, H, t, dh) at positions start..start+t-1 (or at the positions of each row, ``start`` a
    (B, t) tensor), rotated: the halves (a, b) of each head become (a cos - b sin, a sin + b cos).
    Computed in x's dtype."""
    t, dh = x.shape[-2:]
    positions = start if isinstance(start, Tensor) else torch.arange(start, start + t, device=x.device)
    cos, sin = rotary_angles(positions, dh)
    if isinstance(start, Tensor):  # (B, t, dh/2) -> (B, 1, t, dh/2): the same rotation for every head
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    a, b = x[..., : dh // 2], x[..., dh // 2 :]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


# ---------------------------------------------------------------------------------------- biases
def relative_buckets(offset: Tensor, bidirectional: bool, n_buckets: int, max_distance: int) -> Tensor:
    """The bucket of each key offset ``j - i`` (ints): offsets below half the buckets (of one
    direction) get one each, larger ones share buckets spaced logarithmically up to ``max_distance``,
    and every offset beyond falls in the last. Bidirectional: the first half of the buckets is for
    keys at or before the query, the second for keys after it. Causal: keys after the query (masked
    anyway) share bucket 0 with the query itself."""
    if bidirectional:
        n_buckets //= 2
        base = (offset > 0).long() * n_buckets
        distance = offset.abs()
    else:
        base = torch.zeros_like(offset)
        distance = (-offset).clamp(min=0)
    exact = n_buckets // 2
    # log spacing from `exact` to `max_distance` over the remaining buckets (distance >= exact here)
    far = exact + (torch.log(distance.float().clamp(min=1) / exact) / math.log(max_distance / exact)
                   * (n_buckets - exact)).long()
    far = far.clamp(max=n_buckets - 1)
    return base + torch.where(distance < exact, distance, far)


def offsets(rows: Tensor, keys: Tensor) -> Tensor:
    """``key position - row position`` of every pair: (t, n) for positions (t,) and (n,), (B, t, n) for
    positions (B, t) and (B, n)."""
    return keys.unsqueeze(-2) - rows.unsqueeze(-1)


def pair_positions(start: int | Tensor, n_rows: int | Tensor, n_keys: int | None, device) -> tuple[Tensor, Tensor]:
    """The (row, key) positions a bias is asked for: ``(start, n_rows, n_keys)`` numbers (rows
    start..start+n_rows-1 against keys 0..n_keys-1), or ``(rows, keys)`` position tensors as given."""
    if isinstance(start, Tensor):
        return start, n_rows
    return (torch.arange(start, start + n_rows, device=device), torch.arange(n_keys, device=device))


def heads_first(bias: Tensor) -> Tensor:
    """(..., t, n, H) -> (H, t, n) or (B, H, t, n)."""
    return bias.movedim(-1, -3)


class RelativePositionBias(nn.Module):
    """T5's relative bias: a learned (buckets, H) table; ``forward(start, n_rows, n_keys)`` gives
    (H, n_rows, n_keys) for rows start..start+n_rows-1 against keys 0..n_keys-1, and
    ``forward(rows, keys)`` with position tensors (B, t) and (B, n) gives (B, H, t, n)."""

    def __init__(self, n_heads: int, causal: bool, n_buckets: int = 32, max_distance: int = 128, d_model: int = 64):
        super().__init__()
        self.causal, self.n_buckets, self.max_distance = causal, n_buckets, max_distance
        self.d_model = d_model
        self.table = nn.Embedding(n_buckets, n_heads)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """T5's initialisation: N(0, 1/d_model)."""
        nn.init.normal_(self.table.weight, std=self.d_model ** -0.5)

    def forward(self, start: int | Tensor, n_rows: int | Tensor, n_keys: int | None = None) -> Tensor:
        rows, keys = pair_positions(start, n_rows, n_keys, self.table.weight.device)
        buckets = relative_buckets(offsets(rows, keys), not self.causal, self.n_buckets, self.max_distance)
        return heads_first(self.table(buckets))

    def extra_repr(self) -> str:
        return f"causal={self.causal}, n_buckets={self.n_buckets}, max_distance={self.max_distance}"


def alibi_slopes(n_heads: int) -> Tensor:
    """ALiBi's slopes: for a power of two H, ``2^(-8 h / H)`` for h = 1..H; otherwise those of the
    largest power of two below H, then every other slope of twice that many (Press et al.'s rule)."""
    def geometric(n: int) -> list[float]:
        first = 2.0 ** (-8.0 / n)
        return [first ** (h + 1) for h in range(n)]

    below = 2 ** int(math.floor(math.log2(n_heads)))
    slopes = geometric(below)
    if below < n_heads:
        slopes += geometric(2 * below)[0::2][: n_heads - below]
    return torch.tensor(slopes)


class ALiBi(nn.Module):
    """``-m_h |i - j|`` with fixed slopes (a buffer, rebuilt, not saved): (H, n_rows, n_keys), or
    (B, H, t, n) for position tensors (as ``RelativePositionBias``)."""

    def __init__(self, n_heads: int, causal: bool = False):
        super().__init__()
        self.causal = causal
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)

    @torch.no_grad()
    def reset_parameters(self) -> None:
        self.slopes.copy_(alibi_slopes(self.slopes.numel()))

    def forward(self, start: int | Tensor, n_rows: int | Tensor, n_keys: int | None = None) -> Tensor:
        rows, keys = pair_positions(start, n_rows, n_keys, self.slopes.device)
        return heads_first(-offsets(rows, keys).abs().to(self.slopes.dtype).unsqueeze(-1) * self.slopes)


def position_bias(scheme: str, n_heads: int, causal: bool, d_model: int) -> nn.Module | None:
    """The bias module of a scheme (``relative``, ``alibi``), or None for the others."""
    if scheme == "relative":
        return RelativePositionBias(n_heads, causal, d_model=d_model)
    if scheme == "alibi":
        return ALiBi(n_heads, causal)
    return None
