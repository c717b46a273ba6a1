"""``wide_qk``: dot-product logits wider than the values (dense+vanilla: q, k of 2 d_h + 1 features,
v of d_h), in blocks of query rows, with no padding of v and no (B, H, n, n) tensor.

The ``fused`` kernel takes one head size for q, k and v, so a mixture of feature components runs
its ``P V`` and every product of its backward that involves v at q's width (twice vanilla's for
dense+vanilla). Here each product runs at its own width: ``q k^T``, ``dS k`` and ``dS^T q`` at q's,
``P V``, ``dO V^T`` and ``P^T dO`` at v's. Multiply-adds per (example, head) and pair of
positions: forward ``d_qk + d_v``, backward ``3 d_qk + 2 d_v`` (the logits recomputed, then dP,
dv, dq, dk), against ``2 d_qk`` and ``5 d_qk`` for the fused kernel at the padded width. What that
leaves, in multiply-adds and bytes, and how it measured against ``fused``: docs/bench/kernels.md
("wide_qk"). It is a candidate path (``impl="wide_qk"``), ranked after ``fused``.

Queries are processed in blocks of rows of every example and head at once (``BLOCK_ELEMENTS``
logits), each block's operands being views of the (B*H, n, d) inputs. Per block, forward: the
logits, the masks, one softmax, ``P V``; backward: the probabilities again (a recomputed softmax
rather than ``exp(S - lse)``: one fused softmax is the cheaper pass on CPU), ``dP = dO V^T``,
softmax's own backward, ``dq = dS k``, and dv and dk accumulated transposed (``dO^T P`` and
``q^T dS``, whose outputs are contiguous rows of length n). k and v are transposed once per call,
so that ``q k^T`` and ``dO v^T`` take contiguous operands.

Masks: key padding and the causal diagonal block are written into the block's logits (-inf);
causal blocks only see keys up to their last row; rows with no key to attend to give zeros, as in
the reference. Dropout: the keep mask of ``blockwise`` (one seed per block, the same in forward
and backward).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..forms import FEATURES
from ..masks import MASKED, causal_mask
from .blockwise import _dropout_keep
from .scores import Scores

NAME = "wide_qk"
NEEDS = "features"

# Logits per block, all examples and heads together (8 MiB in float32): 64 rows at batch 4, 8 heads,
# seq 1024. Chosen by timing 2^18 to 2^22 (docs/bench/kernels.md, "wide_qk").
BLOCK_ELEMENTS = 1 << 21


def applies(components) -> bool:
    """A mixture of feature components (dense+vanilla, factorized_random+vanilla, ...)."""
    return len(components) > 1 and all(c.form == FEATURES for c in components)


def _block_rows(b: int, h: int, n: int) -> int:
    """Query rows per block: (B, H, rows, n) logits of about ``BLOCK_ELEMENTS``."""
    return max(16, min(n, BLOCK_ELEMENTS // max(1, b * h * n)))


def _heads(t: Tensor) -> Tensor:
    """(B, H, n, d) -> (B*H, n, d) for the batched products: a view where the batch and head axes merge."""
    return t.reshape(-1, *t.shape[2:])


def _transposed(t: Tensor) -> Tensor:
    """(B, H, n, d) -> (B*H, d, n), contiguous: the right-hand operand of ``q k^T`` and ``dO v^T``, one
    copy per call (a product with a transposed view of the (n, d) rows took longer)."""
    return _heads(t).transpose(-1, -2).contiguous()


def _empty_rows(padding: Tensor | None, causal: bool) -> Tensor | None:
    """(B, 1, n, 1) bool: rows with no real key to attend to (all keys padded, or, when causal, all keys
    up to the row's own), or None without padding."""
    if padding is None:
        return None
    empty = padding.cumprod(-1).bool() if causal else padding.all(-1, keepdim=True).expand_as(padding)
    return empty[:, None, :, None]


def _block_probs(q: Tensor, k_t: Tensor, padding: Tensor | None, empty: Tensor | None, causal: bool, s: int,
                 e: int) -> Tensor:
    """softmax(mask(q k^T)) of rows s..e-1 of every example and head, (B*H, e-s, m) with m the keys they
    may see (all, or 0..e-1 when causal); rows without a key give zeros. ``k_t``: k transposed,
    (B*H, d_qk, n), contiguous."""
    b, h, n, _ = q.shape
    m = e if causal else n
    logits = torch.bmm(_heads(q[:, :, s:e]), k_t[..., :m])
    if causal:  # only the last e-s keys can lie after a row
        logits[..., s:].masked_fill_(causal_mask(e - s, e - s, q.device), MASKED)
    if padding is not None:
        logits.view(b, h, e - s, m).masked_fill_(padding[:, None, None, :m], MASKED)
    rows = None if empty is None else empty[:, :, s:e]
    # Skipping the fills when no row is empty saves two passes; a compiled graph cannot branch on
    # the data, so there the fills always run (a no-op on rows with keys).
    if rows is None or (not torch.compiler.is_compiling() and not rows.any()):
        return torch.softmax(logits, dim=-1)
    probs = torch.softmax(logits.view(b, h, e - s, m).masked_fill_(rows, 0.0), dim=-1).masked_fill_(rows, 0.0)
    return probs.view(b * h, e - s, m)


def _keep(shape: tuple[int, ...], dropout: float, seed: int, s: int, like: Tensor) -> Tensor | None:
    """The dropout keep mask (scaled by 1/(1-p)) of the block of rows from ``s``, or None without dropout."""
    if dropout <= 0:
        return None
    return _dropout_keep(shape, dropout, seed + s, like.device).to(like.dtype)


def wide_forward(q: Tensor, k: Tensor, v: Tensor, padding: Tensor | None, causal: bool, *, dropout: float = 0.0,
                 seed: int = 0) -> Tensor:
    """``dropout(softmax(mask(q k^T))) v``: (B, H, n, d_v)."""
    b, h, n, _ = q.shape
    rows = _block_rows(b, h, n)
    empty = _empty_rows(padding, causal)
    out = v.new_empty(b, h, n, v.shape[-1])
    v_all, k_t = _heads(v), _transposed(k)
    for s in range(0, n, rows):
        e = min(s + rows, n)
        probs = _block_probs(q, k_t, padding, empty, causal, s, e)
        keep = _keep(probs.shape, dropout, seed, s, q)
        if keep is not None:
            probs *= keep
        # Assigned, not bmm(out=out[:, :, s:e]): into a strided slice that runs one small product per matrix.
        out[:, :, s:e] = torch.bmm(probs, v_all[:, : probs.shape[-1]]).view(b, h, e - s, -1)
    return out


def wide_backward(q: Tensor, k: Tensor, v: Tensor, grad_out: Tensor, *, padding: Tensor | None, causal: bool,
                  dropout: float = 0.0, seed: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """dq, dk (B, H, n, d_qk) and dv (B, H, n, d_v), one pass over the forward's blocks."""
    b, h, n, d_qk = q.shape
    d_v = v.shape[-1]
    rows = _block_rows(b, h, n)
    empty = _empty_rows(padding, causal)
    dq = torch.empty_like(q, memory_format=torch.contiguous_format)
    # Transposed accumulators: their products write contiguous rows of length n.
    dk_t, dv_t = q.new_zeros(b * h, d_qk, n), v.new_zeros(b * h, d_v, n)
    q_all, k_all, go_all = _heads(q), _heads(k), _heads(grad_out.contiguous())
    k_t, v_t = _transposed(k), _transposed(v)
    for s in range(0, n, rows):
        e = min(s + rows, n)
        probs = _block_probs(q, k_t, padding, empty, causal, s, e)
        m = probs.shape[-1]
        go_t = go_all[:, s:e].transpose(-1, -2)
        dprobs = torch.bmm(go_all[:, s:e], v_t[..., :m])
        keep = _keep(probs.shape, dropout, seed, s, q)
        if keep is None:
            dv_t[..., :m].baddbmm_(go_t, probs)
        else:
            dv_t[..., :m].baddbmm_(go_t, probs * keep)
            dprobs *= keep
        dlogits = torch._softmax_backward_data(dprobs, probs, -1, probs.dtype)  # P * (dP - rowsum(P * dP))
        dq[:, :, s:e] = torch.bmm(dlogits, k_all[:, :m]).view(b, h, e - s, d_qk)
        dk_t[..., :m].baddbmm_(q_all[:, s:e].transpose(-1, -2), dlogits)
    return dq, dk_t.view(b, h, d_qk, n).transpose(-1, -2), dv_t.view(b, h, d_v, n).transpose(-1, -2)


class _WideQKAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, padding, causal, dropout, seed):
        out = wide_forward(q, k, v, padding, causal, dropout=dropout, seed=seed)
        ctx.save_for_backward(q, k, v, padding)
        ctx.causal, ctx.dropout, ctx.seed = causal, dropout, seed
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, padding = ctx.saved_tensors
        dq, dk, dv = wide_backward(q, k, v, grad_out, padding=padding, causal=ctx.causal,
                                   dropout=ctx.dropout, seed=ctx.seed)
        return dq, dk, dv, None, None, None, None


def wide_qk_attention(q: Tensor, k: Tensor, v: Tensor, padding: Tensor | None = None, causal: bool = False, *,
                      dropout: float = 0.0, training: bool = False) -> Tensor:
    """q, k (B, H, n, d_qk); v (B, H, n, d_v); padding (B, n) bool, True = pad. Returns (B, H, n, d_v):
    ``dropout(softmax(mask(q k^T))) v``, unscaled."""
    p = dropout if training else 0.0
    seed = int(torch.randint(0, 2**62, (1,)).item()) if p > 0 else 0
    return _WideQKAttention.apply(q, k, v, padding, causal, p, seed)


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """q, k (B, H, n, d_qk) of ``scores`` (the features' weight folded into q); v (B, H, n, d_v) -> (B, H, n, d_v)."""
    return wide_qk_attention(scores.weighted_q(), scores.k, v, padding, causal, dropout=dropout, training=training)
