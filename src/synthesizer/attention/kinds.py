"""Attention ``kind`` strings, parsed once into a canonical :class:`Kind`.

A mixture's components are kept in one canonical order, whatever order the user wrote them in,
so that ``"vanilla+random"``, ``"random+vanilla"`` and ``"R+V"`` name the same layer: the same
``kind`` string, the same parameter names and the same meaning of every entry of ``alpha``.
The built-in order (``COMPONENTS``) goes from the least to the most input-dependent logits: position
only (``random``, ``fixed_random``, ``factorized_random``), the token itself (``dense``,
``factorized_dense``), token pairs (``vanilla``). It keeps the project's names as written:
``random+vanilla``, ``dense+vanilla``, ``random+dense``. Components added with
``register_component`` follow the built-in ones, in registration order (``registry.names()``).
"""

from __future__ import annotations

from ..errors import InputError
from . import registry
from .names import COMPONENT_SEPARATOR, LAYER_SEPARATOR, PAPER_KINDS, PAPER_MIXTURES, PAPER_PURE, layer_parts

# The names (names.py) are read from here too; the paper's mixtures are canonical (tests/attention).
__all__ = ["ALIASES", "COMPONENTS", "INPUT_INDEPENDENT", "Kind", "LAYER_SEPARATOR", "PAPER_KINDS", "PAPER_MIXTURES",
           "PAPER_PURE", "UnknownComponent", "allowed_kinds_text", "layer_parts", "parse_kind"]

# The built-in components in the canonical order of a mixture (see above), and their aliases.
COMPONENTS = tuple(s.name for s in registry.specs() if s.builtin)
ALIASES = {s.alias.lower(): s.name for s in registry.specs() if s.builtin}
# Built-in components whose logits do not depend on the input at all.
INPUT_INDEPENDENT = frozenset(s.name for s in registry.specs() if s.builtin and s.input_independent)


class Kind(tuple):
    """A parsed attention kind: its component names, in the canonical order. ``str()`` is the
    canonical kind string (``"random+vanilla"``). It compares equal to the plain tuple of names."""

    __slots__ = ()

    def __str__(self) -> str:
        return COMPONENT_SEPARATOR.join(self)

    def __repr__(self) -> str:
        return f"Kind({str(self)!r})"

    @property
    def components(self) -> tuple[str, ...]:
        return tuple(self)


def allowed_kinds_text() -> str:
    names = ", ".join(s.name if s.alias is None else f"{s.name} ({s.alias})" for s in registry.specs())
    return f"one of {names}, or a '+'-joined set of distinct components such as 'random+vanilla'"


def parse_kind(kind: str | Kind) -> Kind:
    """Turn ``"vanilla+R"`` into ``Kind(("random", "vanilla"))``: full names, in the canonical order
    whatever the order written. A ``Kind`` is returned as it is. Raises ValueError on anything else."""
    if isinstance(kind, Kind):
        return kind
    if not isinstance(kind, str) or not kind.strip():
        raise InputError(f"attention kind must be a non-empty string, got {kind!r}; allowed: {allowed_kinds_text()}")
    components = []
    for part in (p.strip() for p in kind.split(COMPONENT_SEPARATOR)):
        name = registry.resolve(part)
        if name is None:
            raise UnknownComponent(part, kind)
        if name in components:
            raise InputError(f"attention kind {kind!r} repeats the component {name!r}; each component may appear once")
        components.append(name)
    order = registry.names()
    return Kind(sorted(components, key=order.index))



class UnknownComponent(InputError):
    """A part of a kind string that names no component; ``part`` and ``kind`` say which."""

    def __init__(self, part: str, kind: str, allowed: str | None = None):
        self.part, self.kind = part, kind
        super().__init__(f"unknown attention component {part.lower()!r} in kind {kind!r}; "
                         f"allowed: {allowed or allowed_kinds_text()}")
