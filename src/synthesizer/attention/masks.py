"""Causal and key-padding masks, and the softmax that respects them (True = masked everywhere)."""

from __future__ import annotations

import torch
from torch import Tensor

# The one masking rule of every path: a masked key (causal or padding) gets the logit -inf, so its
# weight is exactly 0 in any dtype; a row whose keys are all masked has no softmax, and the spec
# gives it zeros (``masked_softmax`` here, the same rule in each fast path), never NaN.
MASKED = float("-inf")


def finite_masked_logit(dtype: torch.dtype) -> float:
    """The masked logit where it must be finite: a key feature that goes through the fused kernel's
    matmuls, whose backward would turn 0 * inf into NaN. Half the most negative value of ``dtype``:
    exp(it - max) underflows to exactly 0 next to real logits, and adding one cannot overflow to
    -inf (a fixed -1e30 does not fit in float16 at all)."""
    return torch.finfo(dtype).min / 2


def check_padding_mask(mask: Tensor | None, batch: int, seq: int) -> None:
    if mask is None:
        return
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        kind = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise ValueError(f"key_padding_mask must be a bool tensor (True = padding), got {kind}")
    if tuple(mask.shape) != (batch, seq):
        raise ValueError(f"key_padding_mask must have shape (batch, seq) = {(batch, seq)}, got {tuple(mask.shape)}")


def causal_mask(n_rows: int, n_keys: int, device: torch.device, start: int = 0) -> Tensor:
    """(n_rows, n_keys) bool, True where key j lies after query position start + i."""
    rows = torch.arange(start, start + n_rows, device=device).unsqueeze(1)
    return torch.arange(n_keys, device=device).unsqueeze(0) > rows


def combined_mask(n_rows: int, n_keys: int, causal: bool, padding: Tensor | None, device: torch.device, start: int = 0) -> Tensor | None:
    """Broadcastable to (B, H, n_rows, n_keys): causal (1, 1, t, n) | padding (B, 1, 1, n), or None."""
    mask = causal_mask(n_rows, n_keys, device, start)[None, None] if causal else None
    if padding is not None:
        pad = padding[:, None, None, :]
        mask = pad if mask is None else mask | pad
    return mask


def masked_softmax(logits: Tensor, mask: Tensor | None) -> Tensor:
    """Softmax over the last axis with masked entries at weight 0; fully masked rows give zeros, not NaN."""
    if mask is None:
        return torch.softmax(logits, dim=-1)
    empty = mask.all(dim=-1, keepdim=True)
    logits = logits.masked_fill(mask, MASKED).masked_fill(empty, 0.0)
    return torch.softmax(logits, dim=-1).masked_fill(empty, 0.0)
