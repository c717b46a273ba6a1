"""Causal and key-padding masks, and the empty-row rule, for every path (True = masked, except in
``allowed_keys``, whose mask is the fused kernel's "may attend").

The rule: a masked key (causal or padding) gets the logit -inf, so its weight is exactly 0 in any
dtype; a row whose keys are all masked has no softmax, and the spec gives it zeros, never NaN.
``masked_softmax`` applies it to materialised logits, ``masked_softmax_`` to logits already set to
-inf in place (a block of rows), ``allowed_keys`` gives the mask and the empty rows for a kernel that
takes a bool mask (the fused kernel, cross-attention), and ``causal_mask`` / ``finite_masked_logit``
are the pieces the fast paths build their own form of the mask from; ``masked_bias`` is the causal
rule for a kernel that takes a float mask.

Packed rows (several documents in one row, ``data/packing.py``): every token carries its document's id,
and ``document_mask`` masks each key of another document than the query's: a block-diagonal mask, for
self-attention (rows and keys of one row) and cross-attention (a target document against its own source
document). It is the one place that mask is built; ``combined_mask`` and ``allowed_keys`` add it to
the causal and padding masks.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..errors import InputError

# The logit of a masked key (see above).
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
        raise InputError(f"key_padding_mask must be a bool tensor (True = padding), got {kind}")
    if tuple(mask.shape) != (batch, seq):
        raise InputError(f"key_padding_mask must have shape (batch, seq) = {(batch, seq)}, got {tuple(mask.shape)}")


def check_right_padded(mask: Tensor | None, name: str = "key_padding_mask") -> None:
    """ValueError when a row of ``mask`` (B, n) bool, True = padding, has padding before a real token.

    Inputs are left-aligned everywhere (SPEC, Lengths): a synthesizer's logits are indexed by absolute
    position, so a left-padded row would silently read the wrong rows of R or W2. ``name``: the
    argument as the caller knows it (the HF wrappers pass their ``attention_mask``)."""
    if mask is None or mask.shape[-1] < 2 or torch.compiler.is_compiling():
        return  # a compiled forward skips it: reading the answer back is a graph break (eager calls check)
    if bool((mask[:, :-1] & ~mask[:, 1:]).any()):
        raise InputError(f"{name} has padding before a real token; synthesizer models take left-aligned "
                         "inputs (positions are absolute): put the padding on the right")


def check_positions(positions: Tensor, batch: int, seq: int, max_len: int) -> None:
    """Per-token positions: an integer tensor (batch, seq) with every value in [0, max_len); eager
    calls check the values (a compiled forward skips that check: reading them back is a graph break)."""
    if not isinstance(positions, Tensor) or positions.dtype not in (torch.int64, torch.int32):
        kind = positions.dtype if isinstance(positions, Tensor) else type(positions).__name__
        raise InputError(f"positions must be an integer tensor (batch, seq), got {kind}")
    if tuple(positions.shape) != (batch, seq):
        raise InputError(f"positions must have shape (batch, seq) = {(batch, seq)}, got {tuple(positions.shape)}")
    if positions.numel() and not torch.compiler.is_compiling():
        low, high = int(positions.min()), int(positions.max())
        if low < 0 or high >= max_len:
            raise InputError(f"positions must lie in [0, max_len={max_len}), got {low}..{high}")


def continued_positions(cached: Tensor, t: int) -> Tensor:
    """The positions of t new tokens after a cache's: each row on from its last position."""
    return cached[:, -1:] + 1 + torch.arange(t, device=cached.device)


def check_mixer_input(x: Tensor, d_model: int, max_len: int, key_padding_mask: Tensor | None,
                      start: int | None = None) -> None:
    """The input rule of every self-attention mixer: x (batch, seq, d_model), ``start`` cached positions
    (None: no cache) plus seq at most ``max_len``, and a bool (batch, seq) padding mask or None."""
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise InputError(f"x must have shape (batch, seq, d_model={d_model}), got {tuple(x.shape)}")
    t = x.shape[1]
    if (start or 0) + t > max_len:
        what = f"seq={t}" if start is None else f"cached {start} + new {t} positions"
        raise InputError(f"{what} exceeds max_len={max_len} of this layer; build it with a larger max_len")
    check_padding_mask(key_padding_mask, x.shape[0], t)


def causal_mask(n_rows: int, n_keys: int, device: torch.device, start: int = 0) -> Tensor:
    """(n_rows, n_keys) bool, True where key j lies after query position start + i."""
    rows = torch.arange(start, start + n_rows, device=device).unsqueeze(1)
    return torch.arange(n_keys, device=device).unsqueeze(0) > rows


