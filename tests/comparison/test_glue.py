"""The glue preset: pretraining runs first, fine-tuning runs from them, the GLUE-style average and claim 7."""

import json
import math
import shutil

import pytest

from synthesizer.report.claims import GLUE_DATA, GLUE_TASK, Floor, evaluate_claims
from synthesizer.comparison import run_comparison
from synthesizer.report.average import glue_average
from synthesizer.report.summary import render
from synthesizer.comparison.presets import PRESETS, task_overrides
from synthesizer.report.groups import build_groups
from synthesizer.tasks.config import ExperimentConfig

SCORE = {"vanilla": 0.80, "random": 0.70, "random+vanilla": 0.85}
PRETRAIN_LOSS = {"vanilla": 2.5, "random": 2.75}


def config_fn(name, overrides):
    return ExperimentConfig.from_file(name, overrides)  # the real configs and overrides: all must be valid


class FakeRunner:
    """Records the calls in order; fine-tuning "scores" depend on the kind, per-example 0/1 values match them."""

    def __init__(self, fail=()):
        self.calls, self.fail = [], set(fail)

    def __call__(self, cfg, out_dir, resume=False, progress=True):
        kind = cfg.attention
        self.calls.append((cfg.task, kind, cfg.seed, cfg.init_from))
        out_dir.mkdir(parents=True, exist_ok=True)
        if cfg.task == "pretrain":
            if kind in self.fail:
                raise RuntimeError(f"boom in {kind}")
            result = {"task": "pretrain", "data": "+".join(cfg.data["corpora"]), "attention": kind, "seed": cfg.seed,
                      "test_metrics": {"loss": PRETRAIN_LOSS.get(kind, 3.0),
                                                       "perplexity": math.exp(PRETRAIN_LOSS.get(kind, 3.0))},
                      "primary_metric": "loss",
                      "higher_is_better": False, "baselines": {"unigram_perplexity": 100.0},
                      "curve": [{"step": 3, "valid_loss": 3.1}, {"step": 4, "valid_loss": 3.05}], "steps": 4,
                      "diverged": False}
        else:
            n = 100 if cfg.data["corpus"] == "spam" else 50
            correct = round(SCORE.get(kind, 0.6) * n)
            result = {"task": cfg.task, "data": cfg.data["corpus"], "attention": kind, "seed": cfg.seed,
                      "test_metrics": {"accuracy": correct / n, "f1": 0.5}, "primary_metric": "accuracy",
                      "higher_is_better": True, "baselines": {"majority_accuracy": 0.5}, "steps": 5,
                      "diverged": False, "params": {"total": 100, "attention_logits": 10}, "train_time_s": 1.0,
                      "per_example": {"metric": "accuracy", "kind": "accuracy",
                                      "values": [1] * correct + [0] * (n - correct)},
                      "init_from": {"run_dir": cfg.init_from}}
        (out_dir / "result.json").write_text(json.dumps(result))
        return result


def run(tmp_path, runner, **kw):
    lines = []
    results = run_comparison("glue", "quick", kinds=["vanilla", "random", "random+vanilla"], baselines=[], out=tmp_path,
                             run_fn=runner, config_fn=config_fn, heatmaps=False, log=lines.append, **kw)
    return results, lines


def test_a_finished_glue_comparison_resumes_from_results_json_without_pretraining_again(tmp_path):
    run(tmp_path, FakeRunner())
    shutil.rmtree(tmp_path / "runs")  # as on another machine: only results.json came along
    runner = FakeRunner()
    results, lines = run(tmp_path, runner, seeds=2)
    tasks = len(PRESETS["glue"].tasks)
    # seed 1 only: its three pretraining runs, then every task from them; seed 0 is kept, not pretrained again
    assert sorted(c[1:3] for c in runner.calls if c[0] == "pretrain") == [("random", 1), ("random+vanilla", 1),
                                                                         ("vanilla", 1)]
    assert len([c for c in runner.calls if c[0] != "pretrain"]) == 3 * tasks
    assert all(c[2] == 1 for c in runner.calls)
    assert any(f"{3 * tasks} finished run(s) recorded in" in line for line in lines)
    averages = [r for r in results.runs if r["task"] == GLUE_TASK]
    assert sorted((r["attention"], r["seed"]) for r in averages) == sorted(
        (k, s) for k in ("vanilla", "random", "random+vanilla") for s in (0, 1))


def test_pretraining_runs_first_then_every_task_fine_tunes_from_its_own(tmp_path):
    runner = FakeRunner()
    results, lines = run(tmp_path, runner)
    pre = [c for c in runner.calls if c[0] == "pretrain"]
    assert runner.calls[: len(pre)] == pre and len(pre) == 3  # all pretraining before any fine-tuning
    key = "pretrain-rotten-tomatoes+spam+bible-en-es+sotu-subset"
    for task, kind, seed, init_from in runner.calls[len(pre):]:
        assert task == "classification"
        assert init_from == str((tmp_path / "runs" / key / kind / f"seed{seed}").resolve())
    assert len(runner.calls) == 3 + 3 * 4
    assert {(r["attention"], r["run_dir"]) for r in results.pretraining} == \
        {(k, f"runs/{key}/{k}/seed0") for k in ("vanilla", "random", "random+vanilla")}
    # the pretraining runs are no task of the report; the average is one
    groups = {g.key: g for g in build_groups(results.runs)}
    assert set(groups) == {"classification-rotten-tomatoes", "classification-spam",
                           "classification-bible-en-es-pairs", "classification-debian-synopsis-pairs",
                           f"{GLUE_TASK}-{GLUE_DATA}"}
    avg = groups[f"{GLUE_TASK}-{GLUE_DATA}"]
    assert avg.row("random+vanilla").metric_mean == pytest.approx(0.85, abs=0.01)  # 42/50, 85/100, 42/50, 42/50
    assert avg.row("random").metric_mean == pytest.approx(0.70)
    assert results.labels[f"{GLUE_TASK}-{GLUE_DATA}"].startswith("GLUE-style average over 4")
    assert (tmp_path / "report.md").is_file()
    # run again: everything is read back, nothing trained
    again = FakeRunner()
    run(tmp_path, again)
    assert again.calls == []


