"""``fused``: logits that are dot products (dense, factorized_random, vanilla and their mixtures) are
one dot product over concatenated features, handed to ``scaled_dot_product_attention``.

dense+vanilla has 2 d_h + 1 features (129 at d_h 64) against v's d_h, and v is padded to q's width.
Cheaper exact forms, measured with torch 2.13 on CPU (the attention call alone, forward+backward,
batch 4, 8 heads, seq 1024, 2 threads, interleaved medians of 5, while other jobs loaded the
machine; ratios to d_h 64 everywhere):
* v narrower than q (129/64): the public call accepts it but leaves the fused kernel for the math
  kernel (the flash kernel refuses: "Q/K/V should have the same head size"): 1.90x;
* everything padded to 136 (a multiple of 8): 1.78x in one run, 10% slower than 129 in another;
* 128 features (b2 moved out, a lower bound: its gradient would need a second pass): 1.58x in one
  run, 13% slower than 129 in another;
* the current 129/129: 2.10x and 1.83x in those two runs.
No form won in both runs, so the padded form stays. (A two-pass form cannot be exact: the softmax
of a sum does not split.)
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from ..forms import FEATURES
from ..masks import allowed_keys
from .scores import Scores

NAME = "fused"
NEEDS = "features"


def applies(components) -> bool:
    """Every component a dot product of features."""
    return all(c.form == FEATURES for c in components)


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """q, k (B, H, n, dq) of ``scores``; v (B, H, n, dh); logits ``q k^T`` with no further scaling.
    Returns (B, H, n, dh)."""
    q, k = scores.q, scores.k
    dh, dq = v.shape[-1], q.shape[-1]
    if dq != dh:  # the fused CPU kernel needs one head size for q, k and v
        v = F.pad(v, (0, dq - dh)) if dq > dh else v
        if dq < dh:
            q, k = F.pad(q, (0, dh - dq)), F.pad(k, (0, dh - dq))
    allowed, empty = (None, None) if padding is None else allowed_keys(padding, causal, q.shape[2])
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout if training else 0.0,
                                         is_causal=causal and allowed is None, scale=1.0)
    if empty is not None:
        out = out.masked_fill(empty, 0.0)
    return out[..., :dh]
