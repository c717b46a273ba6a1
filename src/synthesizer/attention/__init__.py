"""Attention layers: the Synthesizer family and its building blocks.

A mixture kind may list its components in any order; ``parse_kind`` returns them as a ``Kind`` in the
one canonical order (``COMPONENTS``: random, fixed_random, factorized_random, dense, factorized_dense,
vanilla; then components added with ``register_component``), so ``"vanilla+random"`` and ``"R+V"``
build the same ``"random+vanilla"`` layer.

The names below are imported on first use (PEP 562), so that :mod:`.names` (the kinds' names, which
the report reads) is imported without torch.
"""

from ..lazy import lazy_exports

__all__ = ["AttentionCache", "ALIASES", "COMPONENTS", "Kind", "SynthesizerAttention", "build_mixer", "parse_kind",
           "register_component"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "AttentionCache": "cache", "build_mixer": "factory", "ALIASES": "kinds", "COMPONENTS": "kinds", "Kind": "kinds",
    "parse_kind": "kinds", "register_component": "registry", "SynthesizerAttention": "synthesizer"})
