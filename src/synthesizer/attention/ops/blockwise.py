"""``blockwise``: attention with a batch-shared additive term: memory-lean, and its backward gives the
gradient of that term (which the fused kernel does not).

Logits ``q k^T + bias`` (bias shared by the batch, e.g. ``w * R`` of a random synthesizer), masked,
softmax, dropout, times ``v``. Queries are processed in blocks, so at most (B, H, block, n) logits
exist at a time; the backward recomputes each block's probabilities instead of storing them, as
flash attention does. q and k may have another head size than v (no padding of v needed).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..forms import BIAS, FEATURES
from ..masks import MASKED, causal_mask, masked_softmax_
from .scores import Scores

NAME = "blockwise"
NEEDS = "features"

BLOCK_ELEMENTS = 1 << 22  # logits per block: 16 MiB in float32


def applies(components) -> bool:
    """Dot products of features, plus any batch-shared bias terms."""
    forms = {c.form for c in components}
    return FEATURES in forms and forms <= {FEATURES, BIAS}


def _block_size(b: int, h: int, n: int) -> int:
    return max(16, min(n, BLOCK_ELEMENTS // max(1, b * h * n)))


def _dropout_keep(shape: torch.Size, p: float, seed: int, device: torch.device) -> Tensor:
    """The same keep-mask (scaled by 1/(1-p)) for a given seed in forward and backward."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return (torch.rand(shape, generator=gen, device=device) >= p).to(torch.get_default_dtype()) / (1 - p)


def _block_probs(q: Tensor, k: Tensor, bias: Tensor | None, padding: Tensor | None, causal: bool, s: int, e: int) -> Tensor:
    """Probabilities (B, H, e-s, m) of query rows s..e-1 over the m keys they may see (all, or 0..e-1
    when causal). Fully masked rows give zeros."""
    m = e if causal else k.shape[2]
    logits = q[:, :, s:e] @ k[:, :, :m].transpose(-1, -2)
    if bias is not None:
        logits += bias[..., s:e, :m]
    if causal:
        logits.masked_fill_(causal_mask(e - s, m, q.device, start=s), MASKED)
    if padding is None:  # every row keeps at least its own key (causal) or all keys
        return torch.softmax(logits, dim=-1)
    return masked_softmax_(logits.masked_fill_(padding[:, None, None, :m], MASKED))


class _BlockwiseAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, bias, padding, causal, dropout, seed):
        b, h, n, _ = q.shape
        block = _block_size(b, h, n)
        out = v.new_empty(b, h, n, v.shape[-1])
        for s in range(0, n, block):
            e = min(s + block, n)
            probs = _block_probs(q, k, bias, padding, causal, s, e)
            if dropout > 0:
                probs *= _dropout_keep(probs.shape, dropout, seed + s, q.device).to(probs.dtype)
            torch.matmul(probs, v[:, :, : probs.shape[-1]], out=out[:, :, s:e])
        ctx.save_for_backward(q, k, v, bias, padding)
        ctx.causal, ctx.dropout, ctx.seed = causal, dropout, seed
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, bias, padding = ctx.saved_tensors
        causal, dropout, seed = ctx.causal, ctx.dropout, ctx.seed
        b, h, n, _ = q.shape
        block = _block_size(b, h, n)
        grad_out = grad_out.contiguous()
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dbias = torch.zeros_like(bias) if bias is not None and ctx.needs_input_grad[3] else None
        for s in range(0, n, block):
            e = min(s + block, n)
            probs = _block_probs(q, k, bias, padding, causal, s, e)
            m = probs.shape[-1]  # keys this block can see
            go = grad_out[:, :, s:e]
            dprobs = go @ v[:, :, :m].transpose(-1, -2)
            if dropout > 0:
                keep = _dropout_keep(probs.shape, dropout, seed + s, q.device).to(probs.dtype)
                dv[:, :, :m] += (probs * keep).transpose(-1, -2) @ go
                dprobs *= keep
            else:
                dv[:, :, :m] += probs.transpose(-1, -2) @ go
            dlogits = torch._softmax_backward_data(dprobs, probs, -1, probs.dtype)  # probs * (dprobs - rowsum)
            dq[:, :, s:e] = dlogits @ k[:, :, :m]
            dk[:, :, :m] += dlogits.transpose(-1, -2) @ q[:, :, s:e]
            if dbias is not None:
                dbias[..., s:e, :m] += dlogits.sum(0)
        return dq, dk, dv, dbias, None, None, None, None


def bias_gradient(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, padding: Tensor | None, causal: bool,
                  grad_out: Tensor) -> Tensor:
    """d(loss)/d(bias) for ``softmax(mask(q k^T + bias)) v``, summed over the batch, block by block."""
    b, h, n, _ = q.shape
    block = _block_size(b, h, n)
    dbias = torch.zeros_like(bias)
    for s in range(0, n, block):
        e = min(s + block, n)
        probs = _block_probs(q, k, bias, padding, causal, s, e)
        m = probs.shape[-1]
        dprobs = grad_out[:, :, s:e] @ v[:, :, :m].transpose(-1, -2)
        dbias[..., s:e, :m] += torch._softmax_backward_data(dprobs, probs, -1, probs.dtype).sum(0)
    return dbias


def blockwise_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None = None, padding: Tensor | None = None,
                        causal: bool = False, dropout: float = 0.0, training: bool = False) -> Tensor:
    """q, k (B, H, n, dq); v (B, H, n, dv); bias (H, n, n) or None; padding (B, n) bool, True = pad.

    Returns (B, H, n, dv). Logits are ``q k^T + bias``: no scaling is applied here.
    """
    p = dropout if training else 0.0
    seed = int(torch.randint(0, 2**62, (1,)).item()) if p > 0 else 0
    return _BlockwiseAttention.apply(q, k, v, bias, padding, causal, p, seed)


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """q, k (B, H, n, dq) and bias (H, n, n) or None of ``scores``; v (B, H, n, dv) -> (B, H, n, dv)."""
    return blockwise_attention(scores.q, scores.k, v, scores.bias, padding, causal, dropout, training)
