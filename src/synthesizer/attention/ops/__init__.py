"""Attention kernels behind one signature, one file each, with the naive reference beside them.

Every kernel module has
* ``NAME``: the path name (``layer.path``, ``impl=``);
* ``NEEDS``: what the layer hands it in :class:`Scores` (``"logits"``, ``"features"`` or ``"bias"``);
* ``applies(components) -> bool``: whether it computes a layer of these components (their
  ``registry.ComponentSpec``s), read by the dispatcher; ``fused_bias``, ``triton_bias`` and
  ``flex_bias`` also have ``runs(device, training, dropout)`` and ``FALLBACK``, where their kernel
  cannot run, and the opt-in ones (``triton``, ``flex``) ``require()`` and ``APPLIES_TO``;
* ``attend(scores, v, padding, causal, dropout, training) -> (B, H, t, d_v)`` with v (B, H, n, d_v)
  and padding (B, n) bool (True = padding) or None.

``reference`` materialises the logits and is what every fast kernel is tested against. ``wide_qk``
computes the mixtures ``fused`` does, with q, k wider than v (chosen by the measured table where it won, see
``dispatch``). ``sdpa_bias`` computes the layers ``fused_bias`` does, on any device (the default on CUDA, a
candidate on CPU, see ``dispatch`` and ``candidates``);
``triton_bias`` and ``flex_bias`` are opt-in GPU paths for them (docs/gpu.md).
"""

from .scores import Scores

__all__ = ["Scores"]