def masked_bias(bias: Tensor, causal: bool, start: int = 0) -> Tensor:
    """A float mask for a kernel that adds it to the logits: ``bias`` (..., t, n) for rows
    start..start+t-1, with MASKED above the diagonal when ``causal``; differentiable in ``bias``."""
    if not causal:
        return bias
    return bias.masked_fill(causal_mask(bias.shape[-2], bias.shape[-1], bias.device, start), MASKED)


def check_documents(documents: Tensor, batch: int, seq: int, name: str = "documents") -> None:
    """Per-token document ids of packed rows: an integer tensor (batch, seq)."""
    if not isinstance(documents, Tensor) or documents.dtype not in (torch.int64, torch.int32):
        kind = documents.dtype if isinstance(documents, Tensor) else type(documents).__name__
        raise InputError(f"{name} must be an integer tensor (batch, seq) of document ids, got {kind}")
    if tuple(documents.shape) != (batch, seq):
        raise InputError(f"{name} must have shape (batch, seq) = {(batch, seq)}, got {tuple(documents.shape)}")


def check_packed(x: Tensor, positions: Tensor | None, documents: Tensor | None, cache: object | None) -> None:
    """The rule of a mixer's packed input: ``documents`` (batch, seq) ints come with ``positions`` (each
    document's own, from 0) and only in a full pass (a decoding cache holds one sequence per row)."""
    if documents is None:
        return
    if positions is None:
        raise InputError("documents (packed rows) need positions too: each token's position in its own document")
    if cache is not None:
        raise InputError("documents (packed rows) are for full forward passes; decoding with a cache takes one "
                         "sequence per row")
    check_documents(documents, x.shape[0], x.shape[1])


def document_mask(rows: Tensor, keys: Tensor | None = None) -> Tensor:
    """(B, 1, t, n) bool, True where key j belongs to another document than query i: ``rows`` (B, t) the
    queries' document ids, ``keys`` (B, n) the keys' (None: the rows', self-attention)."""
    keys = rows if keys is None else keys
    return (rows.unsqueeze(-1) != keys.unsqueeze(-2)).unsqueeze(1)


def combined_mask(n_rows: int, n_keys: int, causal: bool, padding: Tensor | None, device: torch.device, start: int = 0,
                  documents: Tensor | None = None) -> Tensor | None:
    """Broadcastable to (B, H, n_rows, n_keys): causal (1, 1, t, n) | padding (B, 1, 1, n) | another document
    (B, 1, t, n; ``documents`` (B, n) the ids of one packed row's tokens, rows and keys alike), or None."""
    mask = causal_mask(n_rows, n_keys, device, start)[None, None] if causal else None
    if padding is not None:
        pad = padding[:, None, None, :]
        mask = pad if mask is None else mask | pad
    if documents is not None:
        other = document_mask(documents[:, start : start + n_rows], documents[:, :n_keys])
        mask = other if mask is None else mask | other
    return mask


def masked_softmax(logits: Tensor, mask: Tensor | None) -> Tensor:
    """Softmax over the last axis with masked entries at weight 0; fully masked rows give zeros, not NaN."""
    if mask is None:
        return torch.softmax(logits, dim=-1)
    empty = mask.all(dim=-1, keepdim=True)
    logits = logits.masked_fill(mask, MASKED).masked_fill(empty, 0.0)
    return torch.softmax(logits, dim=-1).masked_fill(empty, 0.0)


def masked_softmax_(logits: Tensor) -> Tensor:
    """Softmax over the last axis of logits that are already -inf where masked, in place; a row that
    is -inf everywhere (no key to attend to) gives zeros."""
    empty = torch.isneginf(logits.amax(-1, keepdim=True))
    return torch.softmax(logits.masked_fill_(empty, 0.0), dim=-1).masked_fill_(empty, 0.0)


def allowed_keys(padding: Tensor, causal: bool, n_rows: int, start: int = 0,
                 documents: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    """For a kernel that takes a bool mask (True = may attend): the mask (B, 1, n_rows|1, n) and the
    rows without any key (B, 1, n_rows|1, 1), which the mask lets see every key (so the kernel gives
    no NaN) and whose output the caller sets to zero. ``padding`` (B, n) bool, True = padding;
    ``documents``: the document ids (rows (B, n_rows), keys (B, n)) of packed rows (``document_mask``)."""
    allowed = ~padding[:, None, None, :]
    if causal:
        allowed = allowed & ~causal_mask(n_rows, padding.shape[1], padding.device, start)
    if documents is not None:
        allowed = allowed & ~document_mask(*documents)
    empty = ~allowed.any(dim=-1, keepdim=True)
    return allowed | empty, empty
