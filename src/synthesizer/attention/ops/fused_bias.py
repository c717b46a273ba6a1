"""``fused_bias``: fused attention plus a batch-shared additive term that is learned (``w * R`` of random mixtures).

The fused CPU kernel accepts a float mask but gives no gradient for it (asking for one sends the call
to the slow math kernel, which keeps (B, H, n, n) tensors). So the forward and the q/k/v gradients
go through the fused kernel with the term detached, and the term's gradient, summed over the batch,
is computed block by block (``blockwise.bias_gradient``). Key padding rides along as one extra
feature (``q' = [q, 1]``, ``k' = [k, m if padded else 0]`` with ``m = masks.finite_masked_logit``), so no
per-example mask exists.
Needs the CPU kernel; ``available()`` says whether this torch build has it. Where it cannot run
(``runs``: dropout while training, as the kernel has no dropout with a float mask; a device without
the CPU kernel) the dispatcher sends the layer to ``FALLBACK``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..forms import BIAS, FEATURES
from ..masks import MASKED, allowed_keys, causal_mask, finite_masked_logit
from .blockwise import bias_gradient, blockwise_attention
from .scores import Scores

NAME = "fused_bias"
NEEDS = "features"
FALLBACK = "blockwise"


def applies(components) -> bool:
    """Dot products of features mixed with at least one batch-shared bias term."""
    forms = {c.form for c in components}
    return FEATURES in forms and BIAS in forms and forms <= {FEATURES, BIAS}


def available(device: torch.device) -> bool:
    return device.type == "cpu" and hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu_backward")


def runs(device: torch.device, training: bool, dropout: float) -> bool:
    """Whether the kernel can run a forward pass in this mode on this device."""
    return not (training and dropout > 0) and available(device)


def _fold(q: Tensor, k: Tensor, v: Tensor, padding: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """One head size for q, k and v (the kernel's condition), padding as an extra key feature."""
    if padding is not None:
        q = torch.cat([q, q.new_ones(q.shape[:-1] + (1,))], dim=-1)
        masked = finite_masked_logit(k.dtype)
        key_feature = torch.zeros(padding.shape, dtype=k.dtype, device=k.device).masked_fill(padding, masked)
        k = torch.cat([k, key_feature[:, None, :, None].expand(-1, k.shape[1], -1, -1)], dim=-1)
    size = max(q.shape[-1], v.shape[-1])
    return F.pad(q, (0, size - q.shape[-1])), F.pad(k, (0, size - k.shape[-1])), F.pad(v, (0, size - v.shape[-1]))


class _FusedBiasAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, bias, padding, causal):
        n, dv = q.shape[2], v.shape[-1]
        mask = bias.masked_fill(causal_mask(n, n, q.device), MASKED) if causal else bias
        qf, kf, vf = _fold(q, k, v, padding)
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(qf, kf, vf, 0.0, False, attn_mask=mask.unsqueeze(0), scale=1.0)
        empty = None
        if padding is not None:  # rows without a real key: zeros, as in the reference
            empty = allowed_keys(padding, causal, n)[1]  # (B, 1, n|1, 1)
            out = out.masked_fill(empty, 0.0)
        ctx.save_for_backward(q, k, v, bias, padding, qf, kf, vf, out, lse, mask, empty)
        ctx.causal = causal
        return out[..., :dv]

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, bias, padding, qf, kf, vf, out, lse, mask, empty = ctx.saved_tensors
        grad = F.pad(grad_out, (0, vf.shape[-1] - grad_out.shape[-1]))
        if empty is not None:
            grad = grad.masked_fill(empty, 0.0)
        dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            grad.contiguous(), qf, kf, vf, out, lse, 0.0, False, attn_mask=mask.unsqueeze(0), scale=1.0)
        dbias = bias_gradient(q, k, v, bias, padding, ctx.causal, grad[..., : v.shape[-1]]) if ctx.needs_input_grad[3] else None
        d = q.shape[-1]
        return dq[..., :d], dk[..., :d], dv[..., : v.shape[-1]], dbias, None, None


def fused_bias_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, padding: Tensor | None, causal: bool) -> Tensor:
    """q, k (B, H, n, dq); v (B, H, n, dv); bias (H, n, n) -> (B, H, n, dv). Logits ``q k^T + bias``, unscaled."""
    if q.shape[2] == 0:  # the CPU kernel dies (SIGFPE) on an empty sequence; the blockwise loop just runs 0 times
        return blockwise_attention(q, k, v, bias, padding, causal)
    return _FusedBiasAttention.apply(q, k, v, bias, padding, causal)


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """q, k (B, H, n, dq) and bias (H, n, n) of ``scores``; v (B, H, n, dv) -> (B, H, n, dv).
    No dropout (see ``runs``)."""
    return fused_bias_attention(scores.q, scores.k, v, scores.bias, padding, causal)
