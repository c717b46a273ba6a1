"""The claims section: each rule gives supports / contradicts / cannot tell from the measured numbers."""

import pytest

from synthesizer.report.claims import (CANNOT_TELL, CONTRADICTS, SUPPORTS, evaluate_claims, judge_at_most,
                                       quality_gap, Gap)
from synthesizer.report.tables import build_groups


def res(kind, value, seed=0, *, task="translation", data="bible", metric="bleu", higher=True, speed=1000.0,
        attn=100, baselines=None):
    return {"task": task, "data": data, "attention": kind, "seed": seed, "primary_metric": metric,
            "higher_is_better": higher, "test_metrics": {metric: value}, "params": {"total": 10 * attn, "attention_logits": attn},
            "train_tokens_per_s": speed, "train_time_s": 10.0, "steps": 10, "diverged": False,
            "baselines": baselines or {}}


def verdicts(runs):
    return {v.number: v for v in evaluate_claims(build_groups(runs))}


def test_judge_uses_the_spread():
    assert judge_at_most(Gap(0.02, 0.01, ""), 0.05) == SUPPORTS
    assert judge_at_most(Gap(0.08, 0.01, ""), 0.05) == CONTRADICTS
    assert judge_at_most(Gap(0.05, 0.02, ""), 0.05) == CANNOT_TELL


def test_perplexity_gap_is_on_the_log_scale():
    (g,) = build_groups([res("vanilla", 100.0, task="lm", metric="perplexity", higher=False),
                         res("random", 110.0, task="lm", metric="perplexity", higher=False)])
    gap = quality_gap(g, g.row("random"), g.row("vanilla"))
    import math
    assert gap.value == pytest.approx((math.log(110) - math.log(100)) / math.log(100))
    assert gap.u == pytest.approx(0.01)  # one seed: the fixed tolerance


def test_claims_1_2_4_supported_by_a_close_run():
    runs = [res("vanilla", 20.0), res("fixed_random", 18.0), res("random", 19.8), res("dense", 19.9),
            res("random+vanilla", 20.5), res("dense+vanilla", 20.0)]
    v = verdicts(runs)
    assert v[1].verdict == SUPPORTS
    assert v[2].verdict == SUPPORTS
    assert v[4].verdict == SUPPORTS  # dense+vanilla equal = a match
    assert any("matches" in c.text for c in v[4].checks)


def test_claims_contradicted_by_large_gaps():
    runs = [res("vanilla", 20.0), res("fixed_random", 10.0), res("random", 15.0), res("dense", 19.9),
            res("random+vanilla", 15.0), res("dense+vanilla", 20.0)]
    v = verdicts(runs)
    assert v[1].verdict == CONTRADICTS and v[2].verdict == CONTRADICTS and v[4].verdict == CONTRADICTS
    assert any("50.0%" in c.text for c in v[1].checks)  # the numbers behind the verdict are shown


def test_within_seed_spread_is_cannot_tell():
    # random's gap (5.5%) straddles the 5% threshold given the seed spread
    runs = [res("vanilla", 20.0, 0), res("vanilla", 21.0, 1), res("random", 19.0, 0), res("random", 20.0, 1),
            res("dense", 20.5, 0), res("dense", 20.6, 1)]
    v = verdicts(runs)
    assert v[2].verdict == CANNOT_TELL


def test_missing_variants_and_tasks_cannot_tell():
    v = verdicts([res("vanilla", 20.0), res("random", 19.0)])
    assert v[1].verdict == CANNOT_TELL and "not in this run" in v[1].checks[0].text
    assert v[5].verdict == CANNOT_TELL and "no lm task" in v[5].checks[0].text
    assert v[6].verdict == CANNOT_TELL and v[7].verdict == CANNOT_TELL


def test_claim3_factorized_fewer_params_faster_little_loss():
    runs = [res("vanilla", 20.0), res("random", 19.0, attn=1000, speed=1000.0),
            res("factorized_random", 18.5, attn=100, speed=1300.0),
            res("dense", 19.0, attn=500, speed=1000.0), res("factorized_dense", 18.8, attn=300, speed=1200.0)]
    assert verdicts(runs)[3].verdict == SUPPORTS
    slow = [dict(r) for r in runs]
    slow[2]["train_tokens_per_s"] = 700.0  # factorized_random clearly slower than random
    v = verdicts(slow)[3]
    assert v.verdict == CONTRADICTS and any("slower" in c.text and c.verdict == CONTRADICTS for c in v.checks)
    same_speed = [dict(r) for r in runs]
    same_speed[2]["train_tokens_per_s"] = 1020.0  # inside the 5% timing tolerance
    assert verdicts(same_speed)[3].verdict == CANNOT_TELL


def test_claims_6_and_7_on_classification():
    kw = dict(task="classification", data="spam", metric="accuracy", higher=True, baselines={"majority_accuracy": 0.5})
    runs = [res("vanilla", 0.90, **kw), res("random", 0.80, **kw), res("dense", 0.82, **kw),
            res("random+vanilla", 0.93, **kw), res("factorized_random", 0.85, speed=1500.0, **kw),
            res("linformer", 0.80, speed=1000.0, **kw)]
    v = verdicts(runs)
    assert v[6].verdict == SUPPORTS
    assert v[7].verdict == SUPPORTS
    runs[3] = res("random+vanilla", 0.85, **kw)  # clearly below vanilla: not the best
    assert verdicts(runs)[7].verdict == CONTRADICTS


def test_claim5_needs_dynamicconv_on_lm():
    kw = dict(task="lm", data="sotu", metric="perplexity", higher=False)
    runs = [res("vanilla", 100.0, **kw), res("random", 105.0, speed=1600.0, **kw),
            res("dynamicconv", 130.0, speed=1000.0, **kw)]
    assert verdicts(runs)[5].verdict == SUPPORTS
    runs[2] = res("dynamicconv", 90.0, speed=1000.0, **kw)
    assert verdicts(runs)[5].verdict == CONTRADICTS


def test_a_diverged_variant_counts_as_worst():
    runs = [res("vanilla", 20.0), res("fixed_random", 20.0), res("random", 20.0), res("dense", 20.0)]
    runs[1]["diverged"] = True
    v = verdicts(runs)
    assert v[1].verdict == CONTRADICTS and "diverged" in v[1].checks[0].text


def test_comparisons_between_variants_at_chance_cannot_tell():
    kw = dict(task="classification", data="spam", metric="accuracy", higher=True, baselines={"majority_accuracy": 0.68})
    runs = [res("vanilla", 0.685, **kw), res("fixed_random", 0.685, **kw), res("random", 0.685, **kw),
            res("dense", 0.72, **kw), res("random+vanilla", 0.685, **kw), res("factorized_random", 0.685, **kw),
            res("linformer", 0.685, **kw)]
    v = verdicts(runs)
    assert v[1].verdict == CANNOT_TELL and "both score at chance" in v[1].checks[0].text
    assert v[6].verdict == CANNOT_TELL
    # dense learned something while vanilla did not: that one comparison still counts
    assert v[7].verdict == CONTRADICTS and any(c.verdict == CONTRADICTS and "dense" in c.text for c in v[7].checks)
