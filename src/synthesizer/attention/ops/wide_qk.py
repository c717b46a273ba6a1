"""``wide_qk``: dot-product logits wider than the values (dense+vanilla: q, k of 2 d_h + 1 features,
v of d_h), in blocks, with no padding of v and no (B, H, n, n) tensor.

The ``fused`` kernel takes one head size for q, k and v, so a mixture of feature components runs
its ``P V`` and every product of its backward that involves v at q's width (twice vanilla's for
dense+vanilla). Here each product runs at its own width: ``q k^T``, ``dS k`` and ``dS^T q`` at q's,
``P V``, ``dO V^T`` and ``P^T dO`` at v's. Multiply-adds per (example, head) and pair of
positions: forward ``d_qk + d_v``, backward ``3 d_qk + 2 d_v`` (the logits recomputed, then dP,
dv, dq, dk), against ``2 d_qk`` and ``5 d_qk`` for the fused kernel at the padded width. What that
leaves, in multiply-adds and bytes, and how it measured against ``fused``: docs/bench/kernels.md
("wide_qk"). The static ranking puts it after ``fused``; the measured dispatch table picks it where it won.

On the CPU in float32 without dropout the blocks run compiled (``wide_qk_cpu.cpp``, built on first use by
``compiled``; ``runs_compiled``): the same algorithm, one (example, head) pair per thread and 64 query
rows per block, so the softmax and the gradient passes run on blocks in cache, and the backward's
probabilities come from the forward's log-sum-exp. What follows describes the PyTorch blocks, which run
everywhere else and are what the compiled ones are tested against (with the reference).

The (example, head) pairs are flattened and processed in blocks of ``BLOCK_ELEMENTS`` logits laid
out as factorized_dense's (``pair_blocks``: whole matrices of several pairs, or rows of one pair),
so that every block of an input, output or gradient is one contiguous piece; causal, in blocks of
``CAUSAL_ROWS`` rows of several pairs against the keys up to their last row (strided pieces, which
BLAS takes as they are), so that fewer, larger products skip the keys after a block. Per block, forward: the
logits, the masks, one softmax, ``P V``; backward: the probabilities again (a recomputed softmax
rather than ``exp(S - lse)``: one fused softmax is the cheaper pass on CPU), ``dP = dO V^T``,
``dS = P * (dP - delta)`` with ``delta = rowsum(dO * O)`` computed once from the output (two
in-place passes), ``dq = dS k`` and ``dk += dS^T q`` in q's and k's own layout (the ops after the
kernel, the features' split and a batch-shared k's sum among them, then read contiguous rows; built
transposed, they cost those ops more than the products gained), and dv accumulated transposed
(``dO^T P``, rows of length n, transposed once at the end). ``q k^T`` and ``dO v^T``
take k and v as transposed views: BLAS reads a transposed operand at no cost, where a transposed copy
of k cost a few percent of the layer at long lengths (docs/bench/kernels.md, "wide_qk").

Masks: key padding and the causal block's own square of keys (the only keys it sees that may lie
after a row) are written into the block's logits (-inf); rows with no key to attend to give zeros,
as in the reference. Dropout: the keep mask of ``blockwise`` (one seed per block, the same in forward
and backward).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..forms import FEATURES
from ..masks import MASKED, causal_mask
from .blockwise import _dropout_keep
from . import compiled
from .factorized_dense import pair_blocks
from .scores import Scores, kernel_dtype
from .always import require, runs  # noqa: F401  (the kernel interface, dispatch.Kernel)

NAME = "wide_qk"
NEEDS = "features"
APPLIES_TO = "mixtures of dot products of features (dense+vanilla, factorized_random+vanilla, ...)"
FALLBACK = None  # it runs in every mode on every device (always.runs)

# Logits per block (4 MiB in float32): one whole (n, n) matrix at seq 1024, or rows of one (example,
# head) pair (see factorized_dense.pair_blocks). Chosen by timing 2^19 to 2^22 at seq 1024 and 2048,
# batch 4, d_model 512 (docs/bench/kernels.md, "wide_qk"): 2^20 and 2^21 within noise of each other,
# 2^22 (the earlier choice) slower once k and v were no longer transposed into copies.
BLOCK_ELEMENTS = 1 << 20
# Rows per causal block (of as many pairs as BLOCK_ELEMENTS holds): blocks see only the keys up to their
# last row; 128 rows, with fewer keys past the diagonal but smaller products, were not faster.
CAUSAL_ROWS = 256


def applies(components) -> bool:
    """A mixture of feature components (dense+vanilla, factorized_random+vanilla, ...)."""
    return len(components) > 1 and all(c.form == FEATURES for c in components)


def _blocks(pairs: int, t: int, n: int, causal: bool) -> list[tuple[int, int, int, int]]:
    """(c0, c1, s, e): pairs c0..c1-1, rows s..e-1 of every block. Not causal: ``pair_blocks``. Causal:
    ``CAUSAL_ROWS`` rows of as many pairs as ``BLOCK_ELEMENTS`` allows, against the keys up to their last
    row, the last rows of a group of pairs first (they see every key, so they write dk and dv where the
    others add to them)."""
    if not causal:
        return pair_blocks(pairs, t, n, False, elements=BLOCK_ELEMENTS, causal_rows=CAUSAL_ROWS)
    rows = max(1, min(t, CAUSAL_ROWS))
    per = max(1, BLOCK_ELEMENTS // max(1, rows * n))
    starts = range(0, t, rows)
    return [(c, min(c + per, pairs), s, min(s + rows, t)) for c in range(0, pairs, per) for s in reversed(starts)]


def _pairs(t: Tensor) -> Tensor:
    """(B, H, n, d) -> (B*H, n, d), contiguous: every block is then one piece of it."""
    return t.reshape(t.shape[0] * t.shape[1], *t.shape[2:]).contiguous()  # no -1: B or n may be 0


def _block_probs(q: Tensor, k_t: Tensor, padding: Tensor | None, empty: Tensor | None, upper: Tensor | None,
                 s: int) -> Tensor:
    """softmax(mask(q k^T)) (c, t, m) of a block: ``q`` (c, t, d_qk) its rows s..s+t-1, ``k_t`` (c, d_qk, m)
    the keys they may see, transposed; ``padding`` (c, n) and ``empty`` (c, t, 1) (rows without a key,
    which give zeros) or None; ``upper`` when causal (``causal_mask`` of CAUSAL_ROWS rows and keys: the
    block's mask on its own square of keys), else None."""
    logits = torch.bmm(q, k_t)
    t, m = logits.shape[-2:]
    if upper is not None:  # keys s..m-1 are the block's own square (m = s + t); the ones before, all visible
        logits[:, :, s:].masked_fill_(upper[:t, :t], MASKED)
    if padding is not None:
        logits.masked_fill_(padding[:, None, :m], MASKED)
    # Skipping the fills when no row is empty saves two passes; a compiled graph cannot branch on
    # the data, so there the fills always run (a no-op on rows with keys).
    if empty is None or (not torch.compiler.is_compiling() and not empty.any()):
        return torch.softmax(logits, dim=-1)
    return torch.softmax(logits.masked_fill_(empty, 0.0), dim=-1).masked_fill_(empty, 0.0)


def _keep(shape: torch.Size, dropout: float, seed: int, like: Tensor) -> Tensor | None:
    """The dropout keep mask (scaled by 1/(1-p)) of a block, or None without dropout."""
    if dropout <= 0:
        return None
    return _dropout_keep(shape, dropout, seed, like.device).to(like.dtype)


def wide_forward(q: Tensor, k_t: Tensor, v: Tensor, padding: Tensor | None, empty: Tensor | None,
                 causal: bool, *, dropout: float = 0.0, seed: int = 0) -> Tensor:
    """``dropout(softmax(mask(q k^T))) v`` (B*H, n, d_v) from q (B*H, n, d_qk), k transposed (B*H, d_qk, n),
    v (B*H, n, d_v), the padding (B*H, n) and empty rows (B*H, n, 1) of every pair, or None."""
    pairs, n, _ = q.shape
    out = v.new_empty(pairs, n, v.shape[-1])
    upper = causal_mask(CAUSAL_ROWS, CAUSAL_ROWS, q.device) if causal else None
    for c0, c1, s, e in _blocks(pairs, n, n, causal):
        m = e if causal else n
        probs = _block_probs(q[c0:c1, s:e], k_t[c0:c1, :, :m], None if padding is None else padding[c0:c1],
                             None if empty is None else empty[c0:c1, s:e], upper, s)
        keep = _keep(probs.shape, dropout, seed + c0 * n + s, q)
        if keep is not None:
            probs *= keep
        # out= a contiguous piece of the output (see pair_blocks): no copy, one call fewer per block.
        torch.bmm(probs, v[c0:c1, :m], out=out[c0:c1, s:e])
    return out


def wide_backward(q: Tensor, k: Tensor, v: Tensor, out: Tensor, grad_out: Tensor, *, padding: Tensor | None,
                  empty: Tensor | None, causal: bool, dropout: float = 0.0, seed: int = 0
                  ) -> tuple[Tensor, Tensor, Tensor]:
    """dq, dk (B*H, n, d_qk) and dv (B*H, n, d_v), one pass over the forward's blocks (inputs as in
    ``wide_forward``, k and v untransposed, ``out`` the forward's output)."""
    pairs, n, d_qk = q.shape
    # delta = rowsum(P * dP) (dropout included) from the output, once: each block's logit gradient
    # is then P * (dP - delta) in two in-place passes (softmax's own backward reduces the block again).
    delta = (grad_out * out).sum(-1, keepdim=True)
    # dq and dk in the layout of q and k (pairs, n, d_qk): the ops after the kernel (the features'
    # split, the batch sum of a shared k, the heads' merge) then read contiguous rows. dv is built
    # transposed, where its product writes rows of length n (faster on CPU: docs/bench/kernels.md), and
    # transposed once at the end. A group of pairs' first block sees every key (not causal: all its
    # rows; causal: its last rows) and writes its dk and dv, the later ones add to them: no zero fill.
    dq, dk, dv_t = q.new_empty(pairs, n, d_qk), q.new_empty(pairs, n, d_qk), q.new_empty(pairs, v.shape[-1], n)
    k_t, v_t = k.transpose(-1, -2), v.transpose(-1, -2)  # views: BLAS takes a transposed operand at no cost
    upper = causal_mask(CAUSAL_ROWS, CAUSAL_ROWS, q.device) if causal else None
    for c0, c1, s, e in _blocks(pairs, n, n, causal):
        m = e if causal else n
        q_blk, go = q[c0:c1, s:e], grad_out[c0:c1, s:e]
        probs = _block_probs(q_blk, k_t[c0:c1, :, :m], None if padding is None else padding[c0:c1],
                             None if empty is None else empty[c0:c1, s:e], upper, s)
        dlogits = torch.bmm(go, v_t[c0:c1, :, :m])  # dP
        keep = _keep(probs.shape, dropout, seed + c0 * n + s, q)
        first = e == n if causal else s == 0  # the block that sees every key first
        _accumulate(dv_t[c0:c1, :, :m], go.transpose(-1, -2), probs if keep is None else probs * keep, first)
        if keep is not None:
            dlogits *= keep
        dlogits.sub_(delta[c0:c1, s:e]).mul_(probs)
        torch.bmm(dlogits, k[c0:c1, :m], out=dq[c0:c1, s:e])
        _accumulate(dk[c0:c1, :m], dlogits.transpose(-1, -2), q_blk, first)
    return dq, dk, dv_t.transpose(-1, -2).contiguous()


def _accumulate(into: Tensor, a: Tensor, b: Tensor, first: bool) -> None:
    """``into = a b`` for a pair's first block, ``into += a b`` after."""
    if first:
        torch.bmm(a, b, out=into)
    else:
        into.baddbmm_(a, b)


def _pair_masks(padding: Tensor | None, heads: int, causal: bool) -> tuple[Tensor | None, Tensor | None]:
    """Key padding (B, n) repeated for each head, (B*H, n), and its empty rows (B*H, n, 1) (no real key
    to attend to: all keys padded, or, when causal, all keys up to the row's own); or None, None."""
    if padding is None:
        return None, None
    per_pair = padding.repeat_interleave(heads, dim=0)
    empty = per_pair.cumprod(-1).bool() if causal else per_pair.all(-1, keepdim=True).expand_as(per_pair)
    return per_pair, empty.unsqueeze(-1)


def runs_compiled(q: Tensor, dropout: float) -> bool:
    """Whether the compiled CPU blocks (``wide_qk_cpu.cpp``) run: float32 on the CPU, without dropout (whose
    keep masks only the PyTorch blocks draw), where they could be built."""
    if q.device.type != "cpu" or q.dtype != torch.float32 or dropout > 0:
        return False
    return compiled.load("wide_qk_cpu") is not None


# The compiled blocks as operators of torch's own (where this torch has ``torch.library.custom_op``), so that
# torch.compile keeps them in its graph instead of breaking it at a call into an extension it cannot trace.
def _compiled_forward(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor, *, heads: int, causal: bool
                      ) -> tuple[Tensor, Tensor]:
    """out (pairs, n, d_v) and the rows' log-sum-exp (pairs, n); ``allowed`` (B, n) uint8, or empty."""
    return tuple(compiled.load("wide_qk_cpu").forward(q, k, v, allowed, heads, causal))


def _compiled_backward(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, grad_out: Tensor,
                       allowed: Tensor, *, heads: int, causal: bool) -> tuple[Tensor, Tensor, Tensor]:
    """dq, dk (pairs, n, d_qk), dv (pairs, n, d_v)."""
    return tuple(compiled.load("wide_qk_cpu").backward(q, k, v, out, lse, grad_out, allowed, heads, causal))


if hasattr(torch.library, "custom_op"):  # torch >= 2.4
    _compiled_forward = torch.library.custom_op("synthesizer::wide_qk_cpu_forward", mutates_args=())(
        _compiled_forward)
    _compiled_backward = torch.library.custom_op("synthesizer::wide_qk_cpu_backward", mutates_args=())(
        _compiled_backward)

    @_compiled_forward.register_fake
    def _(q, k, v, allowed, *, heads, causal):
        return q.new_empty(*q.shape[:2], v.shape[-1]), q.new_empty(q.shape[:2])

    @_compiled_backward.register_fake
    def _(q, k, v, out, lse, grad_out, allowed, *, heads, causal):
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


class _WideQKAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, padding, causal, dropout, seed):
        # One dtype throughout (autocast's where it is on: q, k and v may differ, dense's k being its
        # float32 key matrix), autocast off inside; gradients go back cast to each input's dtype.
        dtype = kernel_dtype(v)
        ctx.dtypes = (q.dtype, k.dtype, v.dtype)
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
        with torch.autocast(v.device.type, enabled=False):
            b, h, n, _ = q.shape
            q_f, k_f, v_f = _pairs(q), _pairs(k), _pairs(v)
            ctx.causal, ctx.dropout, ctx.seed = causal, dropout, seed
            ctx.compiled = runs_compiled(q_f, dropout)
            if ctx.compiled:  # the keys each example may see, 1 or 0 (B, n), or none for all
                allowed = q_f.new_empty(0, dtype=torch.uint8) if padding is None else (~padding.bool()).byte()
                out, lse = _compiled_forward(q_f, k_f, v_f, allowed.contiguous(), heads=h, causal=causal)
                ctx.save_for_backward(q_f, k_f, v_f, allowed, lse, out)
            else:
                pad_f, empty_f = _pair_masks(padding, h, causal)
                out = wide_forward(q_f, k_f.transpose(-1, -2), v_f, pad_f, empty_f, causal,
                                   dropout=dropout, seed=seed)
                ctx.save_for_backward(q_f, k_f, v_f, pad_f, empty_f, out)
            return out.view(b, h, n, out.shape[-1])

    @staticmethod
    def backward(ctx, grad_out):
        with torch.autocast(grad_out.device.type, enabled=False):
            b, h, n, _ = grad_out.shape
            if ctx.compiled:
                q, k, v, allowed, lse, out = ctx.saved_tensors
                dq, dk, dv = _compiled_backward(q, k, v, out, lse, _pairs(grad_out.to(v.dtype)), allowed, heads=h,
                                                causal=ctx.causal)
            else:
                q, k, v, padding, empty, out = ctx.saved_tensors
                dq, dk, dv = wide_backward(q, k, v, out, _pairs(grad_out.to(v.dtype)), padding=padding,
                                           empty=empty, causal=ctx.causal, dropout=ctx.dropout, seed=ctx.seed)
            grads = tuple(g.view(b, h, n, g.shape[-1]) for g in (dq, dk, dv))
            return (*(g.to(d) for g, d in zip(grads, ctx.dtypes)), None, None, None, None)


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
