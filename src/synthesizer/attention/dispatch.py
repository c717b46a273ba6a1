"""Which kernel a layer runs, chosen from its components' forms.

The kernels (``ops/``), fastest first: the measured ranking on CPU (torch 2.13, forward+backward,
d_model 512, 8 heads, seq 1024; see the README's benchmark table, reproduced by
``python -m synthesizer.bench attention``):
- input-independent components only: ``shared`` (one softmax per head, one matmul for the batch),
  ~0.4x vanilla;
- dot products of features only (dense, factorized_random, vanilla and their mixtures): ``fused``
  (one scaled_dot_product_attention call over concatenated features) beats ``blockwise``;
- features mixed with a batch-shared bias (random): ``fused_bias`` (the fused kernel's forward with
  ``w * R`` as a float mask, then one blockwise backward pass for dq, dk, dv and the gradient of R
  together: 1.51x / 1.88x the plain layer for random+vanilla at seq 1024 / 2048, against 1.81x /
  2.76x for the kernel's backward plus a second pass, measured side by side; see ``ops/fused_bias``)
  beat ``blockwise`` (our
  query-blocked attention) in the benchmark command's run (batch 8, seq 1024/2048, 2 threads:
  random+vanilla 2.1x/3.0x the plain layer against 4.0x/5.7x; random+dense 1.8x/2.6x against
  2.6x/4.3x). The reference path was as fast or faster there (2.0x/2.1x) but keeps (B, H, n, n)
  tensors: 15x the plain layer's peak memory at seq 2048, against 2.7x, so it is not the default.
  ``fused_bias`` hands over to ``blockwise`` where its kernel cannot run (dropout while training,
  non-CPU devices);
- ``factorized_dense`` alone: ``factorized_dense`` (its logits generated block by block from the
  per-token factors): about the reference path's time at seq 1024, slower at 2048 (2.5x the plain layer), but 1.8x the plain layer's peak memory at seq
  2048 against 11.3x (figures in ``ops/factorized_dense.py``);
- anything else (mixtures with ``factorized_dense``, a registered component with general logits):
  ``reference``.

Each kernel states once which layers it applies to (``applies``); ``running_path`` is the one place
that decides what a forward pass runs: the layer's ``forward`` and its ``path`` both ask it, so what
``path`` reports is what runs.
"""

from __future__ import annotations

from types import ModuleType

import torch

from . import registry
from .ops import blockwise, factorized_dense, fused, fused_bias, reference, shared

# The kernels in the ranking above; the first that applies is the default.
KERNELS: dict[str, ModuleType] = {k.NAME: k for k in (shared, fused, fused_bias, blockwise, factorized_dense, reference)}
IMPLS = ("auto", "reference", "shared", "fused", "fused_bias", "blockwise", "factorized_dense")


def applicable_paths(components: tuple[str, ...]) -> list[str]:
    """Every path that computes a layer of these components (full names), the fastest first."""
    specs = [registry.spec(c) for c in components]
    return [name for name, kernel in KERNELS.items() if kernel.applies(specs)]


def choose_path(components: tuple[str, ...], impl: str = "auto") -> str:
    """The path ``impl`` asks for ("auto": the fastest that applies), or "invalid" if it does not apply.
    What a forward pass runs also depends on the mode and device: see ``running_path``."""
    if impl != "auto":
        return impl if impl in applicable_paths(components) else "invalid"
    return applicable_paths(components)[0]


def running_path(components: tuple[str, ...], impl: str, *, training: bool, dropout: float,
                 device: torch.device) -> str:
    """The path a full forward pass runs: ``choose_path``, except that a kernel that cannot run in
    this mode on this device (its ``runs``) hands over to its ``FALLBACK``. Every path computes in
    the input's dtype: float16 and bfloat16 run on all of them on CPU."""
    path = choose_path(components, impl)
    kernel = KERNELS.get(path)
    if kernel is None:  # "invalid": the layer refuses such an impl when it is built
        return path
    runs = getattr(kernel, "runs", None)
    if runs is not None and not runs(device, training, dropout):
        return kernel.FALLBACK
    return path
