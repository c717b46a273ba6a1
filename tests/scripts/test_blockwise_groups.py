"""scripts/blockwise_groups.py: times the reference path and blockwise with and without example groups at
each shape, prints ratios to the reference, and leaves the kernel's group size as it found it."""

import importlib.util
from pathlib import Path

import pytest

from synthesizer.attention.ops import blockwise

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "blockwise_groups.py"


def load():
    spec = importlib.util.spec_from_file_location("blockwise_groups", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_it_times_every_variant_at_every_shape_and_prints_the_ratios(capsys):
    before = blockwise.GROUP_ELEMENTS
    medians = load().main(["--shapes", "3x8", "2x16", "--d-model", "8", "--heads", "2", "--repeats", "2"])
    assert blockwise.GROUP_ELEMENTS == before
    names = {"reference", "one example a step", "groups"}
    assert set(medians) == {(3, 8), (2, 16)} and all(set(m) == names and min(m.values()) > 0 for m in medians.values())
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("batch 3, seq 8: reference: ") and "(1.00x)" in lines[0]
    assert lines[1].startswith("batch 2, seq 16: ")


def test_a_malformed_shape_names_the_form(capsys):
    with pytest.raises(SystemExit):
        load().main(["--shapes", "16"])
    assert "a shape is BATCHxSEQ, such as 64x32; got '16'" in capsys.readouterr().err
