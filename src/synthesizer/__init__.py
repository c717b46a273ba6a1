"""synthesizer: the Synthesizer attention family (Tay et al.) in PyTorch."""

from .attention import AttentionCache, SynthesizerAttention, build_mixer, parse_kind, register_component

__version__ = "0.3.0.dev0"
__all__ = ["AttentionCache", "SynthesizerAttention", "build_mixer", "parse_kind", "register_component", "__version__"]
