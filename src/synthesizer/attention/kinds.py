"""Parsing of attention ``kind`` strings: components, aliases and mixtures.

A mixture's components are kept in one canonical order, whatever order the user wrote them in,
so that ``"vanilla+random"``, ``"random+vanilla"`` and ``"R+V"`` name the same layer: the same
``kind`` string, the same parameter names and the same meaning of every entry of ``alpha``.
The order (``COMPONENTS``) goes from the least to the most input-dependent logits: position only
(``random``, ``fixed_random``, ``factorized_random``), the token itself (``dense``,
``factorized_dense``), token pairs (``vanilla``). It keeps the project's names as written:
``random+vanilla``, ``dense+vanilla``, ``random+dense``.
"""

from __future__ import annotations

# The canonical order of components in a mixture (see above).
COMPONENTS = ("random", "fixed_random", "factorized_random", "dense", "factorized_dense", "vanilla")
ALIASES = {
    "v": "vanilla",
    "d": "dense",
    "r": "random",
    "rfix": "fixed_random",
    "fd": "factorized_dense",
    "fr": "factorized_random",
}
_SHORT = {"rfix": "Rfix"}  # how the error messages spell an alias when upper case would mislead
# Components whose logits do not depend on the input at all.
INPUT_INDEPENDENT = frozenset({"random", "fixed_random", "factorized_random"})


def allowed_kinds_text() -> str:
    alias = {name: _SHORT.get(a, a.upper()) for a, name in ALIASES.items()}
    names = ", ".join(f"{c} ({alias[c]})" for c in COMPONENTS)
    return f"one of {names}, or a '+'-joined set of distinct components such as 'random+vanilla'"


def parse_kind(kind: str) -> tuple[str, ...]:
    """Turn ``"vanilla+R"`` into ``("random", "vanilla")``: full names, in the canonical order of
    ``COMPONENTS`` whatever the order written. Raises ValueError on anything else."""
    if not isinstance(kind, str) or not kind.strip():
        raise ValueError(f"attention kind must be a non-empty string, got {kind!r}; allowed: {allowed_kinds_text()}")
    parts = [p.strip().lower() for p in kind.split("+")]
    components = []
    for part in parts:
        name = ALIASES.get(part, part)
        if name not in COMPONENTS:
            raise ValueError(f"unknown attention component {part!r} in kind {kind!r}; allowed: {allowed_kinds_text()}")
        if name in components:
            raise ValueError(f"attention kind {kind!r} repeats the component {name!r}; each component may appear once")
        components.append(name)
    return tuple(sorted(components, key=COMPONENTS.index))
