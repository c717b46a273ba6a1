"""``blockwise``: attention with a batch-shared additive term: memory-lean, and its backward gives the
gradient of that term (which the fused kernel does not).

Logits ``q k^T + bias`` (bias shared by the batch, e.g. ``w * R`` of a random synthesizer), masked,
softmax, dropout, times ``v``. Queries are processed in blocks, so at most (B, H, block, n) logits
exist at a time. The forward keeps each row's log-sum-exp; the backward (``attention_backward``,
shared with ``fused_bias``) recomputes each block's probabilities from it, ``P = exp(q k^T + bias -
lse)``, and gives dq, dk, dv and the batch-summed gradient of the bias in the same pass, as flash
attention does. q and k may have another head size than v (no padding of v needed).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..forms import BIAS, FEATURES
from ..masks import MASKED, causal_mask, masked_softmax_
from .scores import Scores

NAME = "blockwise"
NEEDS = "features"

# Logits per block (32 MiB in float32; the backward holds up to three such blocks): 64 rows per block
# at batch 8, 8 heads, seq 2048. Measured there (random+vanilla layer, forward+backward, 2 threads):
# 4M elements 704 MiB peak, 8M 765 MiB, 16M 888 MiB (plain layer: 291 MiB); 16M was ~10% faster than
# 4M. 8M keeps the peak below the previous kernel's (785 MiB) at most of the speed.
BLOCK_ELEMENTS = 1 << 23


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


def _block_logits(q: Tensor, k: Tensor, bias: Tensor | None, padding: Tensor | None, causal: bool, s: int,
                  e: int) -> Tensor:
    """Logits (B, H, e-s, m) of query rows s..e-1 over the m keys they may see (all, or 0..e-1 when
    causal), -inf where masked."""
    m = e if causal else k.shape[2]
    logits = q[:, :, s:e] @ k[:, :, :m].transpose(-1, -2)
    if bias is not None:
        logits += bias[..., s:e, :m]
    if causal:
        logits.masked_fill_(causal_mask(e - s, m, q.device, start=s), MASKED)
    if padding is not None:
        logits.masked_fill_(padding[:, None, None, :m], MASKED)
    return logits


def _block_probs(q: Tensor, k: Tensor, bias: Tensor | None, padding: Tensor | None, causal: bool, s: int, e: int) -> Tensor:
    """Probabilities (B, H, e-s, m) of query rows s..e-1 over the m keys they may see (all, or 0..e-1
    when causal). Fully masked rows give zeros."""
    logits = _block_logits(q, k, bias, padding, causal, s, e)
    if padding is None:  # every row keeps at least its own key (causal) or all keys
        return torch.softmax(logits, dim=-1)
    return masked_softmax_(logits)


def attention_backward(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, padding: Tensor | None, causal: bool,
                       out: Tensor, lse: Tensor, grad_out: Tensor, dropout: float = 0.0, seed: int = 0,
                       bias_grad: bool = True) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """dq, dk (B, H, n, dq), dv (B, H, n, dv) and the batch-summed d(bias) (H, n, n) (None if not
    ``bias_grad`` or no bias) of ``dropout(softmax(mask(q k^T + bias))) v``, in one pass over query blocks.

    ``out`` (B, H, n, dv) is the forward's output, ``lse`` (B, H, n) its rows' log-sum-exp with +inf
    on rows without a key; ``bias`` holds no causal mask (the causal rule is applied here). Per block:
    ``P = exp(q k^T + bias - lse)`` (the bias rides in the matmul's accumulator; the lse is
    subtracted in place, which costs less memory than folding it into q and k as a feature),
    ``dS = P * (dO v^T * keep - delta)`` with ``delta = rowsum(dO * out)`` computed once per row,
    and every gradient accumulated into its final buffer.
    """
    b, h, n, _ = q.shape
    block = _block_size(b, h, n)
    grad_out = grad_out.contiguous()
    # Batch-shared features (dense's k is expanded over batch and heads) have zero strides, which
    # send bmm to a slow path: one copy here is far cheaper.
    q, k = (t.contiguous() if 0 in t.stride() else t for t in (q, k))
    delta = (grad_out * out).sum(-1, keepdim=True)  # (B, H, n, 1): rowsum(P * dP), dropout included
    lse = lse.unsqueeze(-1)
    dense = torch.contiguous_format  # the batch and head axes are merged below
    dq = torch.empty_like(q, memory_format=dense)
    dk, dv = torch.zeros_like(k, memory_format=dense), torch.zeros_like(v, memory_format=dense)
    dbias = torch.empty_like(bias, memory_format=dense) if bias is not None and bias_grad else None
    if dbias is not None and causal:
        dbias.zero_()  # the blocks write only the keys their rows may see
    flat = (b * h,)
    dk3, dv3 = dk.view(flat + dk.shape[2:]), dv.view(flat + dv.shape[2:])
    for s in range(0, n, block):
        e = min(s + block, n)
        m = e if causal else n
        q_blk, k_m = q[:, :, s:e], k[:, :, :m]
        probs = q.new_empty(b, h, e - s, m)
        if bias is None:
            torch.matmul(q_blk, k_m.transpose(-1, -2), out=probs)
        else:
            for i in range(b):  # the batch-shared bias as the accumulator of each example's matmul
                torch.baddbmm(bias[:, s:e, :m], q_blk[i], k_m[i].transpose(-1, -2), out=probs[i])
        if causal:  # only the last e-s keys of the block can lie after a row
            probs[..., s:].masked_fill_(causal_mask(e - s, e - s, q.device), MASKED)
        if padding is not None:
            probs.masked_fill_(padding[:, None, None, :m], MASKED)
        probs.sub_(lse[:, :, s:e]).exp_()  # rows without a key have lse = +inf: P = 0
        go = grad_out[:, :, s:e]
        dprobs = go @ v[:, :, :m].transpose(-1, -2)
        p3 = probs.view(flat + probs.shape[2:])
        if dropout > 0:
            keep = _dropout_keep(probs.shape, dropout, seed + s, q.device).to(probs.dtype)
            dv3[:, :m].baddbmm_((probs * keep).view_as(p3).transpose(1, 2), go.reshape(flat + go.shape[2:]))
            dprobs *= keep
            del keep
        else:
            dv3[:, :m].baddbmm_(p3.transpose(1, 2), go.reshape(flat + go.shape[2:]))
        dlogits = dprobs.sub_(delta[:, :, s:e]).mul_(probs)  # P * (dP - delta)
        del probs
        torch.matmul(dlogits, k[:, :, :m], out=dq[:, :, s:e])
        d3 = dlogits.view(flat + dlogits.shape[2:])
        dk3[:, :m].baddbmm_(d3.transpose(1, 2), q[:, :, s:e].reshape(flat + (e - s, q.shape[-1])))
        if dbias is not None:
            torch.sum(dlogits, dim=0, out=dbias[:, s:e, :m])
    return dq, dk, dv, dbias


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


def blockwise_forward(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, padding: Tensor | None, causal: bool,
                      dropout: float = 0.0, seed: int = 0) -> tuple[Tensor, Tensor]:
    """The output (B, H, n, dv) and each row's log-sum-exp (B, H, n), +inf on rows without a key
    (what ``attention_backward`` takes). Dropout keep-masks come from ``seed`` + the block's first row."""
    b, h, n, _ = q.shape
    block = _block_size(b, h, n)
    out = v.new_empty(b, h, n, v.shape[-1])
    lse = q.new_empty(b, h, n, 1)
    for s in range(0, n, block):
        e = min(s + block, n)
        probs = _block_logits(q, k, bias, padding, causal, s, e)
        row = torch.logsumexp(probs, dim=-1, keepdim=True)
        row.masked_fill_(torch.isneginf(row), float("inf"))  # no key: exp(-inf - inf) = 0 everywhere
        lse[:, :, s:e] = row
        probs.sub_(row).exp_()
        if dropout > 0:
            probs *= _dropout_keep(probs.shape, dropout, seed + s, q.device).to(probs.dtype)
        # not matmul(out=out[:, :, s:e]): into a strided slice it runs one small product per (batch, head)
        out[:, :, s:e] = probs @ v[:, :, : probs.shape[-1]]
    return out, lse.squeeze(-1)


class _BlockwiseAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, bias, padding, causal, dropout, seed):
        out, lse = blockwise_forward(q, k, v, bias, padding, causal, dropout, seed)
        ctx.save_for_backward(q, k, v, bias, padding, out, lse)
        ctx.causal, ctx.dropout, ctx.seed = causal, dropout, seed
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, bias, padding, out, lse = ctx.saved_tensors
        dq, dk, dv, dbias = attention_backward(q, k, v, bias, padding, ctx.causal, out, lse, grad_out, ctx.dropout,
                                               ctx.seed, bias_grad=ctx.needs_input_grad[3])
        return dq, dk, dv, dbias, None, None, None, None


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
