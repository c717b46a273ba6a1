"""synthesizer: the Synthesizer attention family (Tay et al.) in PyTorch."""

from .attention import AttentionCache, SynthesizerAttention, parse_kind

__version__ = "0.1.0"
__all__ = ["AttentionCache", "SynthesizerAttention", "parse_kind", "__version__"]
