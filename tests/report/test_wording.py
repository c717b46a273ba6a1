"""The claims' words, written once from their records (report/claims/wording.py): golden texts."""

from __future__ import annotations

from synthesizer.report.claims import (CANNOT_TELL, CONTRADICTS, DOES_NOT_APPLY, NOT_RUN, SUPPORTS, Check, Finding,
                                       Floor, Gate, GateReason, Interval, Need, NoneFloor, QualityGap, Reason, Side,
                                       SpeedGap, Timing, Trivial, Verdict, attention_note, check_brief, check_text,
                                       verdict_label, verdict_reason)
from synthesizer.report.learning_facts import Provisional

GAP = QualityGap(0.1, 0.05, 0.15, per_seed=(0.05, 0.1, 0.15), metric="bleu", row=Side("random", 18.0, 0.5, 0.9),
                 ref=Side("vanilla", 20.0, 0.4, 1.0), over=Trivial(8.3, key="copy_source_bleu"),
                 interval=Interval(t_seeds=3))
QUALITY = Finding(Reason.QUALITY, ("random", "vanilla"), GAP, Need.AT_MOST, 0.0186, "the paper's largest: LM1B random")
FULL = ("random bleu 18 ± 0.5 (keeps 90.0%) vs vanilla bleu 20 ± 0.4 (keeps 100.0%), kept shares of vanilla's gain "
        "over copying the source (copy_source_bleu 8.3): loss +10.0% [+5.0%, +15.0%] (95% t-interval over 3 paired "
        "seeds); needs a loss of at most 1.86% (the paper's largest: LM1B random)")
BRIEF = ("random vs vanilla: loss +10.0% [+5.0%, +15.0%]; needs a loss of at most 1.86% (95% t-interval over 3 "
         "paired seeds)")
NO_NONE = Gate("mt-x", None, GateReason.NO_NONE)


def test_a_quality_check_in_full_and_in_brief():
    check = Check(CONTRADICTS, QUALITY, "mt-x")
    assert check_text(check) == f"mt-x: {FULL}"
    assert check_brief(check) == f"mt-x: {BRIEF}"


def test_one_provisional_first_names_every_reason():
    learning = Provisional(still_learning=True, unclear=("copying the source",))
    check = Check(CONTRADICTS, QUALITY, "mt-x", learning)
    assert check_text(check) == ("mt-x: provisional: vanilla still learning and not clearly above copying the "
                                 f"source; {FULL}")
    gated = Check(CONTRADICTS, QUALITY, "mt-x", learning, gate=NO_NONE)
    assert check_text(gated) == ("mt-x: provisional: no `none` trained, so whether attention contributes anything on "
                                 "this task is not checked, and vanilla still learning and not clearly above copying "
                                 f"the source; {FULL}")
    assert check_brief(gated) == ("mt-x: provisional: no `none` trained, vanilla still learning and not clearly above "
                                  f"copying the source; {BRIEF}")
    verdict = Verdict(2, "claim", "rule", CONTRADICTS, [gated])
    assert verdict_label(verdict) == "contradicts (provisional: no `none` trained)"
    assert verdict_label(Verdict(2, "claim", "rule", CONTRADICTS, [check])) == \
        "contradicts (provisional: vanilla still learning and not clearly above copying the source)"


def test_a_pass_that_none_earns_too_and_a_task_where_attention_adds_nothing():
    none = QualityGap(-0.05, -0.08, -0.02, metric="bleu", row=Side("none", 19.0), ref=Side("vanilla", 20.0),
                      over=Trivial(8.3, key="copy_source_bleu"), interval=Interval(t_seeds=3))
    floor = Check(CANNOT_TELL, QUALITY, "mt-x", floor=NoneFloor(Floor.PASSES, "vanilla", none))
    passes = "none keeps 105% [102%, 108%] of vanilla's gain: no attention passes this test too"
    assert check_text(floor) == f"mt-x: {passes}; {FULL}" and check_brief(floor) == f"mt-x: {passes}"
    tie = QualityGap(0.01, -0.02, 0.04, metric="bleu", row=Side("vanilla", 20.0, None, 1.0),
                     ref=Side("none", 19.9, None, 0.99), over=Trivial(8.3, key="copy_source_bleu"),
                     interval=Interval(examples=500, boot_seeds=1))
    gate = Gate("mt-x", False, GateReason.NOTHING_MEASURABLE, tie)
    reason = ("attention contributes nothing measurable on this task (vanilla vs none: bleu 20 (keeps 100.0%) vs bleu "
              "19.9 (keeps 99.0%): loss +1.0% [-2.0%, +4.0%] (95% paired bootstrap over 500 test examples (1000 "
              "resamples)))")
    gated = Check(CANNOT_TELL, QUALITY, "mt-x", gate=gate)
    assert check_text(gated) == f"mt-x: {reason}; {FULL}"
    assert check_brief(gated) == ("mt-x: attention contributes nothing measurable on this task (vanilla vs none: "
                                  "loss +1.0% [-2.0%, +4.0%])")
    assert attention_note(gate) == f"{reason}; every check on it cannot tell"


