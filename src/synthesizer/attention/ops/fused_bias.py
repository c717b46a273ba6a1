"""``fused_bias``: fused attention plus a batch-shared additive term that is learned (``w * R`` of random mixtures).

Forward: the fused CPU flash kernel (a private aten op) with ``w * R`` as a float mask, which also
gives each row's log-sum-exp; the mask is made for that call only. The kernel gives no gradient for
its mask, and its own backward would need a second pass for it, so the backward is
``blockwise.attention_backward``: one pass over blocks of query rows (of groups of examples), that
recomputes the probabilities from the saved log-sum-exp and gives dq, dk, dv, the terms' gradients
(R's summed over the batch) and the mixture weights' gradients together: faster than the kernel's
own backward plus a pass for R (figures: docs/bench/kernels.md). The kernel's forward stays:
blockwise's forward takes longer.

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
from torch import Tensor

from ..forms import BIAS, FEATURES
from ..masks import allowed_keys, masked_bias
from .blockwise import attention_backward, blockwise_attention, blockwise_forward, unflatten, wanted_terms
from .fused import fold
from .scores import Scores, Terms, as_terms, bias_rows
from .always import require  # noqa: F401  (the kernel interface, dispatch.Kernel)

NAME = "fused_bias"
NEEDS = "features"
APPLIES_TO = "dot products of features mixed with at least one batch-shared bias (random+vanilla, ...)"
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


def _mask(terms: Terms, n: int, causal: bool) -> Tensor:
    """The kernel's float mask (1, H, n, n): the terms' sum, -inf above the diagonal when causal. Made
    for one call and dropped: the backward forms its rows again block by block."""
    return masked_bias(bias_rows(terms, 0, n, n), causal).unsqueeze(0)


def fused_forward(q: Tensor, k: Tensor, v: Tensor, terms: Terms, padding: Tensor | None,
                  causal: bool, q_weight: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The output (B, H, n, dv) and each row's log-sum-exp (B, H, n), +inf on rows without a key
    (what ``blockwise.attention_backward`` takes), from the fused kernel."""
    n, dv = q.shape[2], v.shape[-1]
    if q_weight is not None:  # a copy for this call only: the backward weights q per block
        q = q * q_weight.reshape(-1, 1, 1)
    qf, kf, vf = fold(q, k, v, padding)
    out, lse = _kernel()(qf, kf, vf, 0.0, False, attn_mask=_mask(terms, n, causal), scale=1.0)[:2]
    out = out[..., :dv]
    if padding is not None:  # rows without a real key: zeros, as in the reference
        empty = allowed_keys(padding, causal, n)[1]  # (B, 1, n|1, 1)
        out = out.masked_fill(empty, 0.0)
        lse = lse.masked_fill(empty[..., 0], float("inf"))
    return out, lse


_TERMS_FROM = 7  # the index of w_0 among _FusedBiasAttention's inputs


class _FusedBiasAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, padding, causal, fused, q_weight, *flat_terms):
        terms = unflatten(flat_terms)
        if fused:
            out, lse = fused_forward(q, k, v, terms, padding, causal, q_weight)
        else:
            out, lse = blockwise_forward(q, k, v, terms, padding, causal, q_weight=q_weight)
        ctx.save_for_backward(q, k, v, padding, out, lse, q_weight, *flat_terms)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, padding, out, lse, q_weight, *flat_terms = ctx.saved_tensors
        terms = unflatten(flat_terms)
        wanted = wanted_terms(ctx.needs_input_grad, _TERMS_FROM, len(terms))
        dq, dk, dv, dq_weight, term_grads = attention_backward(q, k, v, terms, out, lse, grad_out, padding=padding,
                                                               causal=ctx.causal, wanted=wanted, q_weight=q_weight)
        return dq, dk, dv, None, None, None, dq_weight, *term_grads


def fused_bias_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | Terms, padding: Tensor | None,
                         causal: bool, q_weight: Tensor | None = None) -> Tensor:
    """q, k (B, H, n, dq); v (B, H, n, dv); bias (H, n, n) or bias terms ((w_c or None, B_c (H, n, n)), ...);
    q_weight: the features' mixture weight (1 or H values) or None -> (B, H, n, dv). Logits
    ``q_weight * q k^T + bias``, unscaled."""
    terms = as_terms(bias)
    if q.shape[2] == 0:  # the CPU kernel dies (SIGFPE) on an empty sequence; the blockwise loop just runs 0 times
        return blockwise_attention(q, k, v, terms, padding, causal, q_weight=q_weight)
    fused = available(q.device, q.dtype)
    if not fused:
        _warn_fallback(q.dtype)
    return _FusedBiasAttention.apply(q, k, v, padding, causal, fused, q_weight, *(t for term in terms for t in term))


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """q, k (B, H, n, dq), the features' weight and the bias terms of ``scores``; v (B, H, n, dv) ->
    (B, H, n, dv). No dropout (see ``runs``)."""
    return fused_bias_attention(scores.q, scores.k, v, scores.terms, padding, causal, scores.q_weight)
