"""``blockwise``: attention with a batch-shared additive term: memory-lean, and its backward gives the
gradient of that term (which the fused kernel does not).

Logits ``w_q q k^T + sum_c w_c B_c`` (the bias terms: each ``B_c`` (H, n, n) shared by the batch, e.g. R
of a random synthesizer, with its mixture weight ``w_c`` per head or none; ``w_q`` the features' weight,
or none), masked, softmax, dropout, times ``v``. Queries are processed in blocks of rows of a group of
examples, so at most about ``BLOCK_ELEMENTS`` logits exist at a time: one example a step at long lengths,
as many as fit at short ones (a Python step per example costs more than its products there). The
terms stay apart: each block forms its rows of the sum, so no (H, n, n) product ``w * R`` is made,
saved or differentiated, and the backward writes each term's gradient (``w_c`` times the
batch-summed logit gradient) and its weight's gradient straight from the block. The forward keeps
each row's log-sum-exp; the backward (``attention_backward``, shared with ``fused_bias``)
recomputes each block's probabilities from it, ``P = exp(q k^T + bias - lse)``, and gives dq, dk, dv
and the terms' gradients in the same pass, as flash attention does. q and k may have another head
size than v (no padding of v needed).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..forms import BIAS, FEATURES
from ..masks import MASKED, causal_mask
from .scores import Scores, Terms, as_terms, bias_rows
from .always import require, runs  # noqa: F401  (the kernel interface, dispatch.Kernel)

NAME = "blockwise"
NEEDS = "features"
APPLIES_TO = "dot products of features, plus any batch-shared bias terms (random+vanilla, ...)"
FALLBACK = None  # it runs in every mode on every device (always.runs)

# Logits per block of one example (16 MiB in float32; the backward holds two such blocks and the
# block's rows of the bias): 256 rows per block at 8 heads, seq 2048. Chosen by timing 2M / 4M / 8M
# elements (docs/bench/kernels.md, "blockwise").
BLOCK_ELEMENTS = 1 << 22
# Logits per step where a block of one example holds fewer: that many examples' blocks at once.
GROUP_ELEMENTS = 1 << 18


def applies(components) -> bool:
    """Dot products of features, plus any batch-shared bias terms."""
    forms = {c.form for c in components}
    return FEATURES in forms and forms <= {FEATURES, BIAS}


def _dropout_keep(shape: torch.Size, p: float, seed: int, device: torch.device) -> Tensor:
    """The same keep-mask (scaled by 1/(1-p)) for a given seed in forward and backward."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return (torch.rand(shape, generator=gen, device=device) >= p).to(torch.get_default_dtype()) / (1 - p)


def _group_logits(q_blk: Tensor, k: Tensor, bias: Tensor | None, padding: Tensor | None, causal: bool,
                  s: int) -> Tensor:
    """Logits (g, H, t, m) of a group of g examples' query rows s..s+t-1 (``q_blk`` (g, H, t, d)) over
    the m keys they may see (all, or 0..s+t-1 when causal; ``k`` (g|1, H, n, d)), -inf where masked;
    ``bias`` is the block's rows of the terms' sum (H, t, m) or None; ``padding`` the group's (g, n)
    key padding or None."""
    e = s + q_blk.shape[2]
    m = e if causal else k.shape[2]
    logits = _product(q_blk, k[:, :, :m].transpose(-1, -2), bias)
    if causal:  # only the last e-s keys of the block can lie after a row
        logits[..., s:].masked_fill_(causal_mask(e - s, e - s, q_blk.device), MASKED)
    if padding is not None:
        logits.masked_fill_(padding[:, None, None, :m], MASKED)
    return logits


def _product(a: Tensor, b: Tensor, acc: Tensor | None = None) -> Tensor:
    """``acc + a @ b`` for a (g, H, t, d) and b (g|1, H, d, m), acc (H, t, m) or None. For one example,
    batched products over the heads straight on the operands' strided views (no copy of a head-split
    view, the accumulator in the product); for several, one broadcasting matmul."""
    if a.shape[0] == 1:
        return (torch.bmm(a[0], b[0]) if acc is None else torch.baddbmm(acc, a[0], b[0])).unsqueeze(0)
    out = torch.matmul(a, b)
    return out if acc is None else out.add_(acc)


def _add_product(target: Tensor, a: Tensor, b: Tensor) -> None:
    """target (g, H, r, c) += a @ b in place (for one example, into the target's memory directly)."""
    if target.shape[0] == 1:
        target[0].baddbmm_(a[0], b[0])
    else:
        target.add_(torch.matmul(a, b))


