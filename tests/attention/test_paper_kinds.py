"""The kinds' names are spelled once (attention/names.py, no torch): the registry registers the built-in
components by them, and every report, benchmark and demo default uses the paper's list."""

from __future__ import annotations

from synthesizer.attention import registry
from synthesizer.attention import kinds, names
from synthesizer.attention.kinds import parse_kind
from synthesizer.attention.names import PAPER_KINDS, PAPER_MIXTURES, PAPER_PURE


def test_paper_kinds_come_from_the_registry_in_the_papers_order():
    rows = sorted((s.paper_row, s.name) for s in registry.specs() if s.builtin and s.paper_row is not None)
    assert PAPER_PURE == tuple(name for _, name in rows)
    assert PAPER_PURE[0] == "vanilla"  # the paper's Table 2 starts with the Transformer
    assert PAPER_MIXTURES == ("random+dense", "dense+vanilla", "random+vanilla")
    assert all(str(parse_kind(k)) == k for k in PAPER_MIXTURES)  # canonical names
    assert PAPER_KINDS == PAPER_PURE + PAPER_MIXTURES


def test_the_registry_registers_the_built_in_components_by_their_names():
    assert kinds.COMPONENTS == names.BUILTIN_COMPONENTS  # the canonical order of a mixture
    assert {s.name: s.alias for s in registry.specs() if s.builtin} == names.BUILTIN_ALIASES
    assert kinds.PAPER_KINDS is PAPER_KINDS and kinds.LAYER_SEPARATOR == names.LAYER_SEPARATOR == ","
    assert str(parse_kind("V+R")) == names.COMPONENT_SEPARATOR.join(("random", "vanilla"))


def test_every_default_list_is_the_papers():
    from synthesizer import demo
    from synthesizer.bench import decode, layer, model
    from synthesizer.comparison import presets
    from synthesizer.report import claims, tables

    assert presets.DEFAULT_KINDS == tables.DEFAULT_KINDS == layer.DEFAULT_KINDS == demo.KINDS == PAPER_KINDS
    assert model.MODEL_KINDS == PAPER_PURE
    assert decode.DECODE_KINDS[: len(PAPER_PURE)] == PAPER_PURE
    assert claims.PURE_SYNTHESIZERS == tuple(k for k in PAPER_PURE if k != "vanilla")
