"""``factorized_dense``: the tiled factorized dense logits, generated block by block, never (B, H, n, n).

The logits ``S[i, j] = Pa[i, j // b] * Pb[i, j % b]`` come from per-token factors Pa (B, H, n, a)
and Pb (B, H, n, b), a few hundred numbers per row. The (example, head) pairs are flattened and
processed in blocks of ``BLOCK_ELEMENTS`` logits (``_blocks``): whole (n, n) matrices of several
pairs, or blocks of rows of one pair (long sequences, and causal layers, whose row blocks see only
the keys up to their last row), so that every block of the inputs, outputs and gradients is one
contiguous piece: no copies, products written in place, few kernel calls per block. Each block's
logits are generated from its rows' factors, masked, softmaxed and multiplied by v; the forward
keeps only the factors and the output, and the backward regenerates each block's probabilities, as
flash attention does. (It recomputes the softmax rather than ``exp(S - lse)`` from a saved
log-sum-exp: one fused softmax beat the subtract and exp on CPU.) The logit gradient is
``P * (dP - delta)`` with ``delta = rowsum(dO * O)`` computed once from the output (two in-place
passes, where softmax's own backward reduces every block again). The factors' gradients are the
block's dlogits folded back: with the key axis viewed as (a, b), ``dPa[i, p] = sum_q dS[i, p, q]
Pb[i, q]`` and ``dPb[i, q] = sum_p dS[i, p, q] Pa[i, p]``, batched matrix-vector products. v's
gradient is accumulated transposed (go^T P beat P^T go), and ``dO v^T`` takes v transposed once.

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
from .scores import Scores, kernel_dtype
from .always import require, runs  # noqa: F401  (the kernel interface, dispatch.Kernel)

NAME = "factorized_dense"
NEEDS = "features"
APPLIES_TO = "the factorized_dense component alone"
FALLBACK = None  # it runs in every mode on every device (always.runs)

# Logits per block (16 MiB in float32): whole (n, n) matrices of several (example, head) pairs, or
# blocks of rows of one pair where one matrix is larger (or causal: see CAUSAL_ROWS). Twice as many
# (a block's logits and probabilities then fill a 32 MiB L3 cache) was slower (docs/bench/kernels.md).
BLOCK_ELEMENTS = 1 << 22
# Rows per block of one (example, head) pair when causal: blocks of rows see only the keys up to
# their last row, so the masked upper triangle is mostly never formed.
CAUSAL_ROWS = 256


def applies(components) -> bool:
    """A layer of the factorized_dense component alone."""
    return len(components) == 1 and components[0].name == "factorized_dense"


def pair_blocks(pairs: int, t: int, n: int, causal: bool, *, elements: int,
                causal_rows: int) -> list[tuple[int, int, int, int]]:
    """(c0, c1, s, e): pairs c0..c1-1 of the flattened (example, head) axis, rows s..e-1, of about
    ``elements`` logits (t rows against n keys). Either whole matrices (s, e = 0, t) of several pairs
    or rows of one pair (``causal_rows`` when causal), so that every block of a (B*H, t, d) tensor is
    one contiguous piece: no copy of a block's operands or gradients, and whole matrices where they
    fit, which keeps the number of kernel calls low."""
    per = elements // max(1, t * n)
    if not causal and per >= 1:
        return [(c, min(c + per, pairs), 0, t) for c in range(0, pairs, per)]
    rows = max(1, min(t, causal_rows)) if causal else max(16, elements // max(1, n))
    return [(c, c + 1, s, min(s + rows, t)) for c in range(pairs) for s in range(0, t, rows)]


def _blocks(pairs: int, t: int, n: int, causal: bool) -> list[tuple[int, int, int, int]]:
    """This kernel's blocks (``pair_blocks`` at its sizes)."""
    return pair_blocks(pairs, t, n, causal, elements=BLOCK_ELEMENTS, causal_rows=CAUSAL_ROWS)


