"""The hybrid preset (`compare --preset hybrid`): kinds per layer as kinds of a comparison, their folders and
commands, and the report's section on which layers need dot-product attention, against the 2025 finding."""

import json
import math
import re

import pytest

from synthesizer.comparison import run_comparison
from synthesizer.comparison.command import plan_commands
from synthesizer.comparison.main import main
from synthesizer.comparison.study import Options, resolve
from synthesizer.comparison.presets import PRESETS
from synthesizer.report.claims import evaluate_claims
from synthesizer.report.groups import build_groups
from synthesizer.report.hybrid import layer_kinds
from synthesizer.runs.results import Results
from synthesizer.tasks.config import ExperimentConfig

from .test_compare import FakeRunner, set_valid_loss

KINDS = PRESETS["hybrid"].kinds
RECALL = "diag-mqar"  # the recall task of the preset: the scale study's 25-token setting
ALTERNATE, FIRST, SECOND, THIRD, LAST = ("random,vanilla", "vanilla,random,random,random", "random,vanilla,random,random",
                                         "random,random,vanilla,random", "random,random,random,vanilla")
# lm: test perplexity; none 110, vanilla 100 (its gain), random loses most of it, the alternation keeps nearly all,
# vanilla in layer 1 alone nearly all (the best single placement), in the first or last layer alone much less
PERPLEXITY = {"vanilla": 100.0, "random+vanilla": 99.6, ALTERNATE: 100.3, SECOND: 100.5, THIRD: 101.5, FIRST: 104.0,
              LAST: 104.5, "dense": 105.0, "random": 108.0, "none": 110.0}
# recall: test accuracy; the first-only and last-only stacks never learn it, the middle ones do
ACCURACY = {"vanilla": 0.99, "random+vanilla": 0.99, ALTERNATE: 0.98, SECOND: 0.95, THIRD: 0.93, FIRST: 0.30,
            LAST: 0.40, "dense": 0.30, "random": 0.25, "none": 0.06}


def config_fn(name, overrides):
    """The preset's config checked as it is; a tiny one that keeps its corpus and its layers."""
    real = ExperimentConfig.from_file(name, overrides)
    base = {"task": "lm", "data": {"corpus": real.data["corpus"]},
            "model": {"d_model": 16, "n_heads": 2, "n_layers": real.model["n_layers"], "max_len": 16},
            "train": {"max_steps": 5}, "tokenizer": {"vocab_size": 300}, "batch": {"block_size": 16}}
    return ExperimentConfig.from_dict(base, [o for o in overrides if o.startswith("train.max_steps")])


class HybridRunner(FakeRunner):
    """Scores by kind (above), a little different per seed and kind, and each layer's kind in the record as
    the experiment runner keeps it (params.by_layer)."""

    def __call__(self, cfg, out_dir, resume=False, progress=True):
        result = super().__call__(cfg, out_dir, resume, progress)
        kind, seed = cfg.attention, cfg.seed
        noise = 0.05 * ((seed * 7 + len(kind)) % 3)
        parts = kind.split(",")
        result["params"] = {"total": 5000 + 100 * sum("random" in p for p in parts), "attention_logits": 500,
                            "by_layer": [{"layer": f"blocks.{i}", "kind": parts[i % len(parts)], "params": 100}
                                         for i in range(cfg.model["n_layers"])]}
        if cfg.data["corpus"] == RECALL:
            accuracy = ACCURACY[kind] + noise / 10
            result.update(primary_metric="accuracy", higher_is_better=True, baselines={},
                          test_metrics={"accuracy": accuracy}, valid_metrics={"accuracy": accuracy})
            set_valid_loss(result, 1 - accuracy)
        else:
            ppl = PERPLEXITY[kind] + noise
            result.update(test_metrics={"perplexity": ppl}, valid_metrics={"perplexity": ppl})
            set_valid_loss(result, math.log(ppl))
        (out_dir / "result.json").write_text(json.dumps(result))
        return result


