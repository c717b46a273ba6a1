"""Which computation a layer runs, chosen from its components.

The order below is the measured ranking on CPU (torch 2.13, forward+backward, d_model 512, 8 heads,
seq 1024; see the README's benchmark table, reproduced by ``python -m synthesizer.bench attention``):
- input-independent kinds: ``shared`` (one softmax per head, one matmul for the batch), ~0.4x vanilla;
- dot-product kinds (dense, factorized_random, vanilla and their mixtures): ``fused``
  (one scaled_dot_product_attention call over concatenated features) beats ``blockwise``;
- mixtures with ``random``: ``fused_bias`` (the fused kernel with ``w * R`` detached as a float
  mask, plus a blockwise pass for the gradient of R) beats ``blockwise`` (our query-blocked
  attention) when the other part is one dot product no wider than a head (``random+vanilla``:
  1.57x vs 1.78x the plain layer at seq 1024, 1.82x vs 1.99x at 2048); with ``dense`` in the mix
  the fused kernel would need padded values and ``blockwise`` wins (1.50x vs 1.72x). Both keep
  memory O(B * H * block * n), far below the reference path's (B, H, n, n) tensors. ``fused_bias``
  hands over to ``blockwise`` where its kernel cannot run (dropout while training, non-CPU devices);
- ``factorized_dense``: only the reference path.
"""

from __future__ import annotations

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
    dot = parts & DOT_PRODUCT
    if parts & RANDOM and dot and parts <= DOT_PRODUCT | RANDOM:
        narrow = dot in ({"vanilla"}, {"factorized_random"})  # features fit one head: no padded values
        paths += ["fused_bias", "blockwise"] if narrow else ["blockwise", "fused_bias"]
    elif dot and parts <= DOT_PRODUCT:
        paths.append("blockwise")
    return paths + ["reference"]


def choose_path(components: tuple[str, ...], impl: str = "auto") -> str:
    if impl != "auto":
        return impl if impl in applicable_paths(components) else "invalid"
    return applicable_paths(components)[0]
