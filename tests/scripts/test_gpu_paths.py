"""scripts/gpu_paths.py (the GPU check's Python part): its plan, its refusal without CUDA, and a
smoke run of both parts on CPU at toy sizes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_paths.py"


@pytest.fixture(scope="module")
def gpu_paths():
    spec = importlib.util.spec_from_file_location("gpu_paths", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_plan_covers_every_cuda_path_and_the_issue_sizes(gpu_paths, capsys):
    assert gpu_paths.main(["check", "--dry-run"]) == 0
    plan = capsys.readouterr().out
    for case in ("random+vanilla [sdpa_bias]", "random+vanilla [triton]", "random+vanilla [flex]",
                 "random+dense [triton]", "factorized_random+vanilla [triton]", "dense+vanilla [fused]", "random [shared]"):
        assert case in plan, case
    assert "fused_bias" not in plan  # a CPU kernel: on CUDA it hands over to blockwise, which is checked
    assert gpu_paths.main(["time", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 * len(gpu_paths.TIME_ROWS)
    assert all(f"seq {s}" in "".join(lines) for s in (1024, 2048, 4096, 8192))
    assert "batch 8, d_model 512, 8 heads" in lines[0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_without_cuda_it_stops_with_status_2(gpu_paths, capsys, tmp_path):
    assert gpu_paths.main(["time", "--out", str(tmp_path)]) == 2
    assert "no CUDA device" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_smoke_run_on_cpu_writes_its_results(gpu_paths, tmp_path):
    out = tmp_path / "gpu"
    assert gpu_paths.main(["check", "--device", "cpu", "--tiny", "--kinds", "random+vanilla", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "check.jsonl").read_text().splitlines()]
    ran = {(r["path"], r["dtype"], r["causal"]) for r in rows if r["status"] == "ok"}
    assert {("sdpa_bias", "float32", True), ("sdpa_bias", "bfloat16", False), ("blockwise", "float32", False)} <= ran
    assert all(r["status"] in ("ok", "skipped") for r in rows) and "FAIL" not in (out / "check.md").read_text()
    assert gpu_paths.main(["time", "--device", "cpu", "--tiny", "--seqs", "16", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "timing.jsonl").read_text().splitlines()]
    assert len(rows) == len(gpu_paths.TIME_ROWS)
    assert all(r["median_s"] > 0 for r in rows if r["status"] == "ok") and rows[0]["status"] == "ok"
    assert not [r for r in rows if r["status"] == "error"]  # under bfloat16 autocast, every path runs
    assert "| random+vanilla [sdpa_bias] |" in (out / "timing.md").read_text()
