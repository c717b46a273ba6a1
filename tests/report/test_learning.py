"""Did vanilla learn? The flatness of its validation curve and its margin over the trivial predictors, on synthetic
records: in the report under each table, in the closing summary, and as "provisional" in the claims' reasons."""

import math

import pytest

from synthesizer.report.claims import evaluate_claims, verdict_label, verdict_reason
from synthesizer.report.summary import print_tables
from synthesizer.report.document import build_report
from synthesizer.runs.results import Results
from synthesizer.report.learning import curve_drop
from synthesizer.report.learning_facts import FLAT_DROP, Provisional
from synthesizer.report.groups import build_groups

STEPS = 200


def curve(last_quarter_drop, start=4.0, steps=STEPS):
    """Evals every quarter; the loss falls ``last_quarter_drop`` (relative) from the eval at 75% to the last."""
    at = [start * 1.3, start * 1.1, start, start * (1 - last_quarter_drop)]
    return [{"step": steps * (i + 1) // 4, "train_loss": v, "valid_loss": v} for i, v in enumerate(at)]


def rec(kind, value, seed=0, *, task="lm", data="d", metric="perplexity", higher=False, baselines=None, drop=0.01,
        steps=STEPS, start=4.0):
    return {"task": task, "data": data, "attention": kind, "seed": seed, "primary_metric": metric,
            "higher_is_better": higher, "test_metrics": {metric: value},
            "params": {"total": 1000, "attention_logits": 100}, "train_tokens_per_s": 1000.0, "train_time_s": 10.0,
            "steps": steps, "diverged": False, "curve": curve(drop, start=start, steps=steps),
            "baselines": {"unigram_perplexity": 600.6} if baselines is None else baselines}


def seeds(kind, values, **kw):
    return [rec(kind, v, s, **kw) for s, v in enumerate(values)]


def mt(vanilla, copy=8.3, **kw):
    """A translation task scored in BLEU, copying the source at ``copy``."""
    return seeds("vanilla", vanilla, task="translation", metric="bleu", higher=True,
                 baselines={"copy_source_bleu": copy}, **kw)


def learning(runs):
    (group,) = build_groups(runs)
    return group.learning


# ----------------------------------------------------------------------------- the validation curve

def test_last_quarter_starts_at_the_eval_at_or_just_before_75_percent():
    points = [{"step": s, "valid_loss": v} for s, v in ((50, 5.0), (100, 4.5), (140, 4.0), (160, 3.0), (200, 3.9))]
    assert curve_drop(points, 200) == (pytest.approx(0.1 / 4.0), 140, 200, pytest.approx(0.1))  # 150 is 75%: the eval at 140
    assert curve_drop(points[:2] + [{"step": 150, "valid_loss": 4.0}] + points[3:], 200)[1] == 150  # at 75% itself
    assert curve_drop([{"step": 125, "valid_loss": 2.0}, {"step": 250, "valid_loss": 1.0}], 250) == (0.5, 125, 250, 1.0)
    assert curve_drop([{"step": 200, "valid_loss": 2.0}], 200) is None  # one eval: nothing to compare
    assert curve_drop([{"step": 190, "valid_loss": 2.0}, {"step": 200, "valid_loss": 1.9}], 200) is None


def test_a_flattened_curve():
    got = learning(seeds("vanilla", [325.5, 330.1, 321.0], drop=0.013))
    assert got.flatness.drop == pytest.approx(0.013) and got.flatness.flattened and not got.provisional
    assert got.curve_text() == ("vanilla's validation loss fell 1.3% over the last quarter of training "
                                f"(flattened: < {FLAT_DROP:.0%}; steps 150 to 200, mean over 3 seeds)")


def test_a_curve_still_falling_makes_the_claims_provisional_with_the_same_verdicts():
    def task(drop, data="d"):
        return (seeds("vanilla", [325.5, 330.1, 321.0], drop=drop, data=data)
                + seeds("random", [421.8, 430.2, 415.9], drop=drop, data=data)
                + seeds("dense", [326.0, 331.0, 321.5], drop=drop, data=data)
                + seeds("none", [450.0, 460.0, 445.0], drop=drop, data=data))

    def claim2(drop, *more):
        groups = build_groups(task(drop) + [r for m in more for r in m])
        # with `none` clearly behind: attention matters, nothing else is provisional
        return groups[0].learning, next(v for v in evaluate_claims(groups) if v.number == 2)

    got, falling = claim2(0.098)
    assert got.still_learning and got.provisional == Provisional(still_learning=True)
    assert got.curve_text().startswith("vanilla's validation loss fell 9.8% over the last quarter of training "
                                       "(still learning: verdicts on this task are provisional;")
    _, flat = claim2(0.01)
    assert falling.verdict == flat.verdict and [c.verdict for c in falling.checks] == [c.verdict for c in flat.checks]
    assert all(c.learning == Provisional(True) and c.provisional for c in falling.checks)
    assert not any(c.learning or c.provisional for c in flat.checks)
    assert verdict_reason(falling).startswith("lm-d: provisional: vanilla still learning; random vs vanilla: loss ")
    assert "provisional" not in verdict_reason(flat)
    # the claims table says so beside the verdict, where every deciding check is provisional
    assert falling.verdict == "contradicts"
    assert verdict_label(falling) == "contradicts (provisional: vanilla still learning)"
    assert verdict_label(flat) == "contradicts"
    # a second task that had finished learning contradicts on its own: the verdict stands unmarked
    _, both = claim2(0.098, task(0.01, data="e"))
    assert both.verdict == "contradicts" and verdict_label(both) == "contradicts"


def test_a_solved_task_has_flattened_whatever_its_relative_fall():
    """A diagnostic at 100% accuracy: the loss fell from 0.002 to 0.0005 (75%) but by 0.0015 nats."""
    got = learning(seeds("vanilla", [300.0, 301.0, 299.0], drop=0.75, start=0.002))
    assert got.flatness.drop == pytest.approx(0.75) and got.flatness.flattened and not got.still_learning
    assert "(flattened: by only 0.0015 nats, < 0.01;" in got.curve_text()
    # the same relative fall from a loss of order 1 is still learning
    assert learning(seeds("vanilla", [300.0, 301.0, 299.0], drop=0.75)).still_learning


def test_a_run_stopped_at_its_early_stopping_target_has_learned_whatever_its_last_quarter():
    """Recall learned all at once: the loss fell 88% in the run's last quarter, which ended at the target."""
    runs = seeds("vanilla", [0.99, 0.995, 0.3], metric="accuracy", higher=True, drop=0.88,
                 baselines={"chance_accuracy": 0.002})
    for run in runs:
        run["config"] = {"train": {"stop_metric": "accuracy", "stop_at": 0.99}}
    runs[0]["stopped"] = runs[1]["stopped"] = "target"
    runs[0]["steps"] = 3250
    both = learning(runs[:2])
    assert both.flatness.flattened and not both.still_learning and not both.provisional
    assert both.curve_text() == ("vanilla reached its early-stopping target (validation accuracy 0.99) in every seed "
                                 "(learned: training stopped there; step 3250, first seed)")
    # a seed that ran its whole budget is measured as before; the others are said not to count
    mixed = learning(runs)
    assert mixed.still_learning and mixed.flatness.seeds == 1
    assert mixed.curve_text().endswith("steps 150 to 200; 2 more seeds reached the early-stopping target "
                                       "(validation accuracy 0.99) and are not counted)")


def test_a_rising_curve_has_flattened_and_a_missing_one_is_said():
    assert learning(seeds("vanilla", [300.0], drop=-0.05)).curve_text().startswith(
        "vanilla's validation loss rose 5.0% over the last quarter of training (flattened")
    runs = seeds("vanilla", [300.0])
    runs[0]["curve"] = []
    got = learning(runs)
    assert got.flatness is None and not got.provisional and got.curve_text() == "no validation curve recorded for vanilla"


# ----------------------------------------------------------------------------- margins over trivial predictors

def test_vanilla_below_copy_source_bleu_is_a_warning():
    got = learning(mt([4.4, 4.5, 4.3]))
    (margin,) = got.margins
    assert not margin.clear and margin.primary
    assert margin.text().startswith("**warning: vanilla 3.9 BLEU below copying the source (4.4 vs 8.3; 95% t-interval "
                                    "over 3 seeds: [")
    assert margin.text().endswith(": no better than this trivial predictor**")
    assert got.provisional == Provisional(still_learning=False, unclear=("copying the source",))


def test_a_generation_metric_below_copying_is_no_warning_where_the_task_is_judged_by_perplexity():
    runs = seeds("vanilla", [66.0, 65.0, 67.0], task="dialogue", metric="perplexity",
                 baselines={"unigram_perplexity": 481.0, "copy_source_bleu1": 7.0})
    for run, bleu1 in zip(runs, (3.9, 4.0, 3.8)):
        run["test_metrics"]["bleu1"] = bleu1
    got = learning(runs)
    by_key = {m.key: m for m in got.margins}
    assert by_key["unigram_perplexity"].primary and by_key["unigram_perplexity"].clear
    bleu = by_key["copy_source_bleu1"]
    assert not bleu.primary and not bleu.clear
    assert "warning" not in bleu.text()
    assert bleu.text().startswith("vanilla 3.1 BLEU-1 below copying the source")
    assert bleu.text().endswith("no better than this trivial predictor (not the metric this task is judged by)")
    assert got.provisional is None  # the claims judge perplexity, where vanilla is clearly ahead


def test_translation_needs_3_bleu_above_copying_the_source_beyond_the_uncertainty():
    (small,) = learning(mt([10.0, 10.1, 9.9])).margins  # 1.7 BLEU above, a tight interval
    assert not small.clear and "the task asks for at least 3 BLEU above it**" in small.text()
    (noisy,) = learning(mt([9.0, 14.0, 16.3])).margins  # 4.8 above on average, the interval reaches below 3
    assert noisy.gain == pytest.approx(13.1 - 8.3) and not noisy.clear
    assert "not clearly above it, the 95% interval reaches" in noisy.text()
    (clear,) = learning(mt([12.1, 12.0, 12.2])).margins
    assert clear.clear and clear.text().startswith("vanilla 3.8 BLEU above copying the source (12.1 vs 8.3; 95% "
                                                   "t-interval over 3 seeds: [3.55, 4.05] BLEU, 93% to 107% of "
                                                   "vanilla's gain, the unit of the kept share)")
    # other tasks only ask for a margin beyond the uncertainty
    (dialogue,) = learning(seeds("vanilla", [10.0, 10.1, 9.9], task="dialogue", metric="bleu1", higher=True,
                                 baselines={"copy_source_bleu1": 8.3})).margins
    assert dialogue.clear and dialogue.text().startswith("vanilla 1.7 BLEU-1 above copying the source")


def test_one_seed_is_judged_on_its_point_estimate_and_says_nothing_was_measured():
    (margin,) = learning(mt([12.0])).margins
    assert margin.clear and margin.low is None
    assert "no uncertainty measured: 1 seed (a seed interval needs 3), no per-example statistics" in margin.text()


def test_per_example_statistics_give_one_seed_an_interval():
    runs = seeds("vanilla", [0.7], task="classification", metric="accuracy", higher=True,
                 baselines={"majority_accuracy": 0.6})
    runs[0]["per_example"] = {"metric": "accuracy", "kind": "accuracy", "values": [1.0] * 70 + [0.0] * 30}
    (margin,) = learning(runs).margins
    assert margin.low is not None and 0.0 < margin.low < 0.1 < margin.high  # about ± 0.09 on 100 examples
    assert margin.text().startswith("vanilla 10 accuracy points above the majority class (0.7 vs 0.6; 95% bootstrap "
                                    "over 100 test examples, the majority class held fixed: [")


def test_perplexity_margins_in_raw_units_on_the_log_scale_and_each_predictor_once():
    runs = seeds("vanilla", [325.5, 330.1, 321.0],
                 baselines={"unigram_perplexity": 600.6, "unigram_bits_per_token": 9.23})
    for r in runs:
        r["test_metrics"]["bits_per_token"] = math.log2(r["test_metrics"]["perplexity"])
    (margin,) = learning(runs).margins  # bits per token is the same fact as perplexity
    assert margin.log and margin.gain == pytest.approx(math.log(600.6) - sum(map(math.log, (325.5, 330.1, 321.0))) / 3)
    assert margin.text().startswith("vanilla 275 perplexity below the unigram model (325.5 vs 600.6; 95% t-interval")


# ----------------------------------------------------------------------------- where the facts are shown

def test_the_closing_summary_has_one_line_per_task_with_both_facts():
    runs = mt([4.4], data="libre") + seeds("vanilla", [325.5], drop=0.098)
    lines = []
    print_tables(Results({"runs": runs, "labels": {}}), lines.append)
    facts = [line for line in lines if "validation loss" in line]
    assert facts == [
        "translation-libre: vanilla's validation loss fell 1.0% over the last quarter of training (flattened); "
        "warning: vanilla 3.9 BLEU below copying the source: no better than this trivial predictor",
        "lm-d: vanilla's validation loss fell 9.8% over the last quarter of training (still learning); "
        "vanilla 275 perplexity below the unigram model"]
    assert lines.index(facts[-1]) < min(i for i, line in enumerate(lines) if line.startswith("claim "))


def test_the_report_says_it_right_under_each_table(tmp_path, monkeypatch):
    monkeypatch.setattr("synthesizer.report.plots._save", lambda fig, path: None)
    # vanilla 1.7 BLEU above copying the source: the claims are judged, but provisional
    runs = mt([10.0, 10.1, 9.9]) + seeds("fixed_random", [9.0, 9.1, 8.9], task="translation", metric="bleu",
                                         higher=True, baselines={"copy_source_bleu": 8.3})
    runs += seeds("none", [8.5, 8.7, 8.4], task="translation", metric="bleu", higher=True,
                  baselines={"copy_source_bleu": 8.3})
    md, _ = build_report(Results({"runs": runs, "labels": {}, "presets": [], "machine": {}, "commands": []}), tmp_path)
    text = md.read_text()
    after = text[text.index("\n\n", text.index("| fixed_random |")) + 2:]
    assert after.startswith("**Did vanilla learn?** Vanilla's validation loss fell 1.0% over the last quarter of "
                            "training (flattened: < 2%; steps 150 to 200, mean over 3 seeds). **warning: vanilla 1.7 "
                            "BLEU above copying the source (10 vs 8.3; ")
    assert "translation-d: provisional: vanilla not clearly above copying the source; fixed_random bleu 9" in text
    assert "<b>Did vanilla learn?</b>" in (tmp_path / "report.html").read_text()
