"""What a layer's components hand a kernel."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

# Batch-shared additive logits kept as terms: ((w_c or None, B_c), ...), each B_c (H, n, n) (e.g. R of a
# random synthesizer) and w_c its mixture weight, broadcastable to (H, 1, 1) (one per head, or one in
# all), or None for weight 1. Kernels that take the terms apart form the sum block by block.
Terms = tuple[tuple[Tensor | None, Tensor], ...]


def kernel_dtype(t: Tensor) -> torch.dtype:
    """The dtype a kernel that runs its own products (triton, flex) computes in: autocast's where
    autocast is on for t's device (q may have come out of a product with a float32 mixture weight,
    dense's k is its float32 key matrix), else t's. (Both callers need torch >= 2.6, which takes
    the device type in these calls.)"""
    device = t.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return t.dtype


def as_terms(bias: Tensor | Terms | None) -> Terms:
    """A summed bias (H, n, n) as one unweighted term; terms as they are; None as no terms."""
    if bias is None:
        return ()
    return ((None, bias),) if isinstance(bias, Tensor) else tuple(bias)


def bias_rows(terms: Terms, s: int, e: int, m: int) -> Tensor | None:
    """Rows s..e-1, keys 0..m-1 of ``sum_c w_c B_c``: (H, e-s, m), or None without terms (a view of
    B_0 for one unweighted term: do not write into it)."""
    total = None
    for w, b in terms:
        whole = s == 0 and e == b.shape[-2] and m == b.shape[-1]
        part = b if whole else b[:, s:e, :m]  # a needless slice's backward would allocate a zero (H, n, n)
        part = part if w is None else part * w.reshape(-1, 1, 1)
        total = part if total is None else total + part
    return total


@dataclass
class Scores:
    """The logits of a layer in the form its kernel takes (mixture weights already folded in, or kept
    beside their terms).

    * ``logits`` (B|1, H, t, n): materialised logits of rows ``start..start+t-1`` (kernel ``reference``);
    * ``q`` (B, H, t, d_qk), ``k`` (B, H, n, d_qk): features whose product ``q_weight * q k^T`` is
      the per-example part (``q_weight``: the mixture weight of a lone feature component, 1 or H
      values, else None: each component's weight already in its q, or in its k where that k is shared by
      the batch), and ``terms`` the batch-shared additive part
      (``fused``, ``fused_bias``, ``blockwise``; no scaling is applied to ``q k^T``);
    * ``terms`` alone: the whole logits of an input-independent layer (``shared``, which takes their
      sum, ``bias()``);
    * ``documents`` (B, n) ints or None: the document of every token of packed rows, whose keys of another
      document the kernel masks (``masks.document_mask``). Only the kernels ``dispatch.PER_TOKEN`` names
      are handed packed rows; the others never see it set.
    """

    logits: Tensor | None = None
    q: Tensor | None = None
    k: Tensor | None = None
    q_weight: Tensor | None = None
    terms: Terms = ()
    start: int = 0
    documents: Tensor | None = None

    def weighted_q(self) -> Tensor | None:
        """``q`` times ``q_weight`` (the features' mixture weight, 1 or H values), for a kernel that
        does not apply the weight itself."""
        if self.q is None or self.q_weight is None:
            return self.q
        return self.q * self.q_weight.reshape(-1, 1, 1)

    def bias(self) -> Tensor | None:
        """``sum_c w_c B_c`` (H, n, n), differentiable; None without terms."""
        if not self.terms:
            return None
        n_rows, n_keys = self.terms[0][1].shape[-2:]
        return bias_rows(self.terms, 0, n_rows, n_keys)
