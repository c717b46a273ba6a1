"""``sdpa_bias``: features mixed with a batch-shared bias term (random mixtures) in one
``scaled_dot_product_attention`` call whose float mask is the bias itself, gradient included.

Logits ``q k^T + sum_c w_c B_c``: the mask is ``Scores.bias()`` (1, H, n, n), -inf above the
diagonal when causal, and it requires grad. On CUDA the call is held to the memory-efficient kernel
(math where that kernel cannot run, e.g. float64), which returns the mask's gradient from its own
backward: R's and the mixture weights' gradients come out of the kernel, with no pass of ours.
That kernel writes the mask's gradient per example, (B, H, n, n), before autograd sums it over the
batch: the backward's peak holds one such tensor. Flash takes no mask; cuDNN is left out, as its
backward with a float mask has given NaN query gradients on H100/H200 (pytorch/pytorch#196678).
On CPU the same call runs sdpa's math kernel (the one that differentiates a mask), which
materialises the probabilities: there ``fused_bias`` stays the default.

Key padding rides along as one extra feature (``fused.fold``), so the mask stays batch-shared; rows
without a real key give zeros, as in the reference. Dropout is sdpa's, one mask per example.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..masks import allowed_keys, masked_bias
from . import fused_bias
from .fused import fold
from .scores import Scores
from .always import require, runs  # noqa: F401  (the kernel interface, dispatch.Kernel)

NAME = "sdpa_bias"
NEEDS = "features"
APPLIES_TO = "dot products of features mixed with at least one batch-shared bias (random+vanilla, ...)"
FALLBACK = None  # it runs in every mode on every device (always.runs)
# The backends a CUDA call may use, in sdpa's own order of preference (see above).
CUDA_BACKENDS = [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
# Head sizes are padded to a multiple of this (zeros: the logits do not change): the memory-efficient
# kernel's aligned variants need it, and random+dense has d_h + 1 features (one more with padding),
# which would take a slower variant or the math kernel.
HEAD_MULTIPLE = 8


def applies(components) -> bool:
    """The layers ``fused_bias`` computes: dot products of features mixed with a batch-shared bias."""
    return fused_bias.applies(components)


def _backends(device: torch.device):
    return sdpa_kernel(CUDA_BACKENDS) if device.type == "cuda" else contextlib.nullcontext()


def sdpa_bias_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, padding: Tensor | None, causal: bool,
                        dropout: float = 0.0) -> Tensor:
    """q, k (B, H, n, dq); v (B, H, n, dv); bias (H, n, n), differentiable; padding (B, n) bool or None
    -> (B, H, n, dv). Logits ``q k^T + bias``, unscaled; ``dropout`` on the probabilities."""
    n, dv = q.shape[2], v.shape[-1]
    mask = masked_bias(bias, causal).to(q.dtype).unsqueeze(0)  # autocast leaves a float32 R beside bf16 features
    if q.shape[0] == 0 or n == 0:
        # sdpa's result for an empty batch is cut off from the mask, which would leave R without a
        # gradient; the plain formula's empty products keep the graph: zero gradients, as on every path
        return torch.softmax(q @ k.transpose(-1, -2) + mask, dim=-1) @ v
    qf, kf, vf = fold(q, k, v, padding, multiple=HEAD_MULTIPLE)
    if mask.requires_grad and not (qf.requires_grad or kf.requires_grad or vf.requires_grad):
        # The memory-efficient kernel's backward crashed when only the mask needed a gradient
        # (pytorch/pytorch#148476, fixed in later releases): a v that asks for one (dropped) avoids it.
        vf = vf.detach().requires_grad_(True)
    with _backends(q.device):
        out = F.scaled_dot_product_attention(qf, kf, vf, attn_mask=mask, dropout_p=dropout, scale=1.0)
    out = out[..., :dv]
    if padding is not None:  # rows without a real key: zeros, as in the reference
        out = out.masked_fill(allowed_keys(padding, causal, n)[1], 0.0)
    return out


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """q, k (B, H, n, dq) and the bias terms of ``scores``; v (B, H, n, dv) -> (B, H, n, dv)."""
    return sdpa_bias_attention(scores.weighted_q(), scores.k, v, scores.bias(), padding, causal,
                               dropout if training else 0.0)
