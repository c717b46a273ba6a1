"""``shared``: every component is input-independent (random kinds), so ``P = softmax(mask(S))`` is
computed once per head and applied to the whole batch as one matrix product per head.

Key padding differs per example but needs no per-example matrix: with ``m_b`` the 0/1 vector of real
keys, ``O_b = P (m_b * V_b) / (P m_b)``, and a row with a zero denominator (no real key: the
empty-row rule in this form) gives zeros.

Causal: P is lower triangular, so the kernel masks, normalises and multiplies block by block: rows
``s:e`` of P see only the first ``e`` keys (forward), and the backward's two products and its softmax
backward use the same blocks. With ``k`` blocks of ``CAUSAL_BLOCK`` rows a product costs
``(1 + 1/k) / 2`` of the full one, and no masked (H, n, n) copy of the logits is made. Blocks of 256
rows are the default (``CAUSAL_BLOCK = 256``; 0 turns them off), chosen by timing whole products and
blocks of 128 and 256 rows (docs/bench/kernels.md, "shared").
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..masks import MASKED, causal_mask
from .scores import Scores
from .always import require, runs  # noqa: F401  (the kernel interface, dispatch.Kernel)

NAME = "shared"
NEEDS = "bias"
APPLIES_TO = "layers of input-independent components only (random, fixed_random, factorized_random, mixed)"
FALLBACK = None  # it runs in every mode on every device (always.runs)
# Rows per block of the causal block-triangular products (docs/bench/kernels.md); 0: whole
# products with the mask applied first.
CAUSAL_BLOCK = 256


def applies(components) -> bool:
    """Every component input-independent."""
    return all(c.input_independent for c in components)


def row_blocks(n: int, block: int) -> list[tuple[int, int]]:
    """[(start, end)] covering rows 0..n-1 in blocks of ``block`` rows (one block if block <= 0)."""
    if block <= 0 or block >= n:
        return [(0, n)]
    return [(s, min(s + block, n)) for s in range(0, n, block)]


class _SharedSoftmaxProduct(torch.autograd.Function):
    """``P = softmax(logits)`` (H, n, n) times the batch laid out as columns (H, n, C), and optionally
    ``P @ keep`` (the padding denominators). Its backward turns dP into the logits' gradient in place,
    so besides the saved P only one (H, n, n) buffer exists: with n = max_len that buffer becomes
    the gradient of R itself. Block results are computed contiguous and copied into place: ``bmm``
    with ``out=`` a strided slice of a larger tensor is much slower (docs/bench/kernels.md).

    ``causal_block`` > 0: causal, the mask applied here. Every softmax, product and softmax
    backward then runs on the lower-triangular blocks only (rows s:e, keys 0..e-1); the rest of P
    and of the gradient is written as zeros once, and no masked copy of the logits is made."""

    @staticmethod
    def forward(ctx, logits, columns, keep, causal_block):
        n = logits.shape[1]
        ctx.causal_block = causal_block
        if not causal_block:
            probs = torch.softmax(logits, dim=-1)
            out = torch.bmm(probs, columns)
        else:
            probs, out = logits.new_empty(logits.shape), columns.new_empty(columns.shape)
            for s, e in row_blocks(n, causal_block):
                block = logits[:, s:e, :e].masked_fill(causal_mask(e - s, e, logits.device, start=s), MASKED)
                probs[:, s:e, :e] = torch.softmax(block, dim=-1)
                probs[:, s:e, e:] = 0.0
                out[:, s:e] = torch.bmm(probs[:, s:e, :e], columns[:, :e])
        ctx.save_for_backward(probs, columns, keep)
        return out, (torch.matmul(probs, keep) if keep is not None else None)

    @staticmethod
    def backward(ctx, grad_out, grad_den):
        probs, columns, keep = ctx.saved_tensors
        columns_dtype = columns.dtype
        if columns_dtype != probs.dtype:  # autocast: a float32 R beside bfloat16 values; no autocast here
            columns, grad_out = columns.to(probs.dtype), grad_out.to(probs.dtype)
            keep = None if keep is None else keep.to(probs.dtype)
            grad_den = None if grad_den is None else grad_den.to(probs.dtype)
        n = probs.shape[1]
        blocks = row_blocks(n, ctx.causal_block) if ctx.causal_block else [(0, n)]
        if len(blocks) == 1:
            grad_columns = torch.bmm(probs.transpose(1, 2), grad_out)
        else:  # column block s:e of P^T dO: only rows s.. of P are nonzero there
            grad_columns = columns.new_empty(columns.shape)
            for s, e in blocks:
                grad_columns[:, s:e] = torch.bmm(probs[:, s:, s:e].transpose(1, 2), grad_out[:, s:])
        grad_columns = grad_columns.to(columns_dtype)
        if not ctx.needs_input_grad[0]:  # fixed_random: nothing to learn in the logits
            return None, grad_columns, None, None
        if not ctx.causal_block:
            dprobs = torch.bmm(grad_out, columns.transpose(1, 2))
            if grad_den is not None:
                dprobs.baddbmm_(grad_den, keep.t().unsqueeze(0).expand(grad_den.shape[0], -1, -1))
            blocks = [(s, min(s + 256, n)) for s in range(0, n, 256)]  # softmax backward a few rows at a time
        else:
            dprobs = probs.new_empty(probs.shape)
            for s, e in blocks:
                dprobs[:, s:e, :e] = torch.bmm(grad_out[:, s:e], columns[:, :e].transpose(1, 2))
                if grad_den is not None:
                    dprobs[:, s:e, :e].baddbmm_(grad_den[:, s:e], keep[:e].t().unsqueeze(0).expand(grad_den.shape[0], -1, -1))
                dprobs[:, s:e, e:] = 0.0  # P is zero there, and so is the logits' gradient
        for s, e in blocks:  # softmax backward in place; causal: keys 0..e-1 only
            cols = e if ctx.causal_block else n
            rows_p, rows_d = probs[:, s:e, :cols], dprobs[:, s:e, :cols]
            rows_d.sub_((rows_d * rows_p).sum(-1, keepdim=True)).mul_(rows_p)
        return dprobs, grad_columns, None, None


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """``scores.bias()`` (H, n, n) shared by the batch, v (B, H, n, dh) -> (B, H, n, dh).

    With dropout, one dropout mask per head is shared by the batch (the price of never building
    per-example weights); ``impl="reference"`` drops per example.
    """
    logits = scores.bias()
    b, h, n, dh = v.shape
    keep = None
    if padding is not None:
        keep = (~padding).to(v.dtype)  # (B, n)
        v = v * keep[:, None, :, None]
    flat = v.permute(1, 2, 0, 3).reshape(h, n, b * dh)  # (H, n, B*dh): the batch becomes columns
    if training and dropout > 0:
        if causal:
            logits = logits.masked_fill(causal_mask(n, n, v.device), MASKED)
        probs = torch.softmax(logits, dim=-1)  # no empty rows: without padding every row keeps its diagonal
        out = torch.bmm(F.dropout(probs, dropout, training), flat)
        denom = None if keep is None else probs @ keep.t()
    else:
        block = CAUSAL_BLOCK if causal and 0 < CAUSAL_BLOCK < n else 0
        if causal and not block:  # whole products (see CAUSAL_BLOCK)
            logits = logits.masked_fill(causal_mask(n, n, v.device), MASKED)
        out, denom = _SharedSoftmaxProduct.apply(logits, flat, None if keep is None else keep.t().contiguous(), block)
    out = out.view(h, n, b, dh)
    if denom is not None:
        denom = denom.unsqueeze(-1)  # (H, n, B, 1): weight of the real keys in each row
        out = torch.where(denom > 0, out / denom.clamp_min(torch.finfo(denom.dtype).tiny), out.new_zeros(()))
    return out.permute(2, 0, 1, 3)  # a view; the layer's head merge makes the one copy
