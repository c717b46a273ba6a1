"""The measured dispatch table (``attention/dispatch_table.py``): how ``impl="auto"`` reads it, what it does
without one, the errors of a bad file, and the benchmark that writes it."""

import json

import pytest
import torch

from synthesizer.attention import SynthesizerAttention
from synthesizer.attention.dispatch import CPU_RANKING, KERNELS, applicable_paths, candidate_paths, choose_path
from synthesizer.attention.dispatch_table import (TABLE_ENV, DispatchTable, Entry, active_table, layer_key, shipped_table,
                                                  use_table)
from tests.tolerances import LAYER

DV = ("dense", "vanilla")


@pytest.fixture(autouse=True)
def no_table_after(monkeypatch):
    monkeypatch.setenv(TABLE_ENV, "none")
    use_table(None)
    yield
    use_table(None)


def write_table(path, entries, measured_at=None):
    path.write_text(json.dumps({"format": 1, "measured_at": measured_at or {"d_model": 32},
                                "entries": [e.as_json() for e in entries]}))
    return path


def entry(order, seq, mode="train", layer="dense+vanilla", device="cpu"):
    return Entry(layer, device, mode, seq, tuple(order), tuple(float(i + 1) for i in range(len(order))))


def test_auto_takes_the_fastest_kernel_of_the_entry_measured_nearest_the_length(tmp_path):
    use_table(write_table(tmp_path / "t.json", [entry(["fused", "wide_qk"], 128), entry(["wide_qk", "fused"], 1024)]))
    assert choose_path(DV, training=True, seq=100) == "fused"
    assert choose_path(DV, training=True, seq=2048) == "wide_qk"
    assert choose_path(DV, training=True, seq=362) == "fused" and choose_path(DV, training=True, seq=363) == "wide_qk"
    # no entry for this mode, or no length: the static ranking, whose first is fused
    assert choose_path(DV, training=False, seq=2048) == "fused" == choose_path(DV, training=True)


def test_a_kernel_that_does_not_apply_or_is_not_ranked_is_passed_over(tmp_path):
    use_table(write_table(tmp_path / "t.json", [entry(["fused_bias", "triton", "wide_qk"], 64)]))
    assert "fused_bias" not in applicable_paths(DV) and choose_path(DV, training=True, seq=64) == "wide_qk"


def test_a_layer_runs_the_kernel_its_path_at_names_and_computes_what_the_reference_does(tmp_path, monkeypatch):
    use_table(write_table(tmp_path / "t.json", [entry(["wide_qk", "fused"], 12), entry(["fused", "wide_qk"], 128)]))
    torch.manual_seed(0)
    layer = SynthesizerAttention(32, 2, 16, "dense+vanilla")
    reference = SynthesizerAttention(32, 2, 16, "dense+vanilla", impl="reference")
    reference.load_state_dict(layer.state_dict())
    assert layer.path_at(12) == "wide_qk" and layer.path_at(100) == "fused" and layer.path == "wide_qk"
    ran = []
    for name in ("wide_qk", "fused"):
        kernel, attend = KERNELS[name], KERNELS[name].attend
        monkeypatch.setattr(kernel, "attend", lambda *a, _f=attend, _n=name, **k: ran.append(_n) or _f(*a, **k))
    x = torch.randn(2, 12, 32)
    torch.testing.assert_close(layer(x), reference(x), rtol=LAYER.rtol, atol=LAYER.atol)
    assert ran == ["wide_qk"]


def test_the_environment_names_the_table_and_a_missing_one_means_the_static_ranking(tmp_path, monkeypatch):
    monkeypatch.setenv(TABLE_ENV, str(write_table(tmp_path / "t.json", [entry(["wide_qk"], 64)])))
    use_table(None)
    assert active_table().order("dense+vanilla", "cpu", "train", 64) == ("wide_qk",)
    assert active_table().order("dense+vanilla", "cuda", "train", 64) is None
    monkeypatch.setenv(TABLE_ENV, str(tmp_path / "absent.json"))
    use_table(None)
    with pytest.raises(ValueError, match=r"dispatch table .*absent\.json: cannot be read"):
        active_table()


@pytest.mark.parametrize("raw, message", [
    ({"entries": []}, "not a dispatch table of format 1"),
    ({"format": 1, "entries": [{"layer": "vanilla"}]}, r"entry 0: missing device, mode, seq, order, median_s"),
    ({"format": 1, "entries": [{"layer": "v", "device": "cpu", "mode": "fast", "seq": 8, "order": ["fused"],
                                "median_s": [1.0]}]}, r"entry 0: mode must be one of train, eval, got 'fast'"),
    ({"format": 1, "entries": [{"layer": "v", "device": "cpu", "mode": "eval", "seq": 0, "order": ["fused"],
                                "median_s": [1.0]}]}, r"entry 0: seq must be a positive integer"),
    ({"format": 1, "entries": [{"layer": "v", "device": "cpu", "mode": "eval", "seq": 8, "order": ["fused"],
                                "median_s": []}]}, r"entry 0: 'order' and 'median_s' must be"),
])
def test_a_bad_table_is_refused_with_its_file_and_entry(tmp_path, raw, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=message):
        DispatchTable.load(path)


