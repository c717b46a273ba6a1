import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from synthesizer.training import TrainConfig, load_model_weights
from tests.training.test_toy import TinyLM, make_trainer, step_fn, weights
from tests.tolerances import TRAINING, assert_close_f32

ROOT = Path(__file__).resolve().parents[2]  # on sys.path, subprocesses import the tests package


def read_log(run):
    return [json.loads(line) for line in open(run / "log.jsonl")]


def test_two_half_batches_accumulated_equal_one_full_batch():
    full = make_trainer(batch_size=8, grad_accum=1, max_steps=4)
    half = make_trainer(batch_size=4, grad_accum=2, max_steps=4)
    r_full, r_half = full.train(), half.train()
    assert_close_f32(r_half.loss, r_full.loss, "final loss", TRAINING)
    for k, v in weights(full.model).items():
        assert_close_f32(half.model.state_dict()[k], v, k, TRAINING)
    # averaging per-micro-batch means instead would differ, since the halves hold uneven token counts
    def mean_step(model, batch):
        loss_sum, n = step_fn(model, batch)
        return loss_sum / n, 1
    naive = make_trainer(batch_size=4, grad_accum=2, max_steps=4, step=mean_step)
    naive.train()
    assert (naive.model.mix.weight - full.model.mix.weight).abs().max() > 1e-4


def test_sigterm_mid_run_saves_and_resume_matches_uninterrupted_bitwise(tmp_path):
    straight = make_trainer(tmp_path / "a", dropout=0.2, max_steps=7, eval_every=3,
                            evaluate_fn=lambda m: {"x": torch.rand(()).item()})
    straight.train()

    calls = {"n": 0}

    def interrupting_step(model, batch):
        calls["n"] += 1
        if calls["n"] == 4:  # during update 4: it finishes, then the run stops
            os.kill(os.getpid(), signal.SIGTERM)
        return step_fn(model, batch)

    run = tmp_path / "b"
    first = make_trainer(run, dropout=0.2, max_steps=7, eval_every=3, step=interrupting_step,
                         evaluate_fn=lambda m: {"x": torch.rand(()).item()})
    handler_before = signal.getsignal(signal.SIGTERM)
    result = first.train()
    assert signal.getsignal(signal.SIGTERM) is handler_before  # handlers restored
    assert (result.stopped, result.step) == ("SIGTERM", 4)
    assert os.readlink(run / "last") == "step-00000004"

    with pytest.raises(ValueError, match="already holds a checkpoint"):
        make_trainer(run, dropout=0.2, max_steps=7).train()
    resumed = make_trainer(run, dropout=0.2, max_steps=7, eval_every=3, evaluate_fn=lambda m: {"x": torch.rand(()).item()})
    torch.manual_seed(99)  # the RNG state must come from the checkpoint, not from here
    assert resumed.train(resume=True).step == 7
    for k, v in weights(straight.model).items():
        assert torch.equal(resumed.model.state_dict()[k], v), k
    steps = [r["step"] for r in read_log(run) if r["kind"] == "train"]
    assert steps == list(range(1, 8))
    assert read_log(run)[-1] == {**read_log(run)[-1], "kind": "end", "stopped": "max_steps", "step": 7}


def test_stop_by_max_steps_then_resume_with_more_steps_matches(tmp_path):
    straight = make_trainer(max_steps=6, schedule_steps=6)
    straight.train()
    make_trainer(tmp_path, max_steps=2, schedule_steps=6, batch_size=16).train()  # 3 batches/epoch: crosses epochs
    part = make_trainer(tmp_path, max_steps=6, schedule_steps=6, batch_size=16)
    part.train(resume=True)
    again = make_trainer(max_steps=6, schedule_steps=6, batch_size=16)
    again.train()
    assert all(torch.equal(a, b) for a, b in zip(part.model.parameters(), again.model.parameters()))
    assert not torch.equal(part.model.mix.weight, straight.model.mix.weight)  # batch size matters: test is live


def test_best_checkpoint_follows_metric_and_log_has_eval_records(tmp_path):
    scores = iter([3.0, 1.0, 2.0, 5.0])
    trainer = make_trainer(tmp_path, max_steps=8, eval_every=2, best_metric="bleu", best_mode="max",
                           evaluate_fn=lambda m: {"bleu": next(scores)})
    result = trainer.train()
    assert result.best_metric == 5.0 and os.readlink(tmp_path / "best") == "step-00000008"
    evals = [(r["step"], r["bleu"]) for r in read_log(tmp_path) if r["kind"] == "eval"]
    assert evals == [(2, 3.0), (4, 1.0), (6, 2.0), (8, 5.0)]
    train = [r for r in read_log(tmp_path) if r["kind"] == "train"]
    assert {"step", "loss", "lr", "tokens_per_s", "elapsed"} <= set(train[0]) and train[0]["tokens_per_s"] > 0
    assert [r["lr"] for r in train[:2]] == pytest.approx([3e-2 / 2, 3e-2])  # the lr each update used (warm-up 2)
    model = TinyLM()
    load_model_weights(tmp_path / "best", model)
    assert torch.equal(model.mix.weight, trainer.model.mix.weight)


