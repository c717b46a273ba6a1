"""synthesizer: the Synthesizer attention family (Tay et al.) in PyTorch.

The public names below are imported on first use (PEP 562): ``import synthesizer`` and the torch-free parts
of the package (the report, the error types, the run folder's file names) import no torch.
"""

from .lazy import lazy_exports

__version__ = "0.3.0.dev0"
__all__ = ["AttentionCache", "SynthesizerAttention", "build_mixer", "parse_kind", "register_component", "__version__"]

__getattr__, __dir__ = lazy_exports(__name__, {name: "attention" for name in __all__ if name != "__version__"})
