"""Hidden states and attention maps of a model's forward passes, on request.

``record(model, hidden_states=True, attentions=True)`` is a context manager: the forward passes run
inside it fill the returned ``Recording`` per stack of the model (``"blocks"`` for the language model
and the classifier; ``"encoder"`` and ``"decoder"`` for the encoder-decoder, ``"cross"`` for its
cross-attention maps). Outside it nothing is recorded and every model runs as it always does.

* ``hidden_states[stack]``: the input of every block (the embeddings, then each block's output) and,
  last, the stack's output after its final LayerNorm: ``n_layers + 1`` tensors (B, n, d).
* ``attentions[stack]``: per block, the softmax attention probabilities the block used,
  (B, H, t, n_keys) (``n_keys`` counts the cached positions when decoding). Recording them runs the
  reference kernel, which materialises them (the same function as the fast paths, up to rounding).
  Every Synthesizer kind has them; a baseline without an attention matrix (``linformer``,
  ``lightconv``, ``dynamicconv``, ``none``) is a ValueError naming it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from torch import Tensor, nn

from ..errors import InputError

# (blocks, final norm) attribute names of the stacks a model may have
STACKS = {"blocks": "ln_f", "encoder": "ln_enc", "decoder": "ln_dec"}


@dataclass
class Recording:
    """What the forward passes inside ``record`` produced, per stack (see the module docstring)."""

    hidden_states: dict[str, list[Tensor]] = field(default_factory=dict)
    attentions: dict[str, list[Tensor]] = field(default_factory=dict)


def _stacks(model: nn.Module) -> dict[str, tuple[nn.ModuleList, nn.Module]]:
    stacks = {name: (getattr(model, name), getattr(model, norm)) for name, norm in STACKS.items()
              if isinstance(getattr(model, name, None), nn.ModuleList)}
    if not stacks:
        raise ValueError(f"{type(model).__name__} has none of the block stacks {', '.join(STACKS)} to record")
    return stacks


def _maps_of(model: nn.Module, mixer: nn.Module) -> nn.Module:
    if not hasattr(mixer, "attention_maps"):
        kind = getattr(getattr(model, "config", None), "attention", type(mixer).__name__)
        raise InputError(f"attention maps: attention {kind!r} ({type(mixer).__name__}) has no attention matrix to "
                         "return; every Synthesizer kind (random, dense, vanilla and their mixtures) has one")
    return mixer


@contextmanager
def record(model: nn.Module, hidden_states: bool = False, attentions: bool = False) -> Iterator[Recording]:
    """Record ``model``'s hidden states and/or attention maps during the forward passes inside the block."""
    recording, hooks, mixers = Recording(), [], []
    try:
        for name, (blocks, norm) in _stacks(model).items():
            if hidden_states:
                states = recording.hidden_states.setdefault(name, [])
                for block in blocks:
                    hooks.append(block.register_forward_pre_hook(lambda _, args, out=states: out.append(args[0])))
                hooks.append(norm.register_forward_hook(lambda _, args, result, out=states: out.append(result)))
            if attentions:
                mixers += [(_maps_of(model, block.attn), recording.attentions.setdefault(name, [])) for block in blocks]
                if name == "decoder":
                    mixers += [(block.cross, recording.attentions.setdefault("cross", [])) for block in blocks]
        for mixer, maps in mixers:
            mixer.attention_maps = maps
        yield recording
    finally:
        for hook in hooks:
            hook.remove()
        for mixer, _ in mixers:
            mixer.attention_maps = None


__all__ = ["Recording", "STACKS", "record"]