def test_checks_without_a_measurement():
    assert check_text(Check(NOT_RUN, Finding(Reason.NOT_IN_RUN, ("dense", "random")), "lm-a")) == \
        "lm-a: dense, random not in this run"
    assert check_text(Check(DOES_NOT_APPLY, Finding(Reason.NOT_ABOUT, family="classification"))) == \
        "the claim is about classification tasks; this run has none"
    params = Finding(Reason.PARAMS_CANNOT_SAVE, ("factorized_dense", "dense"), counts=(6000, 5000), max_len=64,
                     saves_from=128)
    assert check_text(Check(DOES_NOT_APPLY, params, "lm-a")) == (
        "lm-a: attention parameters factorized_dense 6,000 vs dense 5,000; needs fewer; at max_len 64 the "
        "factorization cannot save parameters (it does from max_len 128 on)")


def test_speeds_timed_and_side_by_side():
    timed = SpeedGap(0.25, 0.2, 0.3, kind="factorized_random", ref="random", speeds=(0.0025, 0.002), tolerance=0.05,
                     timing=Timing(8, 64, 5))
    assert check_text(Check(CONTRADICTS, Finding(Reason.TIMED, ("factorized_random", "random"), timed), "lm-a")) == (
        "lm-a: one-at-a-time timing of a training step of the attention layer (batch 8 x 64 tokens, median of 5 "
        "interleaved repeats): factorized_random 2.50 ms vs random 2.00 ms, 25.0% slower (± 5%); needs "
        "factorized_random faster")
    side = SpeedGap(-0.3, -0.35, -0.25, kind="factorized_random", ref="random", speeds=(1300.0, 1000.0), tolerance=0.05)
    check = Check(CANNOT_TELL, Finding(Reason.NOT_TIMED, ("factorized_random", "random"), side), "lm-a")
    assert check_text(check) == (
        "lm-a: factorized_random and random were not timed one at a time (`synthesizer compare --time DIR` does it); "
        "trained side by side (information only): training speed factorized_random 1,300/s vs random 1,000/s: 30.0% "
        "faster (± 5%)")
    assert check_brief(check) == "lm-a: factorized_random vs random not timed one at a time"


def test_a_verdicts_one_line_reason():
    supports = Check(SUPPORTS, Finding(Reason.PARAMS, ("factorized_dense", "dense"), counts=(300, 500)), "lm-a")
    absent = Check(NOT_RUN, Finding(Reason.NOT_IN_RUN, ("x",)), "lm-a")
    verdict = Verdict(3, "claim", "rule", SUPPORTS, [supports, absent])
    assert verdict_label(verdict) == "supports (on what ran; some checks not run)"
    assert verdict_reason(verdict) == ("the only check support: lm-a: attention parameters factorized_dense 300 vs "
                                       "dense 500; needs fewer")
    assert verdict_reason(Verdict(1, "c", "r", CONTRADICTS, [Check(CONTRADICTS, QUALITY, "mt-x")]), width=60) == \
        "mt-x: random vs vanilla: loss +10.0% [+5.0%, +15.0%]; ..."
    assert verdict_label(verdict, bold=True) == "**supports** (on what ran; some checks not run)"
    assert verdict_label(Verdict(3, "c", "r", CANNOT_TELL, [])) == "cannot tell"
