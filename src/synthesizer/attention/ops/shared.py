"""``shared``: every component is input-independent (random kinds), so ``P = softmax(mask(S))`` is
computed once per head and applied to the whole batch as one matrix product per head.

Key padding differs per example but needs no per-example matrix: with ``m_b`` the 0/1 vector of real
keys, ``O_b = P (m_b * V_b) / (P m_b)``, and a row with a zero denominator (no real key: the
empty-row rule in this form) gives zeros.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..masks import MASKED, causal_mask
from .scores import Scores

NAME = "shared"
NEEDS = "bias"


def applies(components) -> bool:
    """Every component input-independent."""
    return all(c.input_independent for c in components)


class _SharedSoftmaxProduct(torch.autograd.Function):
    """``P = softmax(logits)`` (H, n, n) times the batch laid out as columns (H, n, C), and optionally
    ``P @ keep`` (the padding denominators). Its backward turns dP into the logits' gradient in place,
    so besides the saved P only one (H, n, n) buffer exists: with n = max_len that buffer becomes
    the gradient of R itself."""

    @staticmethod
    def forward(ctx, logits, columns, keep):
        probs = torch.softmax(logits, dim=-1)
        ctx.save_for_backward(probs, columns, keep)
        out = torch.bmm(probs, columns)
        return out, (torch.matmul(probs, keep) if keep is not None else None)

    @staticmethod
    def backward(ctx, grad_out, grad_den):
        probs, columns, keep = ctx.saved_tensors
        grad_columns = torch.bmm(probs.transpose(1, 2), grad_out)
        if not ctx.needs_input_grad[0]:  # fixed_random: nothing to learn in the logits
            return None, grad_columns, None
        dprobs = torch.bmm(grad_out, columns.transpose(1, 2))
        if grad_den is not None:
            dprobs.baddbmm_(grad_den, keep.t().unsqueeze(0).expand(grad_den.shape[0], -1, -1))
        for s in range(0, dprobs.shape[1], 256):  # softmax backward in place, a few rows at a time
            rows_p, rows_d = probs[:, s : s + 256], dprobs[:, s : s + 256]
            rows_d.sub_((rows_d * rows_p).sum(-1, keepdim=True)).mul_(rows_p)
        return dprobs, grad_columns, None


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """``scores.bias`` (H, n, n) shared by the batch, v (B, H, n, dh) -> (B, H, n, dh).

    With dropout, one dropout mask per head is shared by the batch (the price of never building
    per-example weights); ``impl="reference"`` drops per example.
    """
    logits = scores.bias
    b, h, n, dh = v.shape
    if causal:
        logits = logits.masked_fill(causal_mask(n, n, v.device), MASKED)
    keep = None
    if padding is not None:
        keep = (~padding).to(v.dtype)  # (B, n)
        v = v * keep[:, None, :, None]
    flat = v.permute(1, 2, 0, 3).reshape(h, n, b * dh)  # (H, n, B*dh): the batch becomes columns
    if training and dropout > 0:
        probs = torch.softmax(logits, dim=-1)  # no empty rows: without padding every row keeps its diagonal
        out = torch.bmm(F.dropout(probs, dropout, training), flat)
        denom = None if keep is None else probs @ keep.t()
    else:
        out, denom = _SharedSoftmaxProduct.apply(logits, flat, None if keep is None else keep.t().contiguous())
    out = out.view(h, n, b, dh)
    if denom is not None:
        denom = denom.unsqueeze(-1)  # (H, n, B, 1): weight of the real keys in each row
        out = torch.where(denom > 0, out / denom.clamp_min(torch.finfo(denom.dtype).tiny), out.new_zeros(()))
    return out.permute(2, 0, 1, 3)  # a view; the layer's head merge makes the one copy
