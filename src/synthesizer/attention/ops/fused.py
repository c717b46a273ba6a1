"""``fused``: logits that are dot products (dense, factorized_random, vanilla and their mixtures) are
one dot product over concatenated features, handed to ``scaled_dot_product_attention``.

dense+vanilla has 2 d_h + 1 features (129 at d_h 64) against v's d_h, and v is padded to q's width.
The cheaper exact forms that were timed (v narrower than q, which leaves the flash kernel for the
math kernel; everything padded to a multiple of 8; 128 features with b2 moved out) won in no two
runs alike, so the padded form stays. (A two-pass form cannot be exact: the softmax of a sum does not
split.) Width 129 costs no more than 128 (moving b2 out of the features, e.g. as per-key weights
exp(b2) carried in v's padding, would not pay); the kernel takes one head size for q, k and v, so
dense's constant feature cannot be dropped without dropping b2. Figures: docs/bench/kernels.md.
``wide_qk`` computes the same mixtures with v at its own width, in our own blocks (a candidate).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..forms import FEATURES
from ..masks import allowed_keys, finite_masked_logit
from .scores import Scores
from .always import require, runs  # noqa: F401  (the kernel interface, dispatch.Kernel)

NAME = "fused"
NEEDS = "features"
APPLIES_TO = "layers of dot products of features only (vanilla, dense, factorized_random and their mixtures)"
FALLBACK = None  # it runs in every mode on every device (always.runs)


def fold(q: Tensor, k: Tensor, v: Tensor, padding: Tensor | None = None,
         multiple: int = 1) -> tuple[Tensor, Tensor, Tensor]:
    """q, k (B, H, n, dq), v (B, H, n, dv) at one head size (the fused kernels' condition): the widest,
    rounded up to ``multiple``, zeros appended (they add nothing to ``q k^T`` and are cut from the
    output). With ``padding`` (B, n) bool, key padding rides along as one more feature,
    ``q' = [q, 1]``, ``k' = [k, m if padded else 0]`` with ``m = masks.finite_masked_logit``, so a
    float mask shared by the batch stays the only mask."""
    if padding is not None:
        q = torch.cat([q, q.new_ones(q.shape[:-1] + (1,))], dim=-1)
        masked = finite_masked_logit(k.dtype)
        key_feature = torch.zeros(padding.shape, dtype=k.dtype, device=k.device).masked_fill(padding, masked)
        k = torch.cat([k, key_feature[:, None, :, None].expand(-1, k.shape[1], -1, -1)], dim=-1)
    size = -(-max(q.shape[-1], v.shape[-1]) // multiple) * multiple

    def widen(t: Tensor) -> Tensor:  # no copy where the size already fits
        return t if t.shape[-1] == size else F.pad(t, (0, size - t.shape[-1]))

    return widen(q), widen(k), widen(v)


def applies(components) -> bool:
    """Every component a dot product of features."""
    return all(c.form == FEATURES for c in components)


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """q, k (B, H, n, dq) of ``scores``; v (B, H, n, dh); logits ``q k^T`` with no further scaling.
    Returns (B, H, n, dh)."""
    dh = v.shape[-1]
    q, k, v = fold(scores.weighted_q(), scores.k, v)  # the fused CPU kernel needs one head size for q, k and v
    documents = scores.documents  # packed rows: each document's keys only (dispatch.PER_TOKEN)
    if documents is not None and padding is None:
        padding = torch.zeros(documents.shape, dtype=torch.bool, device=documents.device)
    allowed, empty = (None, None) if padding is None else allowed_keys(
        padding, causal, q.shape[2], documents=None if documents is None else (documents, documents))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout if training else 0.0,
                                         is_causal=causal and allowed is None, scale=1.0)
    if empty is not None:
        out = out.masked_fill(empty, 0.0)
    return out[..., :dh]