def test_the_static_choice_keeps_the_first_place_unless_beaten_by_more_than_the_margin():
    from synthesizer.bench.dispatch import table_of

    def rows(fused, wide):
        return [{"layer": "dense+vanilla", "mode": "train", "seq": 64, "path": p, "static": p == "fused",
                 "median_s": m, "rank": r} for r, (p, m) in enumerate(sorted([("fused", fused), ("wide_qk", wide)],
                                                                              key=lambda pm: pm[1]), 1)]
    assert table_of(rows(1.0, 0.96), "cpu", {}, margin=0.05).entries[0].order == ("fused", "wide_qk")
    assert table_of(rows(1.0, 0.94), "cpu", {}, margin=0.05).entries[0].order == ("wide_qk", "fused")
    assert table_of(rows(1.0, 0.99), "cpu", {}, margin=0.0).entries[0].order == ("wide_qk", "fused")
    assert table_of(rows(0.9, 1.0), "cpu", {}, margin=0.05).entries[0].median_s == (0.9, 1.0)


def test_a_layer_far_from_the_tables_width_takes_the_static_ranking(tmp_path):
    use_table(write_table(tmp_path / "t.json", [entry(["wide_qk", "fused"], 16)], measured_at={"d_model": 32}))
    assert choose_path(DV, training=True, seq=16, width=64) == "wide_qk"  # within a factor 2
    assert choose_path(DV, training=True, seq=16, width=65) == "fused"  # more than 2x off: the static ranking
    assert choose_path(DV, training=True, seq=16, width=16) == "wide_qk" and choose_path(DV, training=True, seq=16,
                                                                                        width=15) == "fused"
    torch.manual_seed(0)
    assert SynthesizerAttention(32, 2, 16, "dense+vanilla").path == "wide_qk"
    assert SynthesizerAttention(128, 2, 16, "dense+vanilla").path == "fused"


def test_none_in_the_environment_turns_tables_off(monkeypatch):
    monkeypatch.setenv(TABLE_ENV, "none")
    use_table(None)
    assert active_table() is None and choose_path(DV, training=True, seq=2048) == applicable_paths(DV)[0]


def test_a_position_bias_is_part_of_the_layers_name():
    assert layer_key(DV) == "dense+vanilla" and layer_key(("vanilla",), True) == "vanilla+position_bias"


def test_the_benchmark_ranks_every_kernel_of_each_layer_and_writes_a_table_auto_reads(tmp_path, capsys):
    from synthesizer.bench.__main__ import main

    rows = main(["dispatch", "--quick", "--kinds", "vanilla", "random+vanilla", "--seqs", "8", "16", "--repeats", "1",
                 "--warmup", "0", "--threads", "1", "--out", str(tmp_path)])
    table = use_table(tmp_path / "dispatch_table.json")
    assert {(e.layer, e.mode, e.seq) for e in table.entries} == {
        (k, m, s) for k in ("vanilla", "random+vanilla") for m in ("train", "eval") for s in (8, 16)}
    for e in table.entries:
        components = tuple(e.layer.split("+"))
        assert sorted(e.order) == sorted(applicable_paths(components) + candidate_paths(components)), e
        # fastest first, but for the static ranking's choice, which leads unless beaten by more than the margin
        static = applicable_paths(tuple(e.layer.split("+")))[0]
        rest = [s for p, s in zip(e.order, e.median_s) if p != static]
        assert rest == sorted(rest), e
        if e.order[0] == static:
            assert min(e.median_s) >= e.median_s[0] * (1 - table.measured_at["margin"]), e
        else:
            assert e.median_s[0] < e.median_s[e.order.index(static)] * (1 - table.measured_at["margin"]), e
    first = next(e for e in table.entries if (e.layer, e.mode, e.seq) == ("random+vanilla", "train", 16))
    ranked = applicable_paths(("random", "vanilla"))  # a candidate kernel may lead an entry; auto passes it over
    assert choose_path(("random", "vanilla"), training=True, seq=16) == next(p for p in first.order if p in ranked)
    assert len(rows) == sum(len(e.order) for e in table.entries) and table.measured_at["d_model"] == 32
    assert "## Dispatch: the kernels of each layer, fastest first" in (tmp_path / "results.md").read_text()


def test_the_shipped_table_covers_every_paper_kind_and_every_default_kernel_is_first_somewhere():
    """The reference machine's table: an entry per paper kind, mode and length, naming kernels that compute the
    layer; each kernel of the CPU ranking is the fastest of some entry, or the fallback a winner hands over to
    (blockwise: dropout in training, which the table does not time), or the reference; the kernels that won
    nothing are candidates, which ``auto`` never picks."""
    from synthesizer.attention.candidates import candidates
    from synthesizer.attention.factory import resolve_kind
    from synthesizer.attention.names import PAPER_KINDS

    table = shipped_table()
    assert table is not None and table.measured_at["command"]
    seqs = sorted({e.seq for e in table.entries})
    for kind in PAPER_KINDS:
        components = tuple(resolve_kind(kind))
        for mode in ("train", "eval"):
            for seq in seqs:
                order = table.order(layer_key(components), "cpu", mode, seq)
                assert order and set(order) <= set(applicable_paths(components) + candidate_paths(components)), \
                    (kind, mode, seq)
    winners = table.winners()
    fallbacks = {KERNELS[name].FALLBACK for name in winners if KERNELS[name].FALLBACK}
    for name in CPU_RANKING:
        assert name in winners | fallbacks | {"reference"}, f"{name} wins no entry: make it a candidate"
    assert not winners & set(candidates("cpu"))