def fake_timing(results, log):
    """Every kind's attention step: vanilla 2 ms, random 1 ms, a kind per layer the mean of its layers'."""
    step = lambda kind: 0.002 if "vanilla" in kind else 0.001  # noqa: E731
    for key in {f"{r['task']}-{r['data']}" for r in results.runs}:
        kinds = {r["attention"] for r in results.runs}
        results.set_timing(key, {"kinds": {k: {"median_s": sum(map(step, k.split(","))) / len(k.split(","))}
                                           for k in kinds}})
    return results


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("hybrid")
    runner = HybridRunner()
    # one comparison (lrs=()): the preset's learning-rate sweep is the tuning protocol's, tested in test_tuning.py
    results = run_comparison("hybrid", "quick", seeds=3, out=out, run_fn=runner, config_fn=config_fn, load_fn=None,
                             heatmaps=False, log=lambda line: None, time_fn=fake_timing, lrs=())
    return out, runner, results


def test_the_preset_trains_every_pattern_and_none_at_four_layers_on_lm_and_recall(study):
    out, runner, results = study
    assert len(KINDS) == 9 and {ALTERNATE, FIRST, SECOND, THIRD, LAST} <= set(KINDS)
    assert len(runner.calls) == 2 * 10 * 3 and {c[0] for c in runner.calls} == {*KINDS, "none"}
    for kind in (ALTERNATE, FIRST):
        assert (out / "runs" / "lm-sotu-subset" / kind / "seed2" / "result.json").is_file()
        assert (out / "runs" / f"lm-{RECALL}" / kind / "seed0" / "result.json").is_file()
    record = next(r for r in Results.load(out).runs if r["attention"] == FIRST)
    assert record["config"]["model"]["attention"] == FIRST and record["config"]["model"]["n_layers"] == 4
    assert layer_kinds(record) == ["vanilla", "random", "random", "random"]


def test_the_report_gives_each_pattern_its_layers_share_recall_params_and_speed(study):
    out, _, _ = study
    md = (out / "report.md").read_text()
    section = md[md.index("## Hybrids: which layers need dot-product attention"):md.index("## The paper's claims")]
    lm = section[:section.index("### multi-query associative recall (25 tokens)")]
    rows = {line.split(" | ")[0].strip("| "): line for line in lm.splitlines() if line.startswith("| ")}
    assert "| all 4 | 3 |" in rows["vanilla"] and "| none | 3 |" in rows["random"]
    assert "| 1, 3 (2 of 4) | 3 |" in rows[ALTERNATE] and "| 0 (1 of 4) |" in rows[FIRST]
    assert "| all 4 |" in rows["random+vanilla"]
    # lm: the share of vanilla's gain with its interval; the attention step of a mean layer against vanilla's
    assert "| 19% [17%, 21%] |" in rows["random"]  # ln(110/108) / ln(110/100)
    assert rows[ALTERNATE].endswith("| 0.75× |") and rows["vanilla"].endswith("| 1.00× |")
    assert "| 5300 |" in rows[FIRST] and "| 5000 |" in rows["vanilla"]  # the parameters of each stack
    # recall: the seeds that learned it
    recall = section[section.index("### multi-query associative recall (25 tokens)"):]
    assert re.search(rf"^\| {re.escape(FIRST)} \|.*\| 0/3 \|", recall, re.M)
    assert re.search(rf"^\| {re.escape(SECOND)} \|.*\| 3/3 \|", recall, re.M)
    assert f"the best placement is `{SECOND}` by the lowest validation loss of seed 0" in section


def test_the_report_reads_the_2025_finding_point_by_point(study):
    out, _, _ = study
    md = (out / "report.md").read_text()
    finding = md[md.index("### Against the 2025 finding"):md.index("## The paper's claims")]
    items = [line for line in finding.splitlines() if line.startswith("- ")]
    assert len(items) == 4
    assert items[0].startswith("- Input-independent maps in every layer lose clearly") and "**agrees**" in items[0]
    assert "**agrees**" in items[1] and ALTERNATE in items[1]
    assert "**agrees**" in items[2] and SECOND in items[2]
    assert "**agrees**" in items[3] and "0/3 seeds learned it" in items[3]
    assert "comes close\" where its share's whole interval is at or above 90%" in " ".join(finding.split())


def test_no_paper_claim_checks_a_kind_per_layer(study):
    out, _, results = study
    verdicts = evaluate_claims(build_groups(results.runs, results.timings))
    kinds = {kind for v in verdicts for c in v.checks for kind in c.finding.kinds}
    assert not kinds & {ALTERNATE, FIRST, LAST} and "random" in kinds