def _block_logits(pa: Tensor, pb: Tensor, padding: Tensor | None, causal: bool, s: int, m: int) -> Tensor:
    """Masked logits (c, t, m) of a block: ``pa`` (c, t, a), ``pb`` (c, t, b) the factors of its rows
    s..s+t-1, against keys 0..m-1 (-inf where masked); ``padding`` (c, n) or None."""
    # Column j = p*b + q: Pa[p] (each repeated b times) times Pb[q] (tiled), flattened, cut to m keys.
    logits = (pa.unsqueeze(-1) * pb.unsqueeze(-2)).flatten(-2)
    logits = logits if logits.shape[-1] == m else logits[..., :m].contiguous()
    if causal:
        logits.masked_fill_(causal_mask(pa.shape[1], m, pa.device, start=s), MASKED)
    if padding is not None:
        logits.masked_fill_(padding[:, None, :m], MASKED)
    return logits


def _empty_rows(padding: Tensor | None, causal: bool) -> Tensor | None:
    """(P, n, 1) bool: rows with no real key to attend to (all keys padded, or, when causal, all keys up
    to the row's own) for ``padding`` (P, n), or None without padding. Computed from the mask, not the
    logits."""
    if padding is None:
        return None
    empty = padding.cumprod(-1).bool() if causal else padding.all(-1, keepdim=True).expand_as(padding)
    return empty.unsqueeze(-1)


def _block_probs(pa: Tensor, pb: Tensor, padding: Tensor | None, empty: Tensor | None, causal: bool, s: int,
                 m: int) -> Tensor:
    """softmax(mask(S)) (c, t, m) of a block (see ``_block_logits``; ``empty`` (c, t, 1) its rows
    without a key, or None), rows without a key giving zeros."""
    logits = _block_logits(pa, pb, padding, causal, s, m)
    # Skipping the fills when no row is empty saves two passes; a compiled graph cannot branch on
    # the data, so there the fills always run (a no-op on rows with keys).
    if empty is None or (not torch.compiler.is_compiling() and not empty.any()):
        return torch.softmax(logits, dim=-1)
    return torch.softmax(logits.masked_fill_(empty, 0.0), dim=-1).masked_fill_(empty, 0.0)


def _pairs(t: Tensor) -> Tensor:
    """(B, H, n, d) -> (B*H, n, d), contiguous: every block is then one piece of it."""
    return t.reshape(t.shape[0] * t.shape[1], *t.shape[2:]).contiguous()  # no -1: B or n may be 0


def _pair_masks(padding: Tensor | None, heads: int, causal: bool) -> tuple[Tensor | None, Tensor | None]:
    """Key padding (B, n) repeated for each head, (B*H, n), and its empty rows (B*H, n, 1); or None, None."""
    if padding is None:
        return None, None
    per_pair = padding.repeat_interleave(heads, dim=0)
    return per_pair, _empty_rows(per_pair, causal)


