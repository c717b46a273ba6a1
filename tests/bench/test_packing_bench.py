"""``python -m synthesizer.bench packing``: padded and packed training of a preset's task, real tokens/s."""

from __future__ import annotations

import json

import torch

from synthesizer.bench import __main__ as bench_main
from synthesizer.bench.packing import token_counts

from ..tasks.test_experiment import write_data


def test_token_counts_leave_out_the_padding():
    lm_blocks = torch.zeros(2, 9, dtype=torch.long)  # (blocks, block_size + 1): all real
    assert token_counts(lm_blocks) == (16, 16)
    mask = torch.tensor([[False, False, True], [False, True, True]])
    assert token_counts({"src": torch.zeros(2, 3), "src_mask": mask, "tgt_mask": ~mask}) == (6, 12)


def test_the_quick_command_times_padded_and_packed_batches(tmp_path, capsys):
    out = tmp_path / "bench"
    # the translation preset's config on tiny local files: no shared data folder needed
    files = [f"data.{split}={path}" for split, path in write_data(tmp_path / "data", "mt").items()]
    rows = bench_main.main(["packing", "--quick", "--configs", "mt-bible-small", "--kinds", "random", "--steps", "1",
                            "--repeats", "1", "--warmup", "0", "--set", "data.corpus=null",
                            *[a for f in files for a in ("--set", f)], "--out", str(out)])
    assert [(r["kind"], r["pack"]) for r in rows] == [("random", False), ("random", True)]
    padded, packed = rows
    for r in rows:
        assert 0 < r["real_tokens"] <= r["token_slots"] and r["tokens_per_s"] > 0
        assert r["tokens_per_s_min"] <= r["tokens_per_s"] <= r["tokens_per_s_max"]
    assert padded["paths"] == ["shared"] and packed["paths"] == ["reference"]  # the layers' path says so
    assert packed["speedup"] == packed["tokens_per_s"] / padded["tokens_per_s"]
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    assert json.loads((out / "results.jsonl").read_text().splitlines()[1])["pack"] is True
    assert "## Packed against padded training" in capsys.readouterr().out
