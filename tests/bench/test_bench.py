"""The benchmark machinery at tiny sizes: commands, output files and formats, ratios, target verdicts.
Timings are never asserted (this machine is shared); only their structure is."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from synthesizer.bench import __main__ as bench_main
from synthesizer.bench import decode, layer, memory, model
from synthesizer.bench.decode import greedy_decode
from synthesizer.bench.timed_layers import layer_names
from synthesizer.bench.results import plot_layers, targets, targets_table, write_results
from synthesizer.bench.timing import interleaved_medians
from synthesizer.models import LanguageModel

PNG = b"\x89PNG\r\n\x1a\n"
TINY = {"batch": 1, "seq": 16, "layers": 1, "d_model": 16, "heads": 2, "vocab": 32, "repeats": 1, "warmup": 0}


@pytest.fixture
def tiny_presets(monkeypatch):
    monkeypatch.setattr(layer, "QUICK", {"batch": 1, "seqs": [8, 16], "d_model": 16, "heads": 2, "repeats": 1,
                                         "warmup": 0, "max_call_s": 30.0})
    sizes = {k: v for k, v in TINY.items() if k != "batch"} | {"batches": [1, 2]}
    monkeypatch.setattr(model, "QUICK", {"lm": dict(sizes), "classifier": dict(sizes)})
    monkeypatch.setattr(decode, "QUICK", dict(TINY, prompt=3, new_tokens=4))


def test_all_quick_writes_every_output(tiny_presets, tmp_path, capsys):
    out = tmp_path / "res"
    rows = bench_main.main(["all", "--quick", "--kinds", "vanilla", "random", "--out", str(out), "--threads", "1"])
    assert {r["bench"] for r in rows} == {"layer", "model", "decode"}
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert lines == json.loads(json.dumps(rows))
    with open(out / "results.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(rows) and {"kind", "fwd_bwd_s", "tokens_per_s", "cache_bytes", "torch", "threads"} <= set(table[0])
    assert (out / "layer_time.png").read_bytes()[:8] == PNG
    text = (out / "results.md").read_text()
    assert "## Targets" in text and "## Layer level" in text and "## Decoding" in text
    assert "python -m synthesizer.bench all --quick" in text and text in capsys.readouterr().out
    (out / "results.md").unlink()
    bench_main.main(["report", str(out)])  # redone from results.jsonl and run.json alone
    assert (out / "results.md").read_text() == text

    lay = [r for r in rows if r["bench"] == "layer"]
    names = {r["kind"] for r in lay}
    assert {"sdpa", "vanilla", "random", "linformer", "lightconv", "dynamicconv"} <= names
    assert {r["seq"] for r in lay} == {8, 16} and all(r["threads"] == 1 and r["torch"] == torch.__version__ for r in lay)
    for r in lay:
        assert r["forward_min_s"] <= r["forward_s"] <= r["forward_max_s"] and r["flops"] > 0 and r["params"] > 0
        assert r["peak_bytes"] is None or r["peak_bytes"] >= 0
    vanilla = next(r for r in lay if r["kind"] == "vanilla" and r["seq"] == 16)
    rnd = next(r for r in lay if r["kind"] == "random" and r["seq"] == 16)
    assert vanilla["fwd_bwd_vs_vanilla"] == 1.0
    assert rnd["fwd_bwd_vs_vanilla"] == pytest.approx(rnd["fwd_bwd_s"] / vanilla["fwd_bwd_s"])

    models = [r for r in rows if r["bench"] == "model"]
    assert {(r["task"], r["batch"], r["causal"]) for r in models} == {(t, b, t == "lm") for t in ("lm", "classifier")
                                                                      for b in (1, 2)}
    lm = {r["kind"]: r for r in models if r["task"] == "lm" and r["batch"] == 2}
    assert set(lm) == {"vanilla", "random", "lightconv", "dynamicconv"}  # linformer is encoder-only
    assert "linformer" in {r["kind"] for r in models if r["task"] == "classifier"}
    assert lm["random"]["tokens_per_s"] == pytest.approx(2 * TINY["seq"] / lm["random"]["step_s"])
    for r in models:  # weights, and AdamW's moments of the parameters the steps reached
        assert 4 * r["params"] < r["state_bytes"] <= 3 * 4 * r["params"] + 4 * 1000 and (r["step_peak_bytes"] is None or r["step_peak_bytes"] >= 0)
    if lm["vanilla"]["peak_bytes"]:
        assert lm["vanilla"]["peak_vs_vanilla"] == 1.0
    assert "| lm | yes | 2 | random |" in text and "weights+AdamW MiB" in text
    dec = {r["kind"]: r for r in rows if r["bench"] == "decode"}
    assert dec["random"]["cache_vs_vanilla"] == 0.5  # values only, against keys and values


def test_layer_command_and_attention_alias(tmp_path):
    args = ["--kinds", "random", "--baselines", "lightconv", "--seqs", "8", "--batch", "1", "--d-model", "16", "--heads", "2",
            "--repeats", "1", "--warmup", "0", "--no-memory", "--out", str(tmp_path), "--jsonl", str(tmp_path / "x.jsonl")]
    for command in ("layer", "attention"):
        rows = bench_main.main([command, *args])
        assert [r["kind"] for r in rows] == ["sdpa", "random", "lightconv"]
        assert rows[0]["fwd_bwd_ratio"] == 1.0 and rows[1]["fwd_bwd_vs_vanilla"] is None  # no vanilla row this time
    assert len((tmp_path / "x.jsonl").read_text().splitlines()) == 3
    assert not (tmp_path / "layer_memory.png").exists()


def test_slow_layers_are_dropped_from_longer_lengths(tmp_path):
    rows = bench_main.main(["layer", "--kinds", "random", "--baselines", "--seqs", "8", "16", "--batch", "1", "--d-model",
                            "16", "--heads", "2", "--repeats", "1", "--warmup", "0", "--no-memory",
                            "--max-call-s", "1e-9", "--always-upto", "8", "--out", str(tmp_path)])
    assert {r["seq"] for r in rows} == {8}
    assert all("max-call-s" in r["skipped_longer"] for r in rows)


def test_unknown_command_and_kinds_fail_clearly(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench_main.main(["nope"])
    assert exit_info.value.code == 2 and "usage: python -m synthesizer.bench" in capsys.readouterr().err
    with pytest.raises(ValueError, match="bogus"):
        layer_names(["random"], ["bogus"], causal=False)
    with pytest.raises(ValueError, match="baseline"):
        layer_names(["lightconv"], [], causal=False)
    with pytest.raises(ValueError, match="unknown attention kind"):
        layer_names(["randum"], [], causal=False)


def test_layer_names_candidates_and_causal():
    names = layer_names(["random+vanilla", "random"], ["linformer", "linformer_pypi", "lightconv"], causal=True)
    assert names[:2] == ["sdpa", "random+vanilla"] and "random+vanilla [reference]" in names
    assert "random+vanilla [sdpa_bias]" in names  # a candidate kernel, timed beside the ranked ones
    assert "linformer" not in names and "linformer_pypi" not in names and names[-1] == "lightconv"
    plain = layer_names(["random+vanilla"], ["linformer"], causal=False, candidates=False)
    assert plain == ["sdpa", "random+vanilla", "linformer"]
    # a mixture of feature components: the kernels auto chooses between by length, beside auto, not every path
    assert layer_names(["dense+vanilla", "dense"], [], causal=False) == [
        "sdpa", "dense+vanilla", "dense+vanilla [fused]", "dense+vanilla [wide_qk]", "dense"]


def test_interleaved_medians_round_robin_and_stats():
    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in ("a", "b")}
    stats = interleaved_medians(fns, torch.device("cpu"), repeats=3, warmup=1)
    assert calls == ["a", "b"] + ["a", "b"] * 3  # warm-up first, then alternating
    assert all(s["min"] <= s["median"] <= s["max"] for s in stats.values())


def test_memory_peaks_grow_with_length():
    # In a fresh process, as the benchmark does: this one's allocator keeps freed memory resident.
    peaks = layer.measure_memory({"vanilla [reference]": [16, 256]}, 2, 16, 2, False, torch.device("cpu"), 1)
    peaks = peaks["vanilla [reference]"]
    if peaks[16]["fwd_bwd"] is None:
        pytest.skip("no peak-RSS counters on this system")
    # The reference path keeps (B, H, n, n) probabilities for backward: 2 MiB at n = 256.
    assert peaks[256]["fwd_bwd"] > peaks[16]["fwd_bwd"] and peaks[256]["fwd_bwd"] >= 2 * 2 * 256 * 256 * 4


def test_activation_memory_leaves_out_the_parameters_gradients():
    """A random synthesizer's (H, n, n) R gets a gradient as large as itself: weights' memory, not activations."""
    from synthesizer.attention.factory import build_mixer
    from synthesizer.bench.memory import activation_bytes, parameter_gradient_bytes

    rnd = build_mixer("random", 16, 2, 256)
    r_bytes = 2 * 256 * 256 * 4  # R: 2 heads x 256 x 256 float32
    assert parameter_gradient_bytes(rnd) == sum(p.nbytes for p in rnd.parameters()) > r_bytes
    rnd.value.requires_grad_(False)  # frozen parameters get no gradient
    assert parameter_gradient_bytes(rnd) == sum(p.nbytes for p in rnd.parameters()) - rnd.value.weight.nbytes - rnd.value.bias.nbytes
    assert activation_bytes(None, rnd) is None and activation_bytes(10, rnd) == 0
    assert activation_bytes(parameter_gradient_bytes(rnd) + 4096, rnd) == 4096
    peaks = layer.measure_memory({"random": [256]}, 2, 16, 2, False, torch.device("cpu"), 1)["random"][256]
    if peaks["fwd_bwd"] is None:
        pytest.skip("no peak-RSS counters on this system")
    assert peaks["param_grads"] > r_bytes
    assert peaks["activations"] == max(peaks["fwd_bwd"] - peaks["param_grads"], 0)


@pytest.mark.parametrize("rss_before, hwm_after, want", [(1000, 980, 0), (1000, 1000, 0), (1000, 1100, 100 * 1024)])
def test_cpu_peak_is_never_negative(monkeypatch, rss_before, hwm_after, want):
    """The kernel updates its RSS counters lazily: the high-water mark read after tiny work can lie
    below the resident size read before it. That is growth below the resolution, reported as 0."""
    status = {"VmRSS": rss_before, "VmHWM": hwm_after}  # KiB, as /proc/self/status gives them
    monkeypatch.setattr(memory, "cpu_peak_supported", lambda: True)
    monkeypatch.setattr(memory, "_status_kib", status.__getitem__)
    assert memory.peak_bytes(lambda: None, torch.device("cpu")) == want


def test_decode_cache_bytes_per_kind():
    cfg = dict(TINY, seq=32)
    prompt = torch.randint(3, 32, (2, 3))
    sizes = {}
    for kind in ("vanilla", "random", "lightconv"):
        torch.manual_seed(0)
        ids, sizes[kind] = greedy_decode(LanguageModel(model.model_config(kind, cfg)).eval(), prompt, 5)
        assert ids.shape == (2, 5)
    positions, dh_total = 3 + 5, 16
    assert sizes["vanilla"] == 2 * 2 * positions * dh_total * 4  # keys + values, float32, one layer
    assert sizes["random"] == sizes["vanilla"] // 2
    assert sizes["lightconv"] == 2 * 30 * 16 * 4  # the last K-1 = 30 conv inputs, whatever the length


def _layer_row(kind, seq, fwd_bwd, forward=1.0):
    return {"bench": "layer", "kind": kind, "seq": seq, "fwd_bwd_s": fwd_bwd, "forward_s": forward}


def test_target_verdicts():
    rows = [_layer_row("random", 2048, 1.0), _layer_row("dynamicconv", 2048, 1.5), _layer_row("linformer", 2048, 0.5),
            _layer_row("linformer_pypi", 2048, 1.0, forward=0.5), _layer_row("factorized_random", 1024, 1.0),
            _layer_row("dynamicconv", 1024, 2.0),
            {"bench": "model", "task": "lm", "kind": "vanilla", "tokens_per_s": 100.0, "layers": 4, "d_model": 512, "seq": 1024,
             "batch": 1, "flops_vs_vanilla": 1.0},
            {"bench": "model", "task": "lm", "kind": "random", "tokens_per_s": 130.0, "layers": 4, "d_model": 512, "seq": 1024,
             "batch": 1, "flops_vs_vanilla": 1.33},
            {"bench": "decode", "kind": "vanilla", "cache_bytes": 200, "tokens_per_s": 10.0},
            {"bench": "decode", "kind": "random", "cache_bytes": 100, "tokens_per_s": 9.0}]
    found = {t["target"]: t for t in targets(rows)}
    by = lambda part: next(t for name, t in found.items() if part in name)  # noqa: E731
    assert by("random ≥ 1.6x")["met"] is False and by("random ≥ 1.6x")["value"] == 1.5
    fr = by("factorized_random ≥ 1.6x")
    assert fr["met"] is True and fr["value"] == 2.0 and "seq 1024" in fr["detail"]  # the longest common length
    assert by("random at least as fast as linformer")["value"] == 0.5
    assert by("factorized_random at least as fast as linformer")["met"] is None  # never measured at a common length
    assert by("fwd+bwd: our linformer")["met"] is True and by("fwd: our linformer")["met"] is False
    assert by("LM training")["met"] is True and by("cache")["met"] is True and by("decoding: random's tokens")["met"] is False
    text = targets_table(rows)
    assert "**missed**" in text and "not measured" in text and text.count("\n| layer") == 6


def test_lm_target_is_judged_at_the_largest_batch():
    lm = lambda kind, batch, tps: {"bench": "model", "task": "lm", "kind": kind, "tokens_per_s": tps,  # noqa: E731
                                   "layers": 4, "d_model": 512, "seq": 1024, "batch": batch, "flops_vs_vanilla": 1.3}
    rows = [lm("vanilla", 1, 100.0), lm("random", 1, 70.0), lm("vanilla", 8, 100.0), lm("random", 8, 140.0)]
    found = next(t for t in targets(rows) if t["target"].startswith("LM training"))
    assert found["value"] == 1.4 and found["met"] is True and "batch 8" in found["detail"]


def test_write_results_without_layer_rows_makes_no_plots(tmp_path):
    rows = [{"bench": "decode", "kind": "vanilla", "cache_bytes": 8, "tokens_per_s": 1.0, "decode_s": 1.0,
             "decode_min_s": 1.0, "decode_max_s": 1.0, "torch": "x", "threads": 1, "device": "cpu", "device_name": "c",
             "cores": 1, "python": "3"}]
    written = write_results(rows, tmp_path / "a" / "b")
    assert [p.name for p in written] == ["results.jsonl", "results.csv", "results.md", "run.json"]


def test_plots_are_written_per_layer_row(tmp_path):
    rows = [{"bench": "layer", "kind": kind, "seq": seq, "batch": 1, "d_model": 8, "heads": 2, "threads": 1, "torch": "t",
             "forward_s": seq * f, "fwd_bwd_s": 3 * seq * f, "peak_bytes": seq * 1000 * f}
            for kind, f in (("vanilla", 2.0), ("random", 1.0)) for seq in (256, 512, 1024)]
    written = plot_layers(rows, tmp_path)
    assert [p.name for p in written] == ["layer_time.png", "layer_memory.png"]
    assert all(p.read_bytes()[:8] == PNG for p in written)


@pytest.mark.parametrize("argv, usage", [
    (["--help"], "usage: python -m synthesizer.bench [-h]"),
    (["layer", "--help"], "usage: python -m synthesizer.bench layer [-h]"),
    (["report", "--help"], "usage: python -m synthesizer.bench report [-h] RESULTS_DIR"),
])
def test_help_exits_0_and_names_the_command(argv, usage, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench_main.main(argv)
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith(usage)


def test_prog_names_the_command_in_usage_and_in_the_recorded_command_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench_main.main(["decode", "--help"], prog="synthesizer bench")
    assert capsys.readouterr().out.startswith("usage: synthesizer bench decode")
    args = ["--kinds", "random", "--baselines", "--seqs", "8", "--batch", "1", "--d-model", "16", "--heads", "2",
            "--repeats", "1", "--warmup", "0", "--no-memory", "--out", str(tmp_path)]
    bench_main.main(["layer", *args], prog="synthesizer bench")
    assert json.loads((tmp_path / "run.json").read_text())["command"].startswith("synthesizer bench layer --kinds")


@pytest.mark.parametrize("device, message", [("cuda", "'cuda': this torch sees no CUDA device"),
                                             ("gpu0", "'gpu0' is not a torch device; use cpu, cuda or cuda:N")])
def test_a_device_this_torch_cannot_use_stops_the_command_in_one_line(device, message, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # also on a machine with a GPU
    for command in ("layer", "model", "decode", "all"):
        with pytest.raises(SystemExit) as exit_info:
            bench_main.main([command, "--device", device, "--quick"])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and f"error: argument --device: {message}" in err, (command, err)


def test_model_bench_takes_a_kind_per_layer():
    sizes = dict(TINY, layers=2, batch=1)
    rows = {r["kind"]: r for r in model.run_task("lm", ["vanilla", "random", "random,vanilla"], sizes,
                                                  torch.device("cpu"), {})}
    mixed = rows["random,vanilla"]
    assert mixed["layer_kinds"] == ["random", "vanilla"] and rows["vanilla"]["layer_kinds"] == ["vanilla", "vanilla"]
    # one layer of each: the FLOPs and parameters halfway between the two uniform models
    assert 2 * mixed["flops"] == rows["vanilla"]["flops"] + rows["random"]["flops"]
    assert 2 * mixed["params"] == rows["vanilla"]["params"] + rows["random"]["params"]