def _shared_batch(t: Tensor) -> Tensor:
    """t (B, H, n, d), or, for features shared by the batch (dense's k, expanded over batch and heads:
    zero strides, which send the products to a slow path), one contiguous example (1, H, n, d) that
    every group reads."""
    if t.shape[0] > 0 and 0 in t.stride():
        return t[:1].contiguous() if t.stride(0) == 0 else t.contiguous()
    return t


def _of_group(t: Tensor, i: int, j: int) -> Tensor:
    """Examples i..j-1 of t, or t's one shared example (``_shared_batch``)."""
    return t if t.shape[0] == 1 else t[i:j]


def _weighted(q_blk: Tensor, q_weight: Tensor | None) -> Tensor:
    """q_blk (H, t, d) times the features' mixture weight (1 or H values), a small per-block product."""
    return q_blk if q_weight is None else q_blk * q_weight.reshape(-1, 1, 1)


def _per_head_sum(x: Tensor, like: Tensor) -> Tensor:
    """x (..., H, t, d) summed to the shape of a weight ``like`` (one value per head, or one in all)."""
    per_head = x.sum((-1, -2)).reshape(-1, x.shape[-3]).sum(0)
    return (per_head if like.numel() == per_head.numel() else per_head.sum()).reshape(like.shape)


class TermGradients:
    """The gradients of the bias terms from the logit gradient, summed over the batch block by block
    into one (H, n, n) buffer ``G``; ``finish`` turns it into ``d B_c = w_c G`` and ``d w_c = sum(G *
    B_c)`` (per head, or in all for a scalar weight). For one unweighted term ``G`` is its gradient.
    ``wanted`` says, per term, whether (w_c, B_c) need a gradient."""

    def __init__(self, terms: Terms, wanted: Sequence[tuple[bool, bool]], zero: bool):
        self.terms, self.wanted = terms, list(wanted)
        self.needed = any(gw or gb for gw, gb in self.wanted)
        # ``zero`` where the blocks do not write every element (causal: only the keys their rows may see)
        alloc = torch.zeros_like if zero else torch.empty_like
        self.total = alloc(terms[0][1], memory_format=torch.contiguous_format) if self.needed else None

    def add(self, dlogits: Tensor, s: int, e: int, m: int, first: bool) -> None:
        """Rows s..e-1, keys 0..m-1 of a group's logit gradient (g, H, e-s, m), summed over the group
        (``first``: the block's first group, which is written rather than added)."""
        rows, summed = self.total[:, s:e, :m], dlogits[0] if dlogits.shape[0] == 1 else dlogits.sum(0)
        rows.copy_(summed) if first else rows.add_(summed)

    def finish(self) -> list[Tensor | None]:
        """w_0, B_0, w_1, B_1, ...: the gradients in the order the terms were given (None where not wanted)."""
        grads: list[Tensor | None] = []
        g = self.total
        for c, ((w, b), (gw, gb)) in enumerate(zip(self.terms, self.wanted)):
            dw = db = None
            if g is not None and w is not None and gw:
                dw = _per_head_sum(g * b, w)
            if g is not None and gb:
                reuse = not any(later_w or later_b for later_w, later_b in self.wanted[c + 1 :])  # G's last use
                if w is None:
                    db = g if reuse else g.clone()
                else:
                    db = g.mul_(w.reshape(-1, 1, 1)) if reuse else g * w.reshape(-1, 1, 1)
            grads += [dw, db]
        return grads