def test_the_standard_plan_lists_sixty_runs_with_folder_safe_kinds(tmp_path):
    lines = plan_commands(resolve(Options("hybrid", "standard", seeds=3, out=tmp_path, lrs=())), ExperimentConfig.from_file,
                          log=lambda line: None)
    assert len(lines) == 60
    assert sum(f"--attention {LAST} " in line for line in lines) == 6
    assert all("--set model.n_layers=4" in line for line in lines)
    assert any(f"{tmp_path}/runs/lm-{RECALL}/{THIRD}/seed2 " in line for line in lines)
    assert any("train.max_steps=1200" in line for line in lines) and any("train.max_steps=1600" in line for line in lines)
    assert all("--set model.positions=rope" in line for line in lines)
    # the preset sweeps learning rates, so its later runs follow from the finished ones: not plannable as a whole
    with pytest.raises(ValueError, match="a study with --lrs or --positions chooses"):
        main(["plan", "--preset", "hybrid", "--size", "standard", "--seeds", "3", "--out", str(tmp_path)])


def test_the_preset_sweeps_learning_rates_around_the_baselines_studys_choices():
    assert PRESETS["hybrid"].lrs == (9e-4, 3e-3, 1e-2, 3.3e-2)


def test_compare_kinds_are_separated_by_spaces_a_comma_joins_layers(tmp_path, monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr("synthesizer.comparison.main.run_study",
                        lambda study: seen.update(vars(study.options)) or Results({"runs": [1]}))
    assert main(["run", "--preset", "lm", "--kinds", "vanilla", "R,V", "--baselines", "none,linformer",
                 "--out", str(tmp_path)]) == 0
    assert seen["kinds"] == ["vanilla", "R,V"] and seen["baselines"] == ["none", "linformer"]
    # the comma used to separate kinds: the new meaning is said, once per such kind
    assert capsys.readouterr().err.count("note: --kinds 'R,V' is one model with a kind per layer") == 1
    with pytest.raises(ValueError, match="attention of layer 1 .*'bogus'"):
        run_comparison("lm", "quick", kinds=["random,bogus"], out=tmp_path / "x", run_fn=HybridRunner(),
                       config_fn=config_fn, load_fn=None, log=lambda line: None)


def test_the_attention_maps_go_layer_by_layer_each_with_its_kind():
    from synthesizer.comparison.attention_maps import attention_maps
    from synthesizer.models import LanguageModel, ModelConfig

    lm = LanguageModel(ModelConfig(vocab_size=64, d_model=16, n_heads=2, n_layers=4, max_len=16, attention=FIRST))
    maps = attention_maps(lm.eval(), list(range(3, 13)))
    assert [(m["index"], m["kind"]) for m in maps] == [(0, "vanilla"), (1, "random"), (2, "random"), (3, "random")]
    assert maps[0]["source"] == "sample input" and maps[1]["source"].startswith("softmax(R)")


def test_the_quick_hybrid_preset_trains_for_real(tmp_path, monkeypatch):
    """The quick form, shrunk to seconds: vanilla, vanilla in the first layer only and none, a few steps."""
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--preset", "hybrid", "--size", "quick", "--kinds", "vanilla", FIRST, "--baselines", "none",
                 "--steps", "3", "--set", "data.limit=64", "--no-heatmaps", "--lrs", "3e-3", "--out", "study"])
    assert code == 0
    assert (tmp_path / "study" / "tuning.json").is_file()  # the learning-rate protocol, at one rate here
    results = Results.load(tmp_path / "study" / "tuned")
    record = next(r for r in results.runs if r["attention"] == FIRST)
    assert [layer["kind"] for layer in record["params"]["by_layer"]] == ["vanilla", "random", "random", "random"]
    # seed 0 trained in the sweep's folder, which the tuned comparison reads it from
    assert (tmp_path / "study" / "lr-0.003" / "runs" / f"lm-{RECALL}" / FIRST / "seed0" / "result.json").is_file()
    assert FIRST in results.timings["lm-sotu-subset"]["kinds"]
    md = (tmp_path / "study" / "tuned" / "report.md").read_text()
    assert f"| {FIRST} | 0 (1 of 4) | 1 |" in md and "### Against the 2025 finding" in md
