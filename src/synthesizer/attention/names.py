"""The attention kinds' names, free of torch: the built-in components in their canonical order, their
aliases, the paper's variants, how a kind string joins components and layers, and the position schemes.

Everything that spells a kind reads them here: the registry registers the built-in components by these
names (``registry.py``), the parser joins and splits with these separators (``kinds.py``), and the
report, the presets, the benchmarks and the demo list the paper's kinds from here. It imports nothing,
so the report reads it without importing torch (``attention/__init__`` imports its names lazily).
"""

from __future__ import annotations

# The built-in components in the canonical order of a mixture, from the least to the most input-dependent
# logits (see kinds.py), each with the short alias that messages and kind strings may use.
BUILTIN_COMPONENTS = ("random", "fixed_random", "factorized_random", "dense", "factorized_dense", "vanilla")
BUILTIN_ALIASES = {"random": "R", "fixed_random": "Rfix", "factorized_random": "FR", "dense": "D",
                   "factorized_dense": "FD", "vanilla": "V"}

# The paper's variants (Tay et al., Table 2), in its order, the one list every report, benchmark and
# demo uses: the pure kinds (vanilla, the Transformer, first), then its mixtures (canonical names).
PAPER_PURE = ("vanilla", "fixed_random", "random", "factorized_random", "dense", "factorized_dense")
PAPER_MIXTURES = ("random+dense", "dense+vanilla", "random+vanilla")
PAPER_KINDS = PAPER_PURE + PAPER_MIXTURES
# the stacks with a kind per layer that the hybrid study trains (comparison/presets.py), named here so that the
# plots of every report give each one a colour of its own
HYBRID_STACKS = ("random,vanilla", "vanilla,random,random,random", "random,vanilla,random,random",
                 "random,random,vanilla,random", "random,random,random,vanilla")

# Between the components of a mixture ("random+vanilla"; kinds.py parses it) and between the layers' kinds
# of a model with a kind per layer ("random,vanilla"; models/config.py parses it).
COMPONENT_SEPARATOR = "+"
LAYER_SEPARATOR = ","

# What a model's ``positions`` may be: absolute embeddings added to the tokens, a scheme of the
# dot-product component (positions.py computes them), or nothing at all.
ABSOLUTE = ("learned", "sinusoidal")
LAYER_SCHEMES = ("rope", "relative", "alibi")  # what SynthesizerAttention(positions=...) takes besides "none"
BIAS_SCHEMES = ("relative", "alibi")
MODEL_POSITIONS = (*ABSOLUTE, *LAYER_SCHEMES, "none")


def layer_parts(text: str) -> list[str]:
    """The layers' kinds of a per-layer spelling as written, one a layer of its pattern
    (``"random,vanilla"`` -> ``["random", "vanilla"]``); one kind gives itself."""
    return [part.strip() for part in text.split(LAYER_SEPARATOR)]
