"""Candidate kernels: they compute a layer exactly (tested against the reference like every kernel) but were
measured fastest for no layer and length on a device's reference table, so ``impl="auto"`` does not pick them
there. A user still can (``impl=NAME``), and ``python -m synthesizer.bench dispatch`` times them beside the
ranked kernels, so that a table measured on another machine shows where one would win; it comes back into the
ranking when a measurement says so.

On CPU, from the reference machine's table (docs/bench/dispatch, batch 4, d_model 512, 8 heads, seq 128 to
2048, forward+backward and forward alone):

- ``sdpa_bias`` (random mixtures, one scaled_dot_product_attention call with ``w * R`` as a float mask):
  first in no entry, well behind ``fused_bias`` in training from seq 512 on (PyTorch's math kernel keeps
  (B, H, n, n) tensors on CPU), close to it in eval (the figures: docs/bench/measured-dispatch/README.md). It
  stays the CUDA default for these layers (``dispatch.CUDA_RANKING``), where its memory-efficient kernel gives
  the mask's gradient.

``blockwise`` also won no entry, but it is ``fused_bias``'s fallback (training with dropout, which the
table does not time), so it keeps its place in the ranking.
"""

from __future__ import annotations

# The kernels left out of the CPU ranking. CUDA has none (nothing has been timed on a GPU yet).
CPU_CANDIDATES = ("sdpa_bias",)


def candidates(device_type: str) -> tuple[str, ...]:
    """The candidate kernels on this device type: CPU's on every device type but CUDA, which has a ranking
    of its own (``dispatch.ranking``)."""
    return () if device_type == "cuda" else CPU_CANDIDATES
