"""Attention layers: the Synthesizer family and its building blocks."""

from .cache import AttentionCache
from .factory import build_mixer
from .kinds import ALIASES, COMPONENTS, parse_kind
from .synthesizer import SynthesizerAttention

__all__ = ["AttentionCache", "ALIASES", "COMPONENTS", "SynthesizerAttention", "build_mixer", "parse_kind"]
