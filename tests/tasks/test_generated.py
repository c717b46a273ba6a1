"""ListOps and the diagnostics through the experiment runner; the answer-scored LM task's targets and metrics."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from synthesizer.data import generated as g
from synthesizer.data.sources import load_corpus
from synthesizer.models import ModelConfig, build_model
from synthesizer.tasks import ExperimentConfig, evaluate_run, run_experiment
from synthesizer.tasks.answer_lm import IGNORE, AnswerLMTask
from synthesizer.tasks.data import task_class

TINY = ["model.d_model=16", "model.d_ff=32", "model.n_heads=2", "model.n_layers=1", "train.max_steps=3",
        "train.eval_every=3", "train.log_every=1", "train.warmup_steps=0", "data.limit=40"]


def _cfg(name: str, *extra: str) -> ExperimentConfig:
    return ExperimentConfig.from_file(name, [*TINY, *extra])


@pytest.mark.parametrize("kind", g.DIAGNOSTICS)
def test_diagnostic_runs_end_to_end(tmp_path, kind):
    cfg = _cfg(f"diag-{kind}-small", "model.attention=random")
    assert task_class(cfg) is AnswerLMTask
    result = run_experiment(cfg, tmp_path / kind, progress=False)
    metrics = result["test_metrics"]
    assert result["primary_metric"] == "accuracy" and result["higher_is_better"]
    assert 0.0 <= metrics["exact_match"] <= metrics["accuracy"] <= 1.0 and 0.0 <= metrics["token_accuracy"] <= 1.0
    assert result["baselines"]["chance_accuracy"] == 1 / g.GENERATED[f"diag-{kind}"].n_answers  # 1/16, 1/512 (Zoology)
    assert 0.0 < result["baselines"]["majority_accuracy"] < 0.5
    values = result["per_example"]["values"]
    assert len(values) == 40 and sum(values) / 40 == pytest.approx(metrics["accuracy"], abs=1e-3)
    # the fixed vocabulary was saved, and the trained run reloads into the same task
    vocab = json.loads((tmp_path / kind / "tokenizer" / "tokenizer.json").read_text())["model"]["vocab"]
    assert len(vocab) == 6 + len(g.GENERATED[f"diag-{kind}"].vocab)
    assert evaluate_run(tmp_path / kind)["accuracy"] == pytest.approx(metrics["accuracy"])


def test_listops_runs_end_to_end_with_none_baseline(tmp_path):
    cfg = _cfg("listops-small", "model.attention=none", "model.max_len=256")
    result = run_experiment(cfg, tmp_path / "listops", progress=False)
    assert result["task"] == "classification" and result["data"] == "listops-256"
    assert set(result["test_metrics"]) >= {"accuracy", "f1", "mcc"}
    assert 0.0 < result["baselines"]["majority_accuracy"] < 1.0
    assert result["params"]["total"] > 0 and len(result["per_example"]["values"]) == 40


def test_listops_lra_config_fits_the_lra_lengths():
    cfg = ExperimentConfig.from_file("listops-lra-base")
    assert cfg.data["corpus"] == "listops-lra" and cfg.model["max_len"] >= g.GENERATED["listops-lra"].max_len + 2
    assert cfg.batch["max_len"] <= cfg.model["max_len"]


def _task(name: str) -> AnswerLMTask:
    cfg = ExperimentConfig.from_file(f"{name}-small", ["data.limit=30"])
    return AnswerLMTask(cfg, load_corpus(cfg.data["corpus"], limit=30), g.fixed_tokenizer())


@pytest.mark.parametrize("name", ["diag-mqar", "diag-copy"])
def test_targets_are_the_answers_only(name):
    task = _task(name)
    inputs, targets = task._batch("valid", list(range(30)))
    ids, answers = task.encoded("valid")
    for row in range(30):
        scored = (targets[row] != IGNORE).nonzero().flatten().tolist()
        assert [p + 1 for p in scored] == answers[row]  # position p predicts token p + 1
        assert targets[row, scored].tolist() == [ids[row][a] for a in answers[row]]
        assert inputs[row, : len(ids[row]) - 1].tolist() == ids[row][:-1]


class ConstantLM(nn.Module):
    """Predicts token ``choice`` everywhere."""

    def __init__(self, vocab: int, choice: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(vocab))
        self.bias.data[choice] = 1.0

    def forward(self, ids, padding_mask=None, logits_at=None):
        logits = self.bias.expand(*ids.shape, -1)
        return logits if logits_at is None else logits[logits_at]


def test_accuracy_is_the_per_example_fraction_of_right_answers():
    task = _task("diag-copy")
    choice = task.tok.encode("v3")[0]
    metrics = task.metrics(ConstantLM(task.tok.vocab_size, choice), "test")
    rows = load_corpus("diag-copy", limit=30).splits["test"]
    fractions = []
    for row in rows:
        words = row["text"].split()
        fractions.append(sum(words[a] == "v3" for a in row["answers"]) / len(row["answers"]))
    tokens = [row["text"].split()[a] == "v3" for row in rows for a in row["answers"]]
    assert metrics["accuracy"] == pytest.approx(sum(fractions) / 30)
    assert metrics["token_accuracy"] == pytest.approx(sum(tokens) / len(tokens))
    assert metrics["exact_match"] == sum(f == 1.0 for f in fractions) / 30


def test_majority_baseline_predicts_the_most_frequent_training_answer():
    task = _task("diag-reverse")
    ids, answers = task.encoded("train")
    counts = {}
    for x, pos in zip(ids, answers):
        for a in pos:
            counts[x[a]] = counts.get(x[a], 0) + 1
    top = max(sorted(counts), key=counts.get)
    got = task.metrics(ConstantLM(task.tok.vocab_size, top), "test")["accuracy"]
    assert task.baselines("test")["majority_accuracy"] == pytest.approx(got)


def test_scoring_only_the_answers_matches_the_full_logits():
    """The task asks the model for the answer positions' logits only; loss, gradients and metrics are
    those of the full logits masked to the answers."""
    task = _task("diag-mqar")
    torch.manual_seed(0)
    model = build_model("lm", ModelConfig(vocab_size=task.tok.vocab_size, d_model=16, n_heads=2, n_layers=1,
                                          d_ff=32, max_len=task.max_len, attention="random+vanilla", dropout=0.0))
    inputs, targets = task._batch("valid", list(range(30)))
    loss, count = task.step_fn(model, (inputs, targets))
    loss.backward()
    fast = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    logits = model(inputs)
    reference = nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE,
                                            reduction="sum")
    reference.backward()
    assert int(count) == int((targets != IGNORE).sum())
    torch.testing.assert_close(loss, reference, rtol=1e-5, atol=1e-5)
    for got, want in zip(fast, (p.grad for p in model.parameters())):
        # sums of hundreds of float32 terms in another order: near-zero entries err relative to the largest
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5 * float(want.abs().max()))
    with torch.no_grad():
        logits = model(inputs)
    scored = targets != IGNORE
    hits = (logits.argmax(-1) == targets) & scored
    per_row = hits.sum(1) / scored.sum(1)
    metrics = task.metrics(model, "valid")
    assert metrics["accuracy"] == pytest.approx(float(per_row.mean()))
    assert metrics["token_accuracy"] == pytest.approx(int(hits.sum()) / int(scored.sum()))
    assert metrics["exact_match"] == pytest.approx(float((per_row == 1).float().mean()))
    assert metrics["loss"] == pytest.approx(float(reference) / int(scored.sum()), rel=1e-5)
