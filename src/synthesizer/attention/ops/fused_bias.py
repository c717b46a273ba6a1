"""``fused_bias``: fused attention plus a batch-shared additive term that is learned (``w * R`` of random mixtures).

Forward: the fused CPU flash kernel (a private aten op) with ``w * R`` as a float mask, which also
gives each row's log-sum-exp. The kernel gives no gradient for its mask, and its own backward would
need a second pass for it, so the backward is ``blockwise.attention_backward``: one pass over query
blocks that recomputes the probabilities from the saved log-sum-exp and gives dq, dk, dv and the
batch-summed gradient of the term together. Measured on the random+vanilla layer (forward+backward,
batch 8, d_model 512, 8 heads, 2 threads, interleaved medians, ratios to the plain sdpa layer): the
kernel's backward plus a blockwise pass for the term 1.81x / 2.76x at seq 1024 / 2048, this pass
1.51x / 1.88x (with 16M-element blocks; 8M blocks cost a little speed for less memory, see
``blockwise.BLOCK_ELEMENTS``). The kernel's forward stays: blockwise's forward took 3x as long.

Key padding rides along as one extra feature (``q' = [q, 1]``, ``k' = [k, m if padded else 0]`` with
``m = masks.finite_masked_logit``), so no per-example mask exists.

The op is private: ``available(device, dtype)`` checks that it exists and that a tiny call works for
that dtype (once per process and dtype); where it does not, the layer runs blockwise's forward
instead (the same backward), with a one-time warning. Where the kernel cannot run at all (``runs``:
dropout while training, as the kernel has no dropout with a float mask; a device without the CPU
kernel) the dispatcher sends the layer to ``FALLBACK``.
"""

from __future__ import annotations

import functools
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor

from ..forms import BIAS, FEATURES
from ..masks import MASKED, allowed_keys, causal_mask, finite_masked_logit
from .blockwise import attention_backward, bias_gradient, blockwise_attention, blockwise_forward
from .scores import Scores

NAME = "fused_bias"
NEEDS = "features"
FALLBACK = "blockwise"
OP = "_scaled_dot_product_flash_attention_for_cpu"



def applies(components) -> bool:
    """Dot products of features mixed with at least one batch-shared bias term."""
    forms = {c.form for c in components}
    return FEATURES in forms and BIAS in forms and forms <= {FEATURES, BIAS}


def _kernel():
    """The fused CPU op, or None where this torch build has none."""
    return getattr(torch.ops.aten, OP, None) if hasattr(torch.ops.aten, OP) else None


def _probe(dtype: torch.dtype) -> bool:
    """Whether the op runs and gives the right answer on a tiny float-masked input of ``dtype``."""
    kernel = _kernel()
    if kernel is None:
        return False
    try:
        gen = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(1, 2, 3, 4, generator=gen).to(dtype) for _ in range(3))
        mask = torch.randn(1, 2, 3, 3, generator=gen).to(dtype)
        out, lse = kernel(q, k, v, 0.0, False, attn_mask=mask, scale=1.0)[:2]
        logits = (q.double() @ k.double().transpose(-1, -2)) + mask.double()
        want = torch.softmax(logits, -1) @ v.double()
        tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4
        return (out.shape == want.shape and lse.shape == (1, 2, 3)
                and bool(torch.allclose(out.double(), want, rtol=tol, atol=tol))
                and bool(torch.allclose(lse.double(), torch.logsumexp(logits, -1), rtol=tol, atol=tol)))
    except (RuntimeError, TypeError, ValueError, NotImplementedError):
        return False


_PROBED: dict[torch.dtype, bool] = {}  # what _probe found, read as a constant by torch.compile


@torch.compiler.disable  # a one-off eager check: a compiled graph must not trace the probe's kernel call
def _run_probe(dtype: torch.dtype) -> bool:
    _PROBED[dtype] = _probe(dtype)
    return _PROBED[dtype]


def available(device: torch.device, dtype: torch.dtype = torch.float32) -> bool:
    """Whether the fused CPU op exists and works for ``dtype`` (checked once per process and dtype)."""
    if device.type != "cpu":
        return False
    known = _PROBED.get(dtype)
    return _run_probe(dtype) if known is None else known


def runs(device: torch.device, training: bool, dropout: float) -> bool:
    """Whether the kernel can run a forward pass in this mode on this device."""
    return not (training and dropout > 0) and available(device)


@functools.lru_cache(maxsize=None)
def _warn_fallback(dtype: torch.dtype) -> None:
    warnings.warn(f"fused_bias: torch.ops.aten.{OP} is missing or fails for {dtype} in this torch build; "
                  "running the blockwise forward instead (slower, same results)", RuntimeWarning, stacklevel=3)


