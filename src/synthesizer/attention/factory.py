"""Build a self-attention layer ("mixer") from its kind string: a Synthesizer kind or a baseline.

Every mixer has the constructor ``Cls(d_model, n_heads, max_len, causal=False, dropout=0.0, **options)``
(SynthesizerAttention takes ``kind`` as well) and the forward ``(x, key_padding_mask=None, cache=None)``,
so models never need to know which one they hold.
"""

from __future__ import annotations

import importlib
import inspect

from torch import nn

from ..errors import InputError
from . import registry
from .dispatch import check_impl_name
from .kinds import Kind, UnknownComponent, allowed_kinds_text, parse_kind
from .synthesizer import SynthesizerAttention

# Baselines live beside the Synthesizer layers; imported only when asked for, so that a missing
# optional dependency of one baseline never breaks the others.
BASELINES = {
    "linformer": ("synthesizer.attention.linformer", "Linformer", "LinformerAttention"),
    "lightconv": ("synthesizer.attention.lightconv", "LightweightConv"),
    "dynamicconv": ("synthesizer.attention.dynamicconv", "DynamicConv"),
    "none": ("synthesizer.attention.none", "NoMixing"),  # the floor: no mixing between tokens at all
}
SYNTHESIZER_OPTIONS = ("k", "fd_split", "dense_per_head", "mix_per_head", "impl")
registry.reserve(*BASELINES)  # a component may not take a baseline's name


def allowed_mixers_text() -> str:
    return f"{allowed_kinds_text()}; or a baseline: {', '.join(BASELINES)}"


def resolve_kind(kind: str | Kind) -> Kind | str:
    """``kind`` parsed once: a ``Kind`` for a Synthesizer kind (``"R+V"`` -> ``Kind(("random", "vanilla"))``),
    or a baseline's name; ValueError listing every allowed mixer."""
    if isinstance(kind, str) and kind.strip().lower() in BASELINES:
        return kind.strip().lower()
    try:
        return parse_kind(kind)
    except UnknownComponent as err:
        raise InputError(f"unknown attention kind {kind!r} (no component {err.part.lower()!r}); "
                         f"allowed: {allowed_mixers_text()}") from None
    except InputError as err:
        if isinstance(kind, str) and kind.strip():
            raise  # a repeated component
        raise InputError(f"unknown attention kind {kind!r}; allowed: {allowed_mixers_text()}") from err


def check_kind(kind: str | Kind) -> str:
    """The canonical text of ``kind`` (``"R+V"`` and ``"vanilla+random"`` -> ``"random+vanilla"``: full names in
    the canonical order), what configs store; ValueError listing every allowed kind."""
    return str(resolve_kind(kind))


def _baseline_class(name: str) -> type[nn.Module]:
    module, *classes = BASELINES[name]  # the class names that module may use, preferred first
    try:
        found = importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"the {name!r} baseline ({module}) could not be imported: {err}") from err
    for cls in classes:
        if hasattr(found, cls):
            return getattr(found, cls)
    raise ImportError(f"the {name!r} baseline module {module} defines none of {', '.join(classes)}")


def _option_names(kind: str) -> tuple[str, ...]:
    if kind not in BASELINES:
        return SYNTHESIZER_OPTIONS
    fixed = {"self", "d_model", "n_heads", "max_len", "causal", "dropout"}
    params = inspect.signature(_baseline_class(kind).__init__).parameters.values()
    return tuple(p.name for p in params if p.name not in fixed and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))


def check_options(kind: str | Kind, options: dict) -> None:
    """ValueError naming any option that the mixer ``kind`` does not take, with the ones it does."""
    kind = resolve_kind(kind)
    allowed = _option_names(kind)
    for name in options:
        if name not in allowed:
            raise InputError(f"unknown option {name!r} for attention {str(kind)!r}; allowed options: {', '.join(allowed) or 'none'}")
    if isinstance(kind, Kind) and "impl" in options:
        check_impl_name(options["impl"])


def takes_packed(kind: str | Kind) -> bool:
    """Whether the mixer of ``kind`` takes packed rows (``documents``): every synthesizer kind, and a baseline
    whose forward takes them (``none``; a convolution or Linformer would mix tokens across documents)."""
    kind = resolve_kind(kind)
    if isinstance(kind, Kind):
        return True
    return "documents" in inspect.signature(_baseline_class(kind).forward).parameters


def build_mixer(kind: str | Kind, d_model: int, n_heads: int, max_len: int, causal: bool = False, dropout: float = 0.0,
                positions: str = "none", **options) -> nn.Module:
    """A self-attention layer mapping (B, n, d_model) -> (B, n, d_model) for ``kind``.

    Synthesizer kinds (``"random+vanilla"``, aliases such as ``"R+V"``, components in any order: the layer
    keeps the canonical one, see ``resolve_kind``; or a parsed ``Kind``) give ``SynthesizerAttention``
    with options ``k``, ``fd_split``, ``dense_per_head``, ``mix_per_head``, ``impl``; ``"linformer"``,
    ``"lightconv"`` and ``"dynamicconv"`` give the baselines with their own options. ``positions``: the
    layer's scheme for its dot-product component (``SynthesizerAttention``); a baseline takes "none".
    """
    kind = resolve_kind(kind)
    check_options(kind, options)
    if isinstance(kind, str):  # a baseline
        if positions != "none":
            raise InputError(f"positions={positions!r} applies to a synthesizer layer's dot-product component; "
                             f"the {kind!r} baseline takes positions='none'")
        return _baseline_class(kind)(d_model, n_heads, max_len, causal=causal, dropout=dropout, **options)
    return SynthesizerAttention(d_model, n_heads, max_len, kind, causal=causal, dropout=dropout, positions=positions,
                                **options)