def _block_rows(h: int, n: int) -> int:
    """Query rows per block of one example: (H, rows, n) logits of about ``BLOCK_ELEMENTS``."""
    return max(16, min(n, BLOCK_ELEMENTS // max(1, h * n)))


def _groups(b: int, h: int, rows: int, n: int) -> list[tuple[int, int]]:
    """(i, j): examples i..j-1, as many to a step as keep its (g, H, rows, n) logits within
    ``GROUP_ELEMENTS`` (one where a block of one example holds more)."""
    per = max(1, GROUP_ELEMENTS // max(1, h * rows * n))
    return [(i, min(i + per, b)) for i in range(0, b, per)]


def attention_backward(q: Tensor, k: Tensor, v: Tensor, terms: Terms, out: Tensor, lse: Tensor, grad_out: Tensor, *,
                       padding: Tensor | None, causal: bool, dropout: float = 0.0, seed: int = 0,
                       wanted: Sequence[tuple[bool, bool]] = (), q_weight: Tensor | None = None
                       ) -> tuple[Tensor, Tensor, Tensor, Tensor | None, list[Tensor | None]]:
    """dq, dk (B, H, n, dq), dv (B, H, n, dv), the gradient of ``q_weight`` (None without one) and the
    bias terms' gradients [d w_0, d B_0, ...] (see ``TermGradients``; ``wanted`` per term, none by
    default) of ``dropout(softmax(mask(w_q q k^T + sum_c w_c B_c))) v``, in one pass over blocks of
    query rows of a group of examples (``_groups``).

    ``out`` (B, H, n, dv) is the forward's output, ``lse`` (B, H, n) its rows' log-sum-exp with +inf
    on rows without a key; the terms hold no causal mask (the causal rule is applied here). Per block:
    ``P = exp(q k^T + bias - lse)`` (the block's rows of the bias, formed once for all examples, ride
    in the matmul's accumulator; the lse is subtracted in place), ``dS = P * (dO v^T * keep - delta)``
    with ``delta = rowsum(dO * out)`` computed once per row, and every gradient accumulated into its
    final buffer. One example a step (long sequences), the operands are (H, rows, d) matrices with a
    row stride, taken as they are by the batched products (``_product``): no copy of the head-split
    views, and the gradients keep the inputs' layout. The features' weight ``w_q`` is applied per
    block, so no weighted copy of q exists.
    """
    b, h, n, _ = q.shape
    rows = _block_rows(h, n)
    groups = _groups(b, h, rows, n)
    delta = out.new_empty(b, h, n, 1)  # rowsum(P * dP), dropout included; per group: no (B, H, n, dv) temporary
    for i, j in groups:  # assigned, not out=: torch.compile cannot trace out= into a strided view
        delta[i:j] = torch.sum(grad_out[i:j] * out[i:j], dim=-1, keepdim=True)
    lse = lse.unsqueeze(-1)
    dq, dk, dv = torch.empty_like(q, memory_format=torch.preserve_format), torch.zeros_like(k), torch.zeros_like(v)
    k_all = _shared_batch(k)
    dq_weight = None if q_weight is None else torch.zeros_like(q_weight)
    term_grads = TermGradients(terms, wanted or [(False, False)] * len(terms), zero=causal or b == 0)
    for s in range(0, n, rows):
        e = min(s + rows, n)
        m = e if causal else n
        bias = bias_rows(terms, s, e, m)
        for i, j in groups:
            q_blk, k_g = q[i:j, :, s:e], _of_group(k_all, i, j)
            qw_blk = _weighted(q_blk, q_weight)
            probs = _group_logits(qw_blk, k_g, bias, None if padding is None else padding[i:j], causal, s)
            probs.sub_(lse[i:j, :, s:e]).exp_()  # rows without a key have lse = +inf: P = 0
            go = grad_out[i:j, :, s:e]
            dprobs = _product(go, v[i:j, :, :m].transpose(-1, -2))
            if dropout > 0:
                keep = _dropout_keep(probs.shape, dropout, _block_seed(seed, i, s, n), q.device).to(probs.dtype)
                _add_product(dv[i:j, :, :m], (probs * keep).transpose(-1, -2), go)
                dprobs *= keep
                del keep
            else:
                _add_product(dv[i:j, :, :m], probs.transpose(-1, -2), go)
            dlogits = dprobs.sub_(delta[i:j, :, s:e]).mul_(probs)  # P * (dP - delta)
            del probs
            dqw = _product(dlogits, k_g[:, :, :m])  # the gradient of the weighted q
            if q_weight is None:
                dq[i:j, :, s:e] = dqw
            else:
                dq_weight += _per_head_sum(dqw * q_blk, q_weight)
                dq[i:j, :, s:e] = dqw.mul_(q_weight.reshape(-1, 1, 1))
            _add_product(dk[i:j, :, :m], dlogits.transpose(-1, -2), qw_blk)
            if term_grads.needed:
                term_grads.add(dlogits, s, e, m, first=i == 0)
    return dq, dk, dv, dq_weight, term_grads.finish()


def _block_seed(seed: int, example: int, start: int, n: int) -> int:
    """The dropout seed of one example's block of rows from ``start``: the same in forward and backward."""
    return seed + example * n + start


def blockwise_forward(q: Tensor, k: Tensor, v: Tensor, terms: Terms, padding: Tensor | None, causal: bool, *,
                      dropout: float = 0.0, seed: int = 0, q_weight: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The output (B, H, n, dv) and each row's log-sum-exp (B, H, n), +inf on rows without a key
    (what ``attention_backward`` takes), in the backward's blocks and groups. Dropout
    keep-masks come from ``_block_seed``."""
    b, h, n, _ = q.shape
    rows = _block_rows(h, n)
    groups = _groups(b, h, rows, n)
    k_all = _shared_batch(k)
    out = v.new_empty(b, h, n, v.shape[-1])
    lse = q.new_empty(b, h, n, 1)
    for s in range(0, n, rows):
        e = min(s + rows, n)
        m = e if causal else n
        bias = bias_rows(terms, s, e, m)
        for i, j in groups:
            probs = _group_logits(_weighted(q[i:j, :, s:e], q_weight), _of_group(k_all, i, j), bias,
                                  None if padding is None else padding[i:j], causal, s)
            row = torch.logsumexp(probs, dim=-1, keepdim=True)
            row.masked_fill_(torch.isneginf(row), float("inf"))  # no key: exp(-inf - inf) = 0 everywhere
            lse[i:j, :, s:e] = row
            probs.sub_(row).exp_()
            if dropout > 0:
                probs *= _dropout_keep(probs.shape, dropout, _block_seed(seed, i, s, n), q.device).to(probs.dtype)
            out[i:j, :, s:e] = _product(probs, v[i:j, :, :m])
    return out, lse.squeeze(-1)


def wanted_terms(needs_input_grad: Sequence[bool], first: int, n_terms: int) -> list[tuple[bool, bool]]:
    """Per term, whether (w_c, B_c) need a gradient, from an autograd Function's ``needs_input_grad``
    whose inputs from ``first`` on are w_0, B_0, w_1, B_1, ..."""
    flags = needs_input_grad[first : first + 2 * n_terms]
    return [(bool(flags[2 * c]), bool(flags[2 * c + 1])) for c in range(n_terms)]


def unflatten(flat: Sequence[Tensor | None]) -> Terms:
    """w_0, B_0, w_1, B_1, ... -> ((w_0, B_0), (w_1, B_1), ...)."""
    return tuple((flat[i], flat[i + 1]) for i in range(0, len(flat), 2))


_TERMS_FROM = 8  # the index of w_0 among _BlockwiseAttention's inputs


class _BlockwiseAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, padding, causal, dropout, seed, q_weight, *flat_terms):
        out, lse = blockwise_forward(q, k, v, unflatten(flat_terms), padding, causal,
                                     dropout=dropout, seed=seed, q_weight=q_weight)
        ctx.save_for_backward(q, k, v, padding, out, lse, q_weight, *flat_terms)
        ctx.causal, ctx.dropout, ctx.seed = causal, dropout, seed
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, padding, out, lse, q_weight, *flat_terms = ctx.saved_tensors
        terms = unflatten(flat_terms)
        wanted = wanted_terms(ctx.needs_input_grad, _TERMS_FROM, len(terms))
        dq, dk, dv, dq_weight, term_grads = attention_backward(
            q, k, v, terms, out, lse, grad_out, padding=padding, causal=ctx.causal, dropout=ctx.dropout,
            seed=ctx.seed, wanted=wanted, q_weight=q_weight)
        return dq, dk, dv, None, None, None, None, dq_weight, *term_grads


def blockwise_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | Terms | None = None,
                        padding: Tensor | None = None, causal: bool = False, *, dropout: float = 0.0,
                        training: bool = False, q_weight: Tensor | None = None) -> Tensor:
    """q, k (B, H, n, dq); v (B, H, n, dv); bias (H, n, n), bias terms ((w_c or None, B_c (H, n, n)), ...)
    or None; padding (B, n) bool, True = pad; q_weight: the features' mixture weight (1 or H values) or None.

    Returns (B, H, n, dv). Logits are ``q_weight * q k^T + bias``: no scaling is applied here.
    """
    p = dropout if training else 0.0
    seed = int(torch.randint(0, 2**62, (1,)).item()) if p > 0 else 0
    flat = [t for term in as_terms(bias) for t in term]
    return _BlockwiseAttention.apply(q, k, v, padding, causal, p, seed, q_weight, *flat)


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """q, k (B, H, n, dq), the features' weight and the bias terms of ``scores``; v (B, H, n, dv) -> (B, H, n, dv)."""
    return blockwise_attention(scores.q, scores.k, v, scores.terms, padding, causal, dropout=dropout, training=training,
                               q_weight=scores.q_weight)
