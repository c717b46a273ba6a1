"""Where a self-attention layer sits in a model, read from its module's name: the attention maps' key.

Its own module, free of matplotlib and torch: the comparison names the maps it reads out of a checkpoint
with it, and the plots place a map recorded without its place (older results) with it.
"""

from __future__ import annotations


def layer_place(name: str) -> tuple[str, int]:
    """(stack, 0-based layer index) of a self-attention module's name: ``"decoder.1.attn"`` -> ("decoder", 1),
    ``"blocks.0.attn"`` -> ("", 0) (a single stack: language model, classifier)."""
    parts = name.split(".")
    index = next((int(p) for p in parts if p.isdigit()), 0)
    stack = next((p for p in parts if p in ("encoder", "decoder")), "")
    return stack, index
