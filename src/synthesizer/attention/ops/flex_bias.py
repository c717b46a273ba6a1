"""``flex``: features mixed with a batch-shared bias term (random mixtures) through FlexAttention
(torch >= 2.6), opt-in (``impl="flex"``), for CUDA.

Logits ``q k^T + sum_c w_c B_c``: the bias sum (H, n, n) is captured by a ``score_mod`` that adds
``bias[h, q_idx, kv_idx]``; FlexAttention differentiates captured tensors, so R's and the mixture
weights' gradients come out of its backward (accumulated with atomic adds on the GPU: not
bit-for-bit deterministic). Causal is a block mask (blocks above the diagonal are skipped). Key
padding is a finite logit from the ``score_mod`` (``masks.finite_masked_logit``), so a row with no
real key stays finite and is set to zeros afterwards, as in the reference. On CUDA the call is
compiled (``torch.compile``: an unfused eager FlexAttention materialises the scores); on CPU torch
has no FlexAttention backward, so the layer runs ``FALLBACK`` there, and the function below runs
eagerly (forward only, for tests). No dropout: training with dropout runs ``FALLBACK``.
Tested against the reference on CUDA only (``tests/attention/ops/test_flex_bias.py``).
"""

from __future__ import annotations

import functools
import importlib.util

import torch
from torch import Tensor

from ..masks import allowed_keys, finite_masked_logit
from . import fused_bias
from .fused import fold
from .scores import Scores, kernel_dtype

NAME = "flex"
NEEDS = "features"
FALLBACK = "sdpa_bias"
APPLIES_TO = "the layers sdpa_bias computes: dot products of features mixed with random or fixed_random"


def installed() -> bool:
    """Whether this torch has FlexAttention (2.6 and later)."""
    return importlib.util.find_spec("torch.nn.attention.flex_attention") is not None


def require() -> None:
    if not installed():
        raise ImportError(f"impl='flex' needs FlexAttention (torch >= 2.6); this is torch {torch.__version__}")


def applies(components) -> bool:
    """The layers ``fused_bias`` computes: dot products of features mixed with a batch-shared bias."""
    return fused_bias.applies(components)


def runs(device: torch.device, training: bool, dropout: float) -> bool:
    """CUDA only (no FlexAttention backward on CPU), no dropout."""
    return device.type == "cuda" and not (training and dropout > 0) and installed()


@functools.lru_cache(maxsize=None)
def _compiled():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


@functools.lru_cache(maxsize=16)
def _causal_block_mask(n: int, device: str):
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(lambda b, h, q_idx, kv_idx: kv_idx <= q_idx, None, None, n, n, device=device)


def flex_bias_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, padding: Tensor | None, causal: bool) -> Tensor:
    """q, k (B, H, n, dq); v (B, H, n, dv); bias (H, n, n), differentiable; padding (B, n) bool or None
    -> (B, H, n, dv). Logits ``q k^T + bias``, unscaled."""
    require()
    from torch.nn.attention.flex_attention import flex_attention

    n, dv = q.shape[2], v.shape[-1]
    if q.shape[0] == 0 or n == 0:  # nothing to launch; the plain formula keeps the graph (zero gradients)
        return torch.softmax(q @ k.transpose(-1, -2) + bias.to(q.dtype), dim=-1) @ v
    width = max(16, 1 << (max(q.shape[-1], dv) - 1).bit_length())  # one power-of-two head size for q, k, v
    dtype = kernel_dtype(v)
    q, k, v = fold(q.to(dtype), k.to(dtype), v.to(dtype), multiple=width)
    masked = finite_masked_logit(torch.float32)

    if padding is None:
        def score_mod(score, b, h, q_idx, kv_idx):
            return score + bias[h, q_idx, kv_idx]
    else:
        def score_mod(score, b, h, q_idx, kv_idx):
            return torch.where(padding[b, kv_idx], masked, score + bias[h, q_idx, kv_idx])

    cuda = q.device.type == "cuda"
    block_mask = _causal_block_mask(n, str(q.device)) if causal else None
    if causal and not cuda:
        block_mask = None  # eager on CPU: the causal rule goes into the score instead
        inner = score_mod

        def score_mod(score, b, h, q_idx, kv_idx):
            return torch.where(kv_idx <= q_idx, inner(score, b, h, q_idx, kv_idx), float("-inf"))

    attention = _compiled() if cuda else flex_attention
    out = attention(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=1.0)[..., :dv]
    if padding is not None:  # rows without a real key: zeros, as in the reference
        out = out.masked_fill(allowed_keys(padding, causal, n)[1], 0.0)
    return out


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """q, k (B, H, n, dq) and the bias terms of ``scores``; v (B, H, n, dv) -> (B, H, n, dv). No dropout."""
    return flex_bias_attention(scores.weighted_q(), scores.k, v, scores.bias(), padding, causal)
