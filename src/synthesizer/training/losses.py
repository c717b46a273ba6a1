"""Token-level losses returned as (sum, count) so the trainer can normalise over the global batch."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from ..errors import InputError


def sequence_cross_entropy(logits: Tensor, targets: Tensor, pad_id: int | None = None,
                           label_smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
    """Summed cross-entropy over non-padding target tokens.

    Args:
        logits: (..., vocab) unnormalised scores, e.g. (B, n, V) for sequences or (B, C) for labels.
        targets: (...) class ids matching ``logits`` without its last dimension.
        pad_id: target id to ignore (padding); ``None`` counts every position.
        label_smoothing: mass spread uniformly over the vocabulary, in [0, 1).
    Returns ``(loss_sum, n_tokens)``: a scalar float32 tensor and a scalar int64 tensor.
    """
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not match targets {tuple(targets.shape)}: "
                         "expected logits shape = targets shape + (vocab,)")
    if not 0.0 <= label_smoothing < 1.0:
        raise InputError(f"label_smoothing must be in [0, 1), got {label_smoothing!r}")
    flat_logits = logits.reshape(-1, logits.shape[-1]).float()  # fp32 log-softmax under autocast
    flat_targets = targets.reshape(-1)
    ignore = -100 if pad_id is None else pad_id
    loss_sum = F.cross_entropy(flat_logits, flat_targets, ignore_index=ignore, reduction="sum",
                               label_smoothing=label_smoothing)
    n_tokens = (flat_targets != ignore).sum()
    return loss_sum, n_tokens