def test_a_failed_pretraining_fails_its_fine_tuning_runs_without_starting_them(tmp_path):
    runner = FakeRunner(fail={"random"})
    results, lines = run(tmp_path, runner)
    assert not [c for c in runner.calls if c[0] == "classification" and c[1] == "random"]
    failed = [r for r in results.runs if r["attention"] == "random"]
    assert len(failed) == 5 and all("boom in random" in r["error"] for r in failed)  # 4 tasks + their average


def test_the_average_weights_each_task_once_and_keeps_a_bootstrap():
    def part(data, correct, n):
        return {"task": "classification", "data": data, "primary_metric": "accuracy", "diverged": False,
                "test_metrics": {"accuracy": correct / n}, "baselines": {"majority_accuracy": 0.5},
                "per_example": {"metric": "accuracy", "kind": "accuracy", "values": [1] * correct + [0] * (n - correct)}}
    record = glue_average([part("a", 90, 100), part("b", 5, 10)], "vanilla", 0)
    assert record["test_metrics"]["accuracy"] == (0.9 + 0.5) / 2
    values = record["per_example"]["values"]
    assert len(values) == 110 and abs(sum(values) / len(values) - 0.7) < 1e-9
    assert record["baselines"] == {"majority_accuracy": 0.5}


def test_claim7_is_judged_on_the_average_when_there_is_one(tmp_path):
    results, _ = run(tmp_path, FakeRunner())
    v7 = next(v for v in evaluate_claims(build_groups(results.runs)) if v.number == 7)
    assert v7.rule.startswith("On the GLUE-style average")
    assert v7.checks and all(c.key == f"{GLUE_TASK}-{GLUE_DATA}" for c in v7.checks)
    # random loses 33% of vanilla's gain (0.70 vs 0.80, trivial 0.5): clearly behind; random+vanilla best, but
    # with no `none` trained whether a model without attention would beat the others too is not checked
    behind, best = v7.checks
    assert behind.verdict == "supports" and behind.finding.kinds == ("random", "vanilla")
    assert behind.gap.row.mean == pytest.approx(0.7) and behind.gap.value == pytest.approx(1 / 3)
    assert best.verdict == "cannot tell" and best.finding.kinds[0] == "random+vanilla"
    assert best.floor.floor is Floor.NOT_CHECKED
    assert v7.verdict == "cannot tell"


def test_the_preset_configs_fit_together():
    spec = PRESETS["glue"]
    for size in ("quick", "standard", "full"):
        pre = ExperimentConfig.from_file(spec.pretrain.config, task_overrides(spec.pretrain, size))
        for task in spec.tasks:
            if size not in task.sizes:
                assert task.not_standard, task.config  # left out for a measured reason
                continue
            cfg = ExperimentConfig.from_file(task.config, task_overrides(task, size))
            for key in ("d_model", "n_heads", "n_layers", "d_ff"):
                assert cfg.model[key] == pre.model[key], (size, task.config, key)
            assert cfg.model["max_len"] <= pre.model["max_len"]


def test_the_report_shows_pretraining_first_and_a_re_render_keeps_it(tmp_path):
    results, lines = run(tmp_path / "cmp", FakeRunner())
    assert all(r["curve"] for r in results.pretraining)  # kept for the report's curves and flatness
    rendered = render([str(tmp_path / "cmp")], str(tmp_path / "again"), log=lambda line: None)
    assert rendered.pretraining == results.pretraining
    saved = json.loads((tmp_path / "again" / "results.json").read_text())
    assert len(saved["pretraining"]) == 3
    report = (tmp_path / "again" / "report.md").read_text()
    section = report.split("## pretraining by span corruption", 1)[1].split("\n## ", 1)[0]
    assert report.index("## pretraining by span corruption") < report.index("## sentiment")
    table = next(block for block in section.split("\n\n") if block.startswith("| attention | test loss"))
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()}
    assert "2.50" in rows["vanilla"] and "+10.0%" in rows["random"]  # 2.75 against 2.5
    # vanilla fell from 3.1 to 3.05 over the last quarter: 1.6%, flattened; its margin over the unigram model
    assert "fell 1.6% over the last quarter of training (flattened" in section
    assert "Vanilla 87.8 perplexity below the unigram model (12.18 vs 100" in section  # e^2.5 = 12.18
    assert any(line.startswith("pretrain-") and "flattened" in line for line in lines)
    average = report.split("## GLUE-style average", 1)[1].split("\n## ", 1)[0]
    assert "| train examples/s |" in average  # the average is over classification tasks
    assert "**Did vanilla learn?** An average of the tasks above, each with its own curve." in average