def _block_inputs(c0: int, c1: int, s: int, e: int, pa: Tensor, pb: Tensor, padding: Tensor | None,
                  empty: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """A block's factors (c, t, a), (c, t, b), key padding (c, n) and empty rows (c, t, 1)."""
    return (pa[c0:c1, s:e], pb[c0:c1, s:e], None if padding is None else padding[c0:c1],
            None if empty is None else empty[c0:c1, s:e])


class _FactorizedDenseAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pa, pb, v, padding, causal, n, dropout, seed):
        # One dtype throughout (autocast's where it is on: the factors and v may differ), autocast off
        # inside: every product and pass of both directions then runs in it; gradients go back cast.
        dtype = kernel_dtype(v)
        ctx.dtypes = (pa.dtype, pb.dtype, v.dtype)
        pa, pb, v = pa.to(dtype), pb.to(dtype), v.to(dtype)
        with torch.autocast(v.device.type, enabled=False):
            bsz, h, t, _ = pa.shape
            pa_f, pb_f, v_f = _pairs(pa), _pairs(pb), _pairs(v)
            pad_f, empty_f = _pair_masks(padding, h, causal)
            out = v_f.new_empty(bsz * h, t, v.shape[-1])
            for c0, c1, s, e in _blocks(bsz * h, t, n, causal):
                m = _keys_seen(causal, e, n)
                probs = _block_probs(*_block_inputs(c0, c1, s, e, pa_f, pb_f, pad_f, empty_f), causal, s, m)
                if dropout > 0:
                    probs *= _dropout_keep(probs.shape, dropout, seed + c0 * t + s, pa.device).to(probs.dtype)
                # out= a contiguous piece of the output (see _blocks): no copy, one call fewer per block.
                torch.bmm(probs, v_f[c0:c1, :m], out=out[c0:c1, s:e])
            ctx.save_for_backward(pa_f, pb_f, v_f, pad_f, empty_f, out)
            ctx.causal, ctx.n, ctx.dropout, ctx.seed, ctx.shape = causal, n, dropout, seed, (bsz, h)
            return out.view(bsz, h, t, out.shape[-1])

    @staticmethod
    def backward(ctx, grad_out):
        with torch.autocast(grad_out.device.type, enabled=False):
            pa, pb, v, padding, empty, out = ctx.saved_tensors
            causal, n, dropout, seed = ctx.causal, ctx.n, ctx.dropout, ctx.seed
            pairs, t, _ = pa.shape
            go_f = _pairs(grad_out.to(v.dtype))
            # delta = rowsum(P * dP) (dropout included) from the output, once: each block's logit gradient
            # is then P * (dP - delta) in two in-place passes (softmax's own backward reduces the block again).
            delta = (go_f * out).sum(-1, keepdim=True)
            dpa, dpb = torch.empty_like(pa), torch.empty_like(pb)
            # dv accumulated transposed, (B*H, dv, n): go^T P beats P^T go on CPU (docs/bench/kernels.md);
            # v transposed once, so that dO v^T takes a contiguous operand.
            dv_t = v.new_zeros(pairs, v.shape[-1], n)
            v_t = v.transpose(-1, -2).contiguous()
            for c0, c1, s, e in _blocks(pairs, t, n, causal):
                m = _keys_seen(causal, e, n)
                pa_blk, pb_blk, pad_blk, empty_blk = _block_inputs(c0, c1, s, e, pa, pb, padding, empty)
                probs = _block_probs(pa_blk, pb_blk, pad_blk, empty_blk, causal, s, m)
                go = go_f[c0:c1, s:e]
                dlogits = torch.bmm(go, v_t[c0:c1, :, :m])  # dP
                if dropout > 0:
                    keep = _dropout_keep(probs.shape, dropout, seed + c0 * t + s, pa.device).to(probs.dtype)
                    dv_t[c0:c1, :, :m].baddbmm_(go.transpose(-1, -2), probs * keep)
                    dlogits *= keep
                else:
                    dv_t[c0:c1, :, :m].baddbmm_(go.transpose(-1, -2), probs)
                dlogits.sub_(delta[c0:c1, s:e]).mul_(probs)
                _factor_grads(dlogits, pa_blk, pb_blk, dpa[c0:c1, s:e], dpb[c0:c1, s:e])
            bsz, h = ctx.shape
            dv = dv_t.view(bsz, h, v.shape[-1], n).transpose(-1, -2)
            grads = (dpa.view(bsz, h, t, pa.shape[-1]), dpb.view(bsz, h, t, pb.shape[-1]), dv)
            return (*(g.to(d) for g, d in zip(grads, ctx.dtypes)), None, None, None, None, None)


def _factor_grads(dlogits: Tensor, pa: Tensor, pb: Tensor, dpa: Tensor, dpb: Tensor) -> None:
    """dPa (c, t, a) and dPb (c, t, b) of a block's rows from their logits' gradient (c, t, m), written
    into ``dpa`` and ``dpb`` (contiguous pieces of the gradients): the key axis folded back to (a', b)
    (a' = the Pa columns the m keys touch, the rest of dPa 0), then per row ``dPa = tiles Pb`` and
    ``dPb = Pa' tiles`` as batched matrix-vector products (a product and a sum over the (t, a, b)
    block would make a temporary of its size)."""
    c, t, m = dlogits.shape
    a, b = pa.shape[-1], pb.shape[-1]
    used = -(-m // b)
    if used * b != m:
        dlogits = F.pad(dlogits, (0, used * b - m))
    tiles = dlogits.view(c * t, used, b)
    torch.bmm(pa[..., :used].reshape(c * t, 1, used), tiles, out=dpb.view(c * t, 1, b))
    if used == a:
        torch.bmm(tiles, pb.reshape(c * t, b, 1), out=dpa.view(c * t, a, 1))
    else:  # causal blocks: the columns of Pa that no key of the block touches get no gradient
        dpa[..., :used] = torch.bmm(tiles, pb.reshape(c * t, b, 1)).view(c, t, used)
        dpa[..., used:] = 0.0


def _keys_seen(causal: bool, e: int, n: int) -> int:
    """Keys the rows before e may see: 0..e-1 when causal, all n otherwise."""
    return e if causal else n


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
