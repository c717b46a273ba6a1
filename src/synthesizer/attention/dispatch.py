"""Which computation a layer runs, chosen from its components.

The order below is the measured ranking on CPU (torch 2.13, forward+backward, d_model 512, 8 heads,
seq 1024; see the README's benchmark table, reproduced by ``python -m synthesizer.bench attention``):
- input-independent kinds: ``shared`` (one softmax per head, one matmul for the batch), ~0.4x vanilla;
- dot-product kinds (dense, factorized_random, vanilla and their mixtures): ``fused``
  (one scaled_dot_product_attention call over concatenated features) beats ``blockwise``;
- mixtures with ``random``: ``blockwise`` (our query-blocked kernel, memory O(B*H*block*n)) is as
  fast as or faster than ``fused_bias`` (the fused call with a float mask that needs a gradient,
  which falls back to the math kernel and keeps (B, H, n, n) tensors) and the reference path;
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
    if parts & DOT_PRODUCT and parts <= DOT_PRODUCT | RANDOM:
        paths.append("blockwise")
    if parts & RANDOM and parts & DOT_PRODUCT and parts <= DOT_PRODUCT | RANDOM:
        paths.append("fused_bias")
    return paths + ["reference"]


def choose_path(components: tuple[str, ...], impl: str = "auto") -> str:
    if impl != "auto":
        return impl if impl in applicable_paths(components) else "invalid"
    return applicable_paths(components)[0]
