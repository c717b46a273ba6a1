"""``factorized_dense``: the tiled factorized dense logits, generated block by block, never (B, H, n, n).

The logits ``S[i, j] = Pa[i, j // b] * Pb[i, j % b]`` come from per-token factors Pa (B, H, n, a)
and Pb (B, H, n, b), a few hundred numbers per row. Queries are processed in blocks (``BLOCK_ELEMENTS``
logits at a time): each block's logits are generated from its rows' factors, masked, softmaxed and
multiplied by v; the forward keeps only the factors, and the backward regenerates each block's
probabilities, as flash attention does. (It recomputes the softmax rather than ``exp(S - lse)``
from a saved log-sum-exp: one fused softmax beat the subtract and exp on CPU.) The factors' gradients
are the block's dlogits folded back: with the key axis viewed as (a, b),
``dPa[i, p] = sum_q dS[i, p, q] Pb[i, q]`` and ``dPb[i, q] = sum_p dS[i, p, q] Pa[i, p]``. v's
gradient is accumulated transposed (go^T P beat P^T go).

Its time stays close to the plain layer's and its peak memory far below the reference path's, which
is why it is the default; the figures are in docs/bench/kernels.md ("factorized_dense").

The layer hands the factors over as ``scores.q`` (Pa) and ``scores.k`` (Pb): they come from the
component's ``features``, which for this component returns the factors, not a dot product.
Only a layer of factorized_dense alone takes this path; mixtures with it run ``reference``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..masks import MASKED, causal_mask
from .blockwise import _dropout_keep
from .scores import Scores

NAME = "factorized_dense"
NEEDS = "features"

# Logits per block, all examples together (16 MiB in float32): 32 rows at batch 8, 8 heads, seq 2048.
# Twice as many (a block's logits and probabilities then fill a 32 MiB L3 cache) was slower
# (docs/bench/kernels.md).
BLOCK_ELEMENTS = 1 << 22


def _block_size(b: int, h: int, n: int) -> int:
    return max(16, min(n, BLOCK_ELEMENTS // max(1, b * h * n)))


def applies(components) -> bool:
    """A layer of the factorized_dense component alone."""
    return len(components) == 1 and components[0].name == "factorized_dense"


def _block_logits(pa: Tensor, pb: Tensor, padding: Tensor | None, causal: bool, s: int, e: int, m: int) -> Tensor:
    """Masked logits (B, H, e-s, m) of query rows s..e-1 against keys 0..m-1 (-inf where masked)."""
    rows_a, rows_b = pa[:, :, s:e], pb[:, :, s:e]
    # Column j = p*b + q: Pa[p] (each repeated b times) times Pb[q] (tiled), flattened, cut to m keys.
    logits = (rows_a.unsqueeze(-1) * rows_b.unsqueeze(-2)).flatten(-2)[..., :m]
    if causal:
        logits.masked_fill_(causal_mask(e - s, m, pa.device, start=s), MASKED)
    if padding is not None:
        logits.masked_fill_(padding[:, None, None, :m], MASKED)
    return logits


def _empty_rows(padding: Tensor | None, causal: bool) -> Tensor | None:
    """(B, 1, n, 1) bool: rows with no real key to attend to (all keys padded, or, when causal, all
    keys up to the row's own), or None without padding. Computed from the mask, not the logits."""
    if padding is None:
        return None
    empty = padding.cumprod(-1).bool() if causal else padding.all(-1, keepdim=True).expand_as(padding)
    return empty[:, None, :, None]


def _block_probs(pa: Tensor, pb: Tensor, padding: Tensor | None, empty: Tensor | None, causal: bool, s: int,
                 e: int, m: int) -> Tensor:
    """softmax(mask(S)) (B, H, e-s, m) of rows s..e-1; rows without a key give zeros."""
    logits = _block_logits(pa, pb, padding, causal, s, e, m)
    rows = None if empty is None else empty[:, :, s:e]
    # Skipping the fills when no row is empty saves two passes; a compiled graph cannot branch on
    # the data, so there the fills always run (a no-op on rows with keys).
    if rows is None or (not torch.compiler.is_compiling() and not rows.any()):
        return torch.softmax(logits, dim=-1)
    return torch.softmax(logits.masked_fill_(rows, 0.0), dim=-1).masked_fill_(rows, 0.0)


def _keys_seen(causal: bool, e: int, n: int) -> int:
    """Keys the rows before e may see: 0..e-1 when causal, all n otherwise."""
    return e if causal else n


class _FactorizedDenseAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pa, pb, v, padding, causal, n, dropout, seed):
        b, h, t, _ = pa.shape
        block = _block_size(b, h, n)
        # The layer hands v as a view with the heads split off the feature axis; a product with it
        # would copy it on every block. One copy here (saved in place of the view) is far cheaper.
        v = v.contiguous()
        empty = _empty_rows(padding, causal)
        out = v.new_empty(b, h, t, v.shape[-1])
        for s in range(0, t, block):
            e = min(s + block, t)
            m = _keys_seen(causal, e, n)
            probs = _block_probs(pa, pb, padding, empty, causal, s, e, m)
            if dropout > 0:
                probs *= _dropout_keep(probs.shape, dropout, seed + s, pa.device).to(probs.dtype)
            # Not matmul(out=out[:, :, s:e]): into a strided slice it runs one small product per
            # (batch, head), far slower (docs/bench/kernels.md); the copy costs nothing.
            out[:, :, s:e] = probs @ v[:, :, :m]
        ctx.save_for_backward(pa, pb, v, padding, empty)
        ctx.causal, ctx.n, ctx.dropout, ctx.seed = causal, n, dropout, seed
        return out

    @staticmethod
    def backward(ctx, grad_out):
        pa, pb, v, padding, empty = ctx.saved_tensors
        causal, n, dropout, seed = ctx.causal, ctx.n, ctx.dropout, ctx.seed
        bsz, h, t, a = pa.shape
        b, dh = pb.shape[-1], v.shape[-1]
        block = _block_size(bsz, h, n)
        grad_out = grad_out.contiguous()
        dpa, dpb = torch.zeros_like(pa), torch.zeros_like(pb)
        # dv accumulated transposed, (B*H, dv, n): go^T P beats P^T go on CPU (docs/bench/kernels.md).
        dv_t = v.new_zeros(bsz * h, dh, n)
        for s in range(0, t, block):
            e = min(s + block, t)
            m = _keys_seen(causal, e, n)
            probs = _block_probs(pa, pb, padding, empty, causal, s, e, m)
            go = grad_out[:, :, s:e]
            go_t = go.transpose(-1, -2).reshape(bsz * h, dh, e - s)
            dprobs = go @ v[:, :, :m].transpose(-1, -2)
            if dropout > 0:
                keep = _dropout_keep(probs.shape, dropout, seed + s, pa.device).to(probs.dtype)
                dv_t[..., :m].baddbmm_(go_t, (probs * keep).view(bsz * h, e - s, m))
                dprobs *= keep
            else:
                dv_t[..., :m].baddbmm_(go_t, probs.view(bsz * h, e - s, m))
            dlogits = torch._softmax_backward_data(dprobs, probs, -1, probs.dtype)  # probs * (dprobs - rowsum)
            # Fold the key axis back to (a', b): a' = the Pa columns the m keys touch.
            used = -(-m // b)
            if used * b != m:
                dlogits = F.pad(dlogits, (0, used * b - m))
            tiles = dlogits.view(bsz, h, e - s, used, b)
            dpa[:, :, s:e, :used] = (tiles * pb[:, :, s:e].unsqueeze(-2)).sum(-1)
            dpb[:, :, s:e] = (pa[:, :, s:e, :used].unsqueeze(-2) @ tiles).squeeze(-2)
        dv = dv_t.view(bsz, h, dh, n).transpose(-1, -2)
        return dpa, dpb, dv, None, None, None, None, None


def factorized_dense_attention(pa: Tensor, pb: Tensor, v: Tensor, padding: Tensor | None = None, causal: bool = False,
                               dropout: float = 0.0, training: bool = False) -> Tensor:
    """pa (B, H, n, a), pb (B, H, n, b) with a * b >= n; v (B, H, n, dv); padding (B, n) bool, True = pad.

    Returns (B, H, n, dv): ``dropout(softmax(mask(S))) v`` with ``S[i, j] = pa[i, j // b] * pb[i, j % b]``.
    """
    n = v.shape[2]
    p = dropout if training else 0.0
    seed = int(torch.randint(0, 2**62, (1,)).item()) if p > 0 else 0
    return _FactorizedDenseAttention.apply(pa, pb, v, padding, causal, n, p, seed)


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """Pa (B, H, n, a) as ``scores.q``, Pb (B, H, n, b) as ``scores.k``; v (B, H, n, dv) -> (B, H, n, dv)."""
    return factorized_dense_attention(scores.weighted_q(), scores.k, v, padding, causal, dropout, training)