def _fold(q: Tensor, k: Tensor, v: Tensor, padding: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """One head size for q, k and v (the kernel's condition), padding as an extra key feature."""
    if padding is not None:
        q = torch.cat([q, q.new_ones(q.shape[:-1] + (1,))], dim=-1)
        masked = finite_masked_logit(k.dtype)
        key_feature = torch.zeros(padding.shape, dtype=k.dtype, device=k.device).masked_fill(padding, masked)
        k = torch.cat([k, key_feature[:, None, :, None].expand(-1, k.shape[1], -1, -1)], dim=-1)
    size = max(q.shape[-1], v.shape[-1])

    def widen(t: Tensor) -> Tensor:  # no copy where the size already fits
        return t if t.shape[-1] == size else F.pad(t, (0, size - t.shape[-1]))

    return widen(q), widen(k), widen(v)


def fused_forward(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, padding: Tensor | None,
                  causal: bool) -> tuple[Tensor, Tensor]:
    """The output (B, H, n, dv) and each row's log-sum-exp (B, H, n), +inf on rows without a key
    (what ``blockwise.attention_backward`` takes), from the fused kernel."""
    n, dv = q.shape[2], v.shape[-1]
    mask = bias.masked_fill(causal_mask(n, n, q.device), MASKED) if causal else bias
    qf, kf, vf = _fold(q, k, v, padding)
    out, lse = _kernel()(qf, kf, vf, 0.0, False, attn_mask=mask.unsqueeze(0), scale=1.0)[:2]
    out = out[..., :dv]
    if padding is not None:  # rows without a real key: zeros, as in the reference
        empty = allowed_keys(padding, causal, n)[1]  # (B, 1, n|1, 1)
        out = out.masked_fill(empty, 0.0)
        lse = lse.masked_fill(empty[..., 0], float("inf"))
    return out, lse


class _FusedBiasAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, bias, padding, causal, fused):
        # Batch-shared features (dense's k, zero strides): the kernel's own backward plus a pass for
        # the bias measured faster there (random+dense, seq 1024: 1.80x the plain layer against 2.09x).
        ctx.kernel_backward = fused and 0 in k.stride()
        if ctx.kernel_backward:
            n, dv = q.shape[2], v.shape[-1]
            mask = bias.masked_fill(causal_mask(n, n, q.device), MASKED) if causal else bias
            qf, kf, vf = _fold(q, k, v, padding)
            full, lse = _kernel()(qf, kf, vf, 0.0, False, attn_mask=mask.unsqueeze(0), scale=1.0)[:2]
            empty = allowed_keys(padding, causal, n)[1] if padding is not None else None
            out = full[..., :dv] if empty is None else full[..., :dv].masked_fill(empty, 0.0)
            ctx.save_for_backward(q, k, v, bias, padding, qf, kf, vf, full, lse, mask, empty)
        else:
            forward = fused_forward if fused else blockwise_forward
            out, lse = forward(q, k, v, bias, padding, causal)
            ctx.save_for_backward(q, k, v, bias, padding, out, lse)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, grad_out):
        if ctx.kernel_backward:
            q, k, v, bias, padding, qf, kf, vf, full, lse, mask, empty = ctx.saved_tensors
            grad = F.pad(grad_out, (0, vf.shape[-1] - grad_out.shape[-1]))
            if empty is not None:
                grad = grad.masked_fill(empty, 0.0)
            dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
                grad.contiguous(), qf, kf, vf, full, lse, 0.0, False, attn_mask=mask.unsqueeze(0), scale=1.0)
            dbias = (bias_gradient(q, k, v, bias, padding, ctx.causal, grad[..., : v.shape[-1]])
                     if ctx.needs_input_grad[3] else None)
            d = q.shape[-1]
            return dq[..., :d], dk[..., :d], dv[..., : v.shape[-1]], dbias, None, None, None
        q, k, v, bias, padding, out, lse = ctx.saved_tensors
        dq, dk, dv, dbias = attention_backward(q, k, v, bias, padding, ctx.causal, out, lse, grad_out,
                                               bias_grad=ctx.needs_input_grad[3])
        return dq, dk, dv, dbias, None, None, None


def fused_bias_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, padding: Tensor | None, causal: bool) -> Tensor:
    """q, k (B, H, n, dq); v (B, H, n, dv); bias (H, n, n) -> (B, H, n, dv). Logits ``q k^T + bias``, unscaled."""
    if q.shape[2] == 0:  # the CPU kernel dies (SIGFPE) on an empty sequence; the blockwise loop just runs 0 times
        return blockwise_attention(q, k, v, bias, padding, causal)
    fused = available(q.device, q.dtype)
    if not fused:
        _warn_fallback(q.dtype)
    return _FusedBiasAttention.apply(q, k, v, bias, padding, causal, fused)


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """q, k (B, H, n, dq) and bias (H, n, n) of ``scores``; v (B, H, n, dv) -> (B, H, n, dv).
    No dropout (see ``runs``)."""
    return fused_bias_attention(scores.q, scores.k, v, scores.bias, padding, causal)
