"""Attention layers: the Synthesizer family and its building blocks.

A mixture kind may list its components in any order; ``parse_kind`` returns them in the one
canonical order of ``COMPONENTS`` (random, fixed_random, factorized_random, dense, factorized_dense,
vanilla), so ``"vanilla+random"`` and ``"R+V"`` build the same ``"random+vanilla"`` layer.
"""

from .cache import AttentionCache
from .factory import build_mixer
from .kinds import ALIASES, COMPONENTS, parse_kind
from .synthesizer import SynthesizerAttention

__all__ = ["AttentionCache", "ALIASES", "COMPONENTS", "SynthesizerAttention", "build_mixer", "parse_kind"]