def test_early_stopping_at_a_target_stops_at_the_first_evaluation_that_reaches_it(tmp_path):
    scores = iter([0.5, 0.97, 0.995, 0.999])
    trainer = make_trainer(tmp_path, max_steps=8, eval_every=2, best_metric="accuracy", best_mode="max",
                           stop_metric="accuracy", stop_at=0.99, evaluate_fn=lambda m: {"accuracy": next(scores)})
    result = trainer.train()
    assert result.stopped == "target" and result.step == 6 and result.best_metric == 0.995
    assert os.readlink(tmp_path / "best") == "step-00000006"
    assert [r["step"] for r in read_log(tmp_path) if r["kind"] == "eval"] == [2, 4, 6]
    # stop_mode min: at or below the target
    losses = iter([3.0, 0.4, 0.1])
    low = make_trainer(max_steps=8, eval_every=2, stop_metric="loss", stop_at=0.5, stop_mode="min",
                       evaluate_fn=lambda m: {"loss": next(losses)}).train()
    assert low.stopped == "target" and low.step == 4


def test_bad_settings_raise_clear_errors():
    with pytest.raises(ValueError, match="needs both stop_metric and stop_at"):
        TrainConfig(max_steps=3, stop_metric="accuracy")
    with pytest.raises(ValueError, match="stop_mode"):
        TrainConfig(max_steps=3, stop_metric="accuracy", stop_at=0.9, stop_mode="up")
    with pytest.raises(ValueError, match="stop_metric 'bleu' is not among the evaluation metrics: loss"):
        make_trainer(max_steps=2, eval_every=1, stop_metric="bleu", stop_at=1.0, evaluate_fn=lambda m: {"loss": 1.0}).train()
    with pytest.raises(ValueError, match="allowed: inverse_sqrt, cosine, constant"):
        TrainConfig(max_steps=3, schedule="linear")
    with pytest.raises(ValueError, match="best_mode"):
        TrainConfig(max_steps=3, best_mode="up")
    with pytest.raises(ValueError, match="not among the evaluation metrics: loss"):
        make_trainer(max_steps=2, eval_every=1, best_metric="bleu", evaluate_fn=lambda m: {"loss": 1.0}).train()


SIGTERM_SCRIPT = """
import sys, time
sys.path.insert(0, {root!r})
from tests.training.test_toy import make_trainer, step_fn
def slow(model, batch):
    time.sleep(0.15)
    return step_fn(model, batch)
result = make_trainer({run!r}, max_steps=200, step=slow).train()
print("stopped", result.stopped, result.step)
"""


def test_sigterm_to_a_training_process_saves_last_and_resume_continues(tmp_path):
    run = tmp_path / "run"
    script = SIGTERM_SCRIPT.format(root=str(ROOT), run=str(run))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())})  # bitwise: same threads
    deadline = time.time() + 60
    while not ((run / "log.jsonl").exists() and len(read_log(run)) >= 2):
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read() if proc.poll() is not None else "timeout"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    stopped_at = int(out.split()[-1])
    assert "stopped SIGTERM" in out and 2 <= stopped_at < 200
    assert os.readlink(run / "last") == f"step-{stopped_at:08d}"

    total = stopped_at + 2
    resumed = make_trainer(run, max_steps=total, schedule_steps=200)
    assert resumed.train(resume=True).step == total
    straight = make_trainer(max_steps=total, schedule_steps=200)
    straight.train()
    assert all(torch.equal(a, b) for a, b in zip(resumed.model.parameters(), straight.model.parameters()))


def test_max_minutes_stops_after_the_current_update_and_saves(tmp_path):
    result = make_trainer(tmp_path, max_steps=50, max_minutes=1e-9).train()
    assert (result.stopped, result.step) == ("max_minutes", 1)
    assert os.readlink(tmp_path / "last") == "step-00000001"


def test_a_signal_during_the_final_evaluation_stops_the_run_and_a_resume_only_reports_it(tmp_path):
    def evaluate(model):
        if evaluate.calls == 1:  # the final evaluation (the one at step 3 came first)
            os.kill(os.getpid(), signal.SIGTERM)
        evaluate.calls += 1
        return {"x": 1.0}

    evaluate.calls = 0
    run = tmp_path / "run"
    result = make_trainer(run, max_steps=5, eval_every=3, evaluate_fn=evaluate).train()
    assert (result.stopped, result.step) == ("SIGTERM", 5)  # not dropped: the command stops, exit 130
    assert os.readlink(run / "last") == "step-00000005"  # the finished steps are saved
    resumed = make_trainer(run, max_steps=5, eval_every=3, evaluate_fn=evaluate).train(resume=True)
    assert (resumed.stopped, resumed.step) == ("max_steps", 5)  # nothing left to train: its report follows
