"""What a layer's components hand a kernel."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class Scores:
    """The logits of a layer in the form its kernel takes (mixture weights already folded in).

    * ``logits`` (B|1, H, t, n): materialised logits of rows ``start..start+t-1`` (kernel ``reference``);
    * ``q`` (B, H, t, d_qk), ``k`` (B, H, n, d_qk): features whose product ``q k^T`` is the
      per-example part, and ``bias`` (H, t, n) or None, the batch-shared additive part
      (``fused``, ``fused_bias``, ``blockwise``; no scaling is applied to ``q k^T``);
    * ``bias`` alone (H, n, n): the whole logits of an input-independent layer (``shared``).
    """

    logits: Tensor | None = None
    q: Tensor | None = None
    k: Tensor | None = None
    bias: Tensor | None = None
    start: int = 0
