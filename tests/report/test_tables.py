"""The comparison table: seed aggregation, ratios to vanilla, and diverged / failed / at-chance variants."""

import math

import pytest

from synthesizer.report.groups import build_groups
from synthesizer.report.tables import fmt_metric, table_rows, text_table


def result(kind, seed=0, value=50.0, *, task="lm", data="sotu", metric="perplexity", higher=False, speed=1000.0,
           params=1000, attn=100, diverged=False, baselines=None):
    return {"task": task, "data": data, "attention": kind, "seed": seed, "primary_metric": metric,
            "higher_is_better": higher, "test_metrics": {metric: value, "loss": math.log(value)},
            "params": {"total": params, "attention_logits": attn}, "train_tokens_per_s": speed,
            "train_time_s": 100000.0 / speed, "steps": 10, "diverged": diverged,
            "baselines": baselines if baselines is not None else {"unigram_perplexity": 400.0}, "curve": []}


def test_seeds_are_aggregated_and_compared_with_vanilla():
    runs = [result("vanilla", 0, 40.0), result("vanilla", 1, 44.0, speed=1200.0),
            result("random", 0, 48.0, speed=2000.0, params=3000, attn=300), result("random", 1, 52.0, speed=2000.0, params=3000, attn=300)]
    (group,) = build_groups(runs)
    assert group.key == "lm-sotu" and group.metric == "perplexity" and not group.higher_is_better
    assert [r.kind for r in group.rows] == ["vanilla", "random"]  # the paper's order, not the input order
    van, rnd = group.rows
    assert van.metric_mean == pytest.approx(42.0) and van.metric_std == pytest.approx(math.sqrt(8.0))
    assert rnd.rel_metric == pytest.approx((50.0 - 42.0) / 42.0)
    assert rnd.rel_params_total == pytest.approx(3.0) and rnd.rel_params_attention == pytest.approx(3.0)
    assert rnd.rel_speed == pytest.approx(2000.0 / 1100.0)
    assert van.status == rnd.status == "ok" and rnd.n_ok == 2
    assert "loss" in rnd.other_metrics


def test_median_window_speed_is_preferred_over_the_mean():
    run = result("vanilla", speed=500.0)
    run["train_tokens_per_s_median"] = 800.0
    (group,) = build_groups([run])
    assert group.rows[0].tokens_per_s == 800.0


def test_diverged_failed_and_chance_variants_are_reported_not_hidden():
    runs = [result("vanilla", 0, 40.0), result("vanilla", 1, 41.0),
            result("random", 0, 45.0), result("random", 1, 1e9, diverged=True),
            result("dense", 0, 99.0, diverged=True),
            {"task": "lm", "data": "sotu", "attention": "linformer", "seed": 0, "error": "ImportError: no linformer"},
            result("fixed_random", 0, 450.0)]  # worse than the unigram model (400)
    (group,) = build_groups(runs)
    rows = {r.kind: r for r in group.rows}
    assert rows["random"].status == "ok; diverged 1/2 seeds"
    assert rows["random"].metric_mean == 45.0 and rows["random"].n_ok == 1  # the diverged seed is left out
    assert rows["dense"].status == "diverged" and rows["dense"].metric_mean is None
    assert rows["linformer"].status == "failed" and rows["linformer"].errors == ["ImportError: no linformer"]
    assert rows["fixed_random"].status == "at chance"
    header, cells = table_rows(group)
    by_kind = {c[0]: c for c in cells}
    assert by_kind["dense"][1] == "n/a" and by_kind["dense"][-1] == "diverged"
    assert by_kind["random"][header.index("seeds")] == "1/2"
    text = text_table(header, cells)
    assert "linformer" in text and "failed" in text


def test_chance_for_accuracy_uses_the_majority_class():
    runs = [result("vanilla", 0, 0.72, task="classification", data="spam", metric="accuracy", higher=True,
                   baselines={"majority_accuracy": 0.71}),
            result("random", 0, 0.90, task="classification", data="spam", metric="accuracy", higher=True,
                   baselines={"majority_accuracy": 0.71})]
    (group,) = build_groups(runs)
    assert group.row("vanilla").status == "at chance" and group.row("random").status == "ok"
    assert "majority" in group.chance["why"]


def test_one_group_per_task_and_data_without_vanilla():
    runs = [result("random", data="a"), result("dense", data="b")]
    groups = build_groups(runs)
    assert [g.key for g in groups] == ["lm-a", "lm-b"]
    assert groups[0].rows[0].rel_metric is None  # no vanilla: no ratios


def test_metric_formatting():
    assert fmt_metric(0.8123, 0.01, "accuracy") == "0.812 ± 0.010"
    assert fmt_metric(123.45, None, "perplexity") == "123.5"
    assert fmt_metric(None, None, "bleu") == "n/a"


def test_attention_params_include_a_baselines_projections():
    run = result("linformer")
    run["params"] = {"total": 900, "attention_logits": 0,
                     "by_component": {"embeddings": 500, "attention.query_key": 100, "attention.projections": 200,
                                      "attention.values_output": 100}}
    (group,) = build_groups([run])
    assert group.rows[0].params_attention == 300  # Q/K + E/F, not values/output
    assert "train tokens/s" in table_rows(group)[0]


def test_a_diverged_run_is_shown_with_its_step():
    runs = [result("vanilla", 0, 40.0), result("random", 0, 45.0), {**result("random", 1, 1e9, diverged=True), "diverged_step": 17},
            {**result("dense", 0, 99.0, diverged=True), "diverged_step": 3}]
    rows = {r.kind: r for r in build_groups(runs)[0].rows}
    assert rows["random"].status == "ok; diverged 1/2 seeds at step 17"
    assert rows["dense"].status == "diverged at step 3"
    _, cells = table_rows(build_groups(runs)[0])
    assert {c[0]: c for c in cells}["dense"][-1] == "diverged at step 3"


def test_kinds_trained_at_their_own_rates_show_them_and_the_setup_keeps_only_what_all_share():
    from synthesizer.report.document import shared_setup

    def at(kind, seed, value, lr):
        record = result(kind, seed, value)
        record["config"] = {"task": "lm", "seed": seed, "model": {"attention": kind, "d_model": 64},
                            "train": {"lr": lr, "max_steps": 10}, "init_from": f"pretrain/{kind}/seed{seed}"}
        return record

    runs = [at("vanilla", 0, 40.0, 0.033), at("vanilla", 1, 41.0, 0.033), at("random", 0, 45.0, 0.01)]
    (group,) = build_groups(runs)
    header, cells = table_rows(group)
    assert header[1] == "learning rate"
    assert [c[1] for c in cells] == ["0.033", "0.01"]
    shown, differs = shared_setup([r["config"] for r in runs])
    assert shown == {"task": "lm", "model": {"d_model": 64}, "train": {"max_steps": 10}}
    assert differs == ["train.lr"]  # the seed, the kind and the pretraining folder are not setup
    # one rate for every kind: no column, and the rate is part of the shared setup
    (same,) = build_groups([at("vanilla", 0, 40.0, 0.01), at("random", 0, 45.0, 0.01)])
    assert "learning rate" not in table_rows(same)[0]
    assert shared_setup([at("vanilla", 0, 40.0, 0.01)["config"]])[0]["train"]["lr"] == 0.01
