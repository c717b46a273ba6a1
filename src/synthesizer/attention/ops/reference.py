"""The naive reference: materialise the logits, mask, softmax, dropout, times the values.

Every fast kernel computes the same function; the tests compare them against this one. It is also
what decoding with a cache and ``attention_weights`` run.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from ..masks import combined_mask, masked_softmax
from .scores import Scores
from .always import require, runs  # noqa: F401  (the kernel interface, dispatch.Kernel)

NAME = "reference"
NEEDS = "logits"
APPLIES_TO = "every layer"
FALLBACK = None  # it runs in every mode on every device (always.runs)


def applies(components) -> bool:
    """Every layer: it needs nothing but ``logits``."""
    return True


def probabilities(logits: Tensor, padding: Tensor | None, causal: bool, start: int = 0,
                  documents: Tensor | None = None) -> Tensor:
    """softmax(mask(logits)) for logits (B|1, H, t, n) of rows start..start+t-1; padding (B, n) bool;
    ``documents`` (B, n): packed rows' document ids (keys of another document masked)."""
    t, n = logits.shape[-2:]
    return masked_softmax(logits, combined_mask(t, n, causal, padding, logits.device, start, documents))


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """(B, H, t, d_v): ``dropout(softmax(mask(logits))) v``, one dropout mask per example."""
    probs = probabilities(scores.logits, padding, causal, scores.start, scores.documents)
    if training and dropout > 0:
        probs = F.dropout(probs, dropout)
    return probs @ v
