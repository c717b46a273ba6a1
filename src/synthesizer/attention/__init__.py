"""Attention layers: the Synthesizer family and its building blocks."""

from .cache import AttentionCache
from .kinds import ALIASES, COMPONENTS, parse_kind
from .synthesizer import SynthesizerAttention

__all__ = ["AttentionCache", "ALIASES", "COMPONENTS", "SynthesizerAttention", "parse_kind"]
