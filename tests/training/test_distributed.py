import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from synthesizer.training import distributed
from tests.helpers import free_port
from tests.training.test_toy import make_trainer
from tests.tolerances import TRAINING, assert_close_f32

ROOT = Path(__file__).resolve().parents[2]  # on sys.path, subprocesses import the tests package

WORKER = """
import sys, torch
sys.path.insert(0, {root!r})
from synthesizer.training import init_distributed, cleanup
from tests.training.test_toy import make_trainer
info = init_distributed()
trainer = make_trainer({run!r}, batch_size=2, grad_accum=2, max_steps=8, rank=info.rank, world_size=info.world_size)
result = trainer.train()
torch.save({{k: v.clone() for k, v in trainer.model.state_dict().items()}}, {run!r} + f"/rank{{info.rank}}.pt")
cleanup()
"""


def train_losses(run: Path) -> list[float]:
    return [r["loss"] for r in map(json.loads, open(run / "log.jsonl")) if r["kind"] == "train"]


def test_two_gloo_processes_match_one_process_on_the_same_global_batch(tmp_path):
    run = tmp_path / "ddp"
    script = tmp_path / "worker.py"
    script.write_text(WORKER.format(root=str(ROOT), run=str(run)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()), "--monitor_interval", "0.1", str(script)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]

    rank0, rank1 = (torch.load(run / f"rank{r}.pt") for r in (0, 1))
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)

    single = make_trainer(tmp_path / "single", batch_size=8, grad_accum=1, max_steps=8)
    single.train()
    assert_close_f32(train_losses(run), train_losses(tmp_path / "single"), "loss per step", TRAINING)
    for k, v in single.model.state_dict().items():
        assert_close_f32(rank0[k], v, k, TRAINING)
    assert os.readlink(run / "last") == "step-00000008"
    state = torch.load(run / "last" / "trainer_state.pt", weights_only=True)
    assert len(state["rng"]) == 2 and state["extra"]["world_size"] == 2


def test_single_process_helpers_are_no_ops():
    assert not distributed.is_distributed() and distributed.is_main() and distributed.get_world_size() == 1
    t = torch.tensor([2.0])
    assert distributed.all_reduce_mean(t) is t and t.item() == 2.0
    model = torch.nn.Linear(2, 2)
    assert distributed.wrap_model(model, torch.device("cpu")) is model
    info = distributed.init_distributed("cpu")
    assert (info.rank, info.world_size, info.device) == (0, 1, torch.device("cpu"))
