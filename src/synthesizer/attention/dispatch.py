"""Which computation a layer runs, chosen from its components.

The order below is the measured ranking on CPU (torch 2.13, forward+backward, d_model 512, 8 heads,
seq 1024; see the README's benchmark table, reproduced by ``python -m synthesizer.bench attention``):
- input-independent kinds: ``shared`` (one softmax per head, one matmul for the batch), ~0.4x vanilla;
- dot-product kinds (dense, factorized_random, vanilla and their mixtures): ``fused``
  (one scaled_dot_product_attention call over concatenated features) beats ``blockwise``;
- mixtures with ``random``: ``fused_bias`` (the fused kernel with ``w * R`` detached as a float
  mask, plus a blockwise pass for the gradient of R) beat ``blockwise`` (our query-blocked
  attention) in the benchmark command's run (batch 8, seq 1024/2048, 2 threads: random+vanilla
  2.1x/3.0x the plain layer against 4.0x/5.7x; random+dense 1.8x/2.6x against 2.6x/4.3x). The
  reference path was as fast or faster there (2.0x/2.1x) but keeps (B, H, n, n) tensors: 15x the
  plain layer's peak memory at seq 2048, against 2.7x, so it is not the default. ``fused_bias``
  hands over to ``blockwise`` where its kernel cannot run (dropout while training, non-CPU devices);
- ``factorized_dense``: only the reference path.

``running_path`` is the one place that decides what a forward pass runs: the layer's ``forward``
and its ``path`` both ask it, so what ``path`` reports is what runs.
"""

from __future__ import annotations

import torch

from . import fused_bias
from .kinds import INPUT_INDEPENDENT

IMPLS = ("auto", "reference", "shared", "fused", "fused_bias", "blockwise")
DOT_PRODUCT = frozenset({"vanilla", "dense", "factorized_random"})
RANDOM = frozenset({"random", "fixed_random"})


def applicable_paths(components: tuple[str, ...]) -> list[str]:
    """Every path that computes this kind, the fastest first."""
    parts = set(components)
    paths = []
    if parts <= INPUT_INDEPENDENT:
        paths.append("shared")
    if parts <= DOT_PRODUCT:
        paths.append("fused")
    if parts & DOT_PRODUCT and parts & RANDOM and parts <= DOT_PRODUCT | RANDOM:
        paths.append("fused_bias")
    if parts & DOT_PRODUCT and parts <= DOT_PRODUCT | RANDOM:
        paths.append("blockwise")
    return paths + ["reference"]


def choose_path(components: tuple[str, ...], impl: str = "auto") -> str:
    """The path ``impl`` asks for ("auto": the fastest that applies), or "invalid" if it does not apply.
    What a forward pass runs also depends on the mode and device: see ``running_path``."""
    if impl != "auto":
        return impl if impl in applicable_paths(components) else "invalid"
    return applicable_paths(components)[0]


def running_path(components: tuple[str, ...], impl: str, *, training: bool, dropout: float,
                 device: torch.device) -> str:
    """The path a full forward pass runs: ``choose_path``, except that ``fused_bias`` becomes
    ``blockwise`` where its kernel cannot run (dropout while training: the kernel has no dropout
    with a float mask; a device without the CPU kernel). Every path computes in the input's dtype:
    float16 and bfloat16 run on all of them on CPU."""
    path = choose_path(components, impl)
    if path == "fused_bias" and ((training and dropout > 0) or not fused_bias.available(device)):
        return "blockwise"
    return path
