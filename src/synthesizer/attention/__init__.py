"""Attention layers: the Synthesizer family and its building blocks.

A mixture kind may list its components in any order; ``parse_kind`` returns them as a ``Kind`` in the
one canonical order (``COMPONENTS``: random, fixed_random, factorized_random, dense, factorized_dense,
vanilla; then components added with ``register_component``), so ``"vanilla+random"`` and ``"R+V"``
build the same ``"random+vanilla"`` layer.
"""

from .cache import AttentionCache
from .factory import build_mixer
from .kinds import ALIASES, COMPONENTS, Kind, parse_kind
from .registry import register_component
from .synthesizer import SynthesizerAttention

__all__ = ["AttentionCache", "ALIASES", "COMPONENTS", "Kind", "SynthesizerAttention", "build_mixer", "parse_kind",
           "register_component"]
