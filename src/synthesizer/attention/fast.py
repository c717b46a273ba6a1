"""Fast paths: the same function as the reference path, without a (B, H, n, n) tensor.

* ``shared``: every component is input-independent (random kinds), so ``P = softmax(mask(S))`` is
  computed once per head and applied to the whole batch as one matrix product per head. Key padding
  uses ``O_b = P (m_b * V_b) / (P m_b)`` with ``m_b`` the 0/1 vector of real keys.
* ``fused``: logits that are dot products (dense, factorized_random, vanilla and their mixtures) are
  one dot product over concatenated features, handed to ``scaled_dot_product_attention``.
* ``fused_bias`` (mixtures with random, in ``fused_bias.py``) and ``blockwise`` (``chunked.py``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .masks import MASKED, causal_mask


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


def shared_attention(logits: Tensor, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """logits (H, n, n) shared by the batch, v (B, H, n, dh) -> (B, n, H*dh).

    With dropout, one dropout mask per head is shared by the batch (the price of never building
    per-example weights); ``impl="reference"`` drops per example.
    """
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
    return out.permute(2, 1, 0, 3).reshape(b, n, h * dh)


def fused_attention(q: Tensor, k: Tensor, v: Tensor, padding: Tensor | None, causal: bool, dropout: float,
                    training: bool) -> Tensor:
    """q, k (B, H, n, dq); v (B, H, n, dh); logits are ``q k^T`` with no further scaling. Returns (B, n, H*dh)."""
    b, h, n, dh = v.shape
    dq = q.shape[-1]
    if dq != dh:  # the fused CPU kernel needs one head size for q, k and v
        v = F.pad(v, (0, dq - dh)) if dq > dh else v
        if dq < dh:
            q, k = F.pad(q, (0, dh - dq)), F.pad(k, (0, dh - dq))
    allowed, empty = None, None
    if padding is not None:
        allowed = ~padding[:, None, None, :]  # (B, 1, 1, n)
        if causal:
            allowed = allowed & ~causal_mask(n, n, q.device)
        # A row with no allowed key would be NaN: let it see everything, then zero its output.
        empty = ~allowed.any(dim=-1, keepdim=True)
        allowed = allowed | empty
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout if training else 0.0,
                                         is_causal=causal and allowed is None, scale=1.0)
    if empty is not None:
        out = out.masked_fill(empty, 0.0)
    return out[..., :dh].transpose(1, 2).reshape(b, n, h * dh)
