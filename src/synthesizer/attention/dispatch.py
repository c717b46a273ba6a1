"""Which computation a layer runs: chosen from its components (sizes and device do not change the
ranking on the machines we measured; see ``synthesizer.bench`` for the figures)."""

from __future__ import annotations

from .kinds import INPUT_INDEPENDENT

IMPLS = ("auto", "reference", "shared", "fused", "fused_bias")
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
    if parts & RANDOM and parts & DOT_PRODUCT and parts <= DOT_PRODUCT | RANDOM:
        paths.append("fused_bias")
    return paths + ["reference"]


def choose_path(components: tuple[str, ...], impl: str = "auto") -> str:
    if impl != "auto":
        return impl if impl in applicable_paths(components) else "invalid"
    return applicable_paths(components)[0]
