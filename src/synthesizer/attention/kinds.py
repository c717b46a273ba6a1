"""Parsing of attention ``kind`` strings: components, aliases and mixtures."""

from __future__ import annotations

COMPONENTS = ("vanilla", "dense", "random", "fixed_random", "factorized_dense", "factorized_random")
ALIASES = {
    "v": "vanilla",
    "d": "dense",
    "r": "random",
    "rfix": "fixed_random",
    "fd": "factorized_dense",
    "fr": "factorized_random",
}
# Components whose logits do not depend on the input at all.
INPUT_INDEPENDENT = frozenset({"random", "fixed_random", "factorized_random"})


def allowed_kinds_text() -> str:
    names = ", ".join(f"{c} ({a})" for a, c in zip(("V", "D", "R", "Rfix", "FD", "FR"), COMPONENTS))
    return f"one of {names}, or a '+'-joined set of distinct components such as 'random+vanilla'"


def parse_kind(kind: str) -> tuple[str, ...]:
    """Turn ``"R+vanilla"`` into ``("random", "vanilla")``; raise ValueError on anything else."""
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
    return tuple(components)
