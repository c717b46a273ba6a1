"""The paper's kinds are listed once (attention/kinds.py, from the registry's paper rows) and every
report, benchmark and demo default uses that list."""

from __future__ import annotations

from synthesizer.attention import registry
from synthesizer.attention.kinds import PAPER_KINDS, PAPER_MIXTURES, PAPER_PURE, parse_kind


def test_paper_kinds_come_from_the_registry_in_the_papers_order():
    rows = sorted((s.paper_row, s.name) for s in registry.specs() if s.builtin and s.paper_row is not None)
    assert PAPER_PURE == tuple(name for _, name in rows)
    assert PAPER_PURE[0] == "vanilla"  # the paper's Table 2 starts with the Transformer
    assert PAPER_MIXTURES == ("random+dense", "dense+vanilla", "random+vanilla")
    assert all(str(parse_kind(k)) == k for k in PAPER_MIXTURES)  # canonical names
    assert PAPER_KINDS == PAPER_PURE + PAPER_MIXTURES


def test_every_default_list_is_the_papers():
    from synthesizer import demo
    from synthesizer.bench import decode, layer, model
    from synthesizer.comparison import presets
    from synthesizer.report import claims, tables

    assert presets.DEFAULT_KINDS == tables.DEFAULT_KINDS == layer.DEFAULT_KINDS == demo.KINDS == PAPER_KINDS
    assert model.MODEL_KINDS == PAPER_PURE
    assert decode.DECODE_KINDS[: len(PAPER_PURE)] == PAPER_PURE
    assert claims.PURE_SYNTHESIZERS == tuple(k for k in PAPER_PURE if k != "vanilla")
