"""Every sentence of the claims, written once from their records: a check's text and brief, a verdict's label
and one-line reason, the attention notes. Nothing else under report/ writes (or reads back) these words."""

from __future__ import annotations

import textwrap

from ..learning_facts import Provisional
from ..stats import SEEDS_CAP
from ..tables import Share, loss_text
from .floor import NONE_KIND
from .kept import BOOTSTRAP_RESAMPLES, MIN_SEEDS
from .records import (Contribution, Decide, Finding, Floor, Gate, GateReason, Interval, Need, NoneFloor, QualityGap,
                      Reason, Seeds, Side, SpeedGap, Trivial)
from .verdicts import CONTRADICTS, JUDGED, NOT_RUN, SUPPORTS, Check, Verdict

TRIVIAL_NAMES = {"unigram_perplexity": "the unigram model", "majority_accuracy": "the majority class"}
NOTHING_MEASURABLE = "attention contributes nothing measurable on this task"
CONTRIBUTION_NOT_MEASURED = "what attention contributes is not measured on this task"
NO_NONE = f"no `{NONE_KIND}` trained"
NOT_CHECKED = "so whether attention contributes anything on this task is not checked"
PROVISIONAL = "provisional: "
REASON_WIDTH = 140  # characters of a check's text in the one-line summary of a verdict


# ----------------------------------------------------------------------------- numbers and gaps

def trivial_text(trivial: Trivial | None) -> str:
    """"copying the source (copy_source_bleu 8.3)": the trivial predictor a kept share is of."""
    if trivial is None:
        return ""
    if trivial.key:
        return f"{TRIVIAL_NAMES.get(trivial.key, 'copying the source')} ({trivial.key} {trivial.value:.4g})"
    if trivial.chance is not None:
        return f"the at-chance line ({trivial.chance})"
    return "a constant prediction (0)"


def how_text(interval: Interval) -> str:
    """How a gap's interval was measured, or why nothing was."""
    how = []
    if interval.t_seeds:
        how.append(f"t-interval over {interval.t_seeds} paired seeds")
    if interval.examples:
        seeds = f", {interval.boot_seeds} seeds" if interval.boot_seeds > 1 else ""
        how.append(f"paired bootstrap over {interval.examples} test examples ({BOOTSTRAP_RESAMPLES} resamples{seeds})")
    if how:
        return "95% " + " and ".join(how)
    n = interval.seeds
    reason = (f"{n} seed: no uncertainty measured" if n <= 1 else
              f"{n} paired seeds: no uncertainty measured (a seed interval needs {MIN_SEEDS})")
    return reason + ", no per-example statistics"


def show(side: Side, metric: str) -> str:
    """"bleu 20.1 ± 0.3 (keeps 85.0%)": a variant's score as a gap shows it."""
    std = f" ± {side.std:.3g}" if side.std is not None else ""
    kept = f" (keeps {side.kept:.1%})" if side.kept is not None else ""
    return f"{metric} {side.mean:.4g}{std}{kept}"


def gap_note(gap: QualityGap) -> str:
    """The whole reading of a quality gap: both scores, the scale, the loss with its interval and how measured."""
    if gap.row.mean is None:
        return f"{gap.row.kind} diverged, {gap.ref.kind} {show(gap.ref, gap.metric)}"
    if gap.ref.mean is None:
        return f"{gap.ref.kind} diverged, {gap.row.kind} {show(gap.row, gap.metric)}"
    return (f"{gap.row.kind} {show(gap.row, gap.metric)} vs {gap.ref.kind} {show(gap.ref, gap.metric)}, kept shares of "
            f"vanilla's gain over {trivial_text(gap.over)}: {loss_brief(gap)} ({how_text(gap.interval)})")


def loss_brief(gap: QualityGap) -> str:
    """"loss +35.7% [+20.1%, +51.0%]" (a diverged side: the whole note)."""
    return gap_note(gap) if gap.interval is None else loss_text(gap.value, gap.low, gap.high)


def speed_note(gap: SpeedGap) -> str:
    """A speed gap, one at a time or side by side, with its tolerance."""
    slower = f"{abs(gap.value):.1%} {'slower' if gap.value > 0 else 'faster'} (± {gap.tolerance:.0%})"
    if gap.timing is None:
        return (f"training speed {gap.kind} {gap.speeds[0]:,.0f}/s vs {gap.ref} {gap.speeds[1]:,.0f}/s: {slower}")
    shape = f"batch {gap.timing.batch} x {gap.timing.seq} tokens"
    return (f"one-at-a-time timing of a training step of the attention layer ({shape}, median of "
            f"{gap.timing.repeats} interleaved repeats): {gap.kind} {gap.speeds[0] * 1e3:.2f} ms vs {gap.ref} "
            f"{gap.speeds[1] * 1e3:.2f} ms, {slower}")


def contribution_text(c: Contribution) -> str:
    """"random keeps 91% [85%, 97%] of what vanilla's attention adds (its gain over none)"."""
    adds = f"of what vanilla's attention adds (its gain over {NONE_KIND})"
    if c.shares is None:
        return f"{c.kind} keeps {Share(1 - c.value, 1 - c.high, 1 - c.low).text()} {adds}"
    return (f"{c.kind} keeps {c.shares[0]:.0%} and {c.ref} {c.shares[1]:.0%} {adds}: a loss of {c.value:+.1%} "
            f"[{c.low:+.1%}, {c.high:+.1%}] of it")


def seeds_text(seeds: Seeds) -> str:
    """About how many seeds would decide an interval that straddles its threshold."""
    if seeds.decide is Decide.NEVER:
        return "no number of seeds would decide: the mean is on the threshold"
    if seeds.decide is Decide.TOO_MANY:
        return f"more than {SEEDS_CAP} seeds would be needed to decide"
    if seeds.decide is Decide.SEEDS_DECIDE:
        return "the seeds alone decide; the interval over test examples does not"
    text = f"about {seeds.n} seeds would decide, if the mean and spread of these {seeds.have} held"
    if seeds.examples_straddle:
        text += " (the seed interval; the one over test examples straddles the threshold too)"
    return text


# ----------------------------------------------------------------------------- what a check found

def need_text(f: Finding, full: bool = True) -> str:
    """What a quality check asks; ``full``: with where its threshold comes from."""
    kind = f.kinds[0]
    need = {Need.AT_MOST: f"needs a loss of at most {f.threshold:.2%}", Need.BETTER: f"needs {kind} better",
            Need.BEHIND: f"needs {kind} clearly behind", Need.BEST: f"best other variant; needs {kind} better"}[f.need]
    return f"{need} ({f.source})" if full and f.source else need


def _unused_text(gaps: tuple[QualityGap, ...]) -> str:
    """"; fixed_random not clearly better than none (loss ... [..., ...], how measured)" for flagged kinds."""
    return "".join(f"; {g.row.kind} not clearly better than {NONE_KIND} ({loss_brief(g)}, {how_text(g.interval)})"
                   for g in gaps)


def _quality(f: Finding, brief: bool) -> str:
    gap = f.gap
    seeds = f"; {seeds_text(f.seeds)}" if f.seeds is not None else ""
    if brief:
        how = f" ({how_text(gap.interval)})" if gap.interval is not None else ""
        return f"{f.kinds[0]} vs {f.kinds[1]}: {loss_brief(gap)}; {need_text(f, full=False)}{how}{seeds}"
    added = f"; {contribution_text(f.contribution)}" if f.contribution is not None else ""
    return f"{gap_note(gap)}{added}; {need_text(f)}{seeds}{_unused_text(f.unused)}"


def _params(f: Finding) -> str:
    (kind, ref), (a, b) = f.kinds, f.counts
    text = f"attention parameters {kind} {a:,} vs {ref} {b:,}; needs fewer"
    if f.reason is Reason.PARAMS:
        return text
    where = f"from max_len {f.saves_from:,} on" if f.saves_from else "at no max_len up to the lengths counted"
    return f"{text}; at max_len {f.max_len} the factorization cannot save parameters (it does {where})"


def _not_timed(f: Finding, brief: bool) -> str:
    kind, ref = f.kinds
    if brief:
        return f"{kind} vs {ref} not timed one at a time"
    seen = f"; trained side by side (information only): {speed_note(f.gap)}" if f.gap is not None else ""
    return f"{kind} and {ref} were not timed one at a time (`synthesizer compare --time DIR` does it){seen}"


def finding_text(f: Finding, brief: bool = False) -> str:
    """What a check found, in words (without its group); ``brief``: the one-line form, without the details."""
    r, kinds = f.reason, f.kinds
    if r is Reason.QUALITY:
        return _quality(f, brief)
    if r is Reason.NOT_TIMED:
        return _not_timed(f, brief)
    if r in (Reason.PARAMS, Reason.PARAMS_CANNOT_SAVE):
        return _params(f)
    words = {
        Reason.NO_TASK: lambda: "no task in this run",
        Reason.NOT_ABOUT: lambda: f"the claim is about {f.family} tasks; this run has none",
        Reason.DIAGNOSTICS: lambda: ("not judged on the diagnostics, which probe what the paper's tasks leave out "
                                     "(content-based lookup); see the tables"),
        Reason.NOT_IN_RUN: lambda: f"{', '.join(kinds)} not in this run",
        Reason.AT_CHANCE: lambda: (f"{' and '.join(kinds)} {'both' if len(kinds) == 2 else 'all'} score at chance "
                                   f"({f.chance})"),
        Reason.NO_METRIC: lambda: f"no metric for {', '.join(kinds)} ({f.status})",
        Reason.NO_VANILLA: lambda: "vanilla not in this run, so there is no kept-share scale",
        Reason.VANILLA_NO_METRIC: lambda: f"vanilla has no metric ({f.status}), so there is no kept-share scale",
        Reason.NO_TRIVIAL: lambda: f"no trivial predictor's score for {f.metric}, so no kept-share scale",
        Reason.SCALE_UNDEFINED: lambda: (f"vanilla's {f.metric} {f.value:.4g} does not clearly beat "
                                         f"{trivial_text(f.trivial)}, so the kept-share scale is undefined"),
        Reason.NOT_COMPARABLE: lambda: f"{kinds[0]} vs {kinds[1]}: no comparable metric",
        Reason.NO_OTHER: lambda: f"no other variant to rank {kinds[0]} against",
        Reason.TIMED: lambda: f"{speed_note(f.gap)}; needs {kinds[0]} faster",
        Reason.NO_PARAM_COUNT: lambda: f"no attention parameter count for {kinds[0]} or {kinds[1]}",
    }
    return words[r]()


def floor_text(floor: NoneFloor) -> str:
    """Why a pass says nothing about attention: a model without it passes (or may pass) too."""
    if floor.floor is Floor.NOT_CHECKED:
        return f"{NO_NONE}, so whether a model without attention passes this test too is not checked"
    if floor.floor is Floor.NOT_MEASURED:
        return (f"whether a model without attention passes this test too is not measured "
                f"({finding_text(floor.cause)})")
    gap = floor.gap
    if floor.ref == "vanilla":
        shown = f"{NONE_KIND} keeps {Share(1 - gap.value, 1 - gap.high, 1 - gap.low).text()} of vanilla's gain"
    else:
        shown = f"{NONE_KIND} vs {floor.ref}: {loss_brief(gap)}"
    return f"{shown}: no attention {'passes' if floor.floor is Floor.PASSES else 'may pass'} this test too"


def learning_words(learning: Provisional) -> str:
    """"vanilla still learning and not clearly above the unigram model"."""
    parts = ["still learning"] if learning.still_learning else []
    parts += [f"not clearly above {predictor}" for predictor in learning.unclear]
    return f"vanilla {' and '.join(parts)}"


# ----------------------------------------------------------------------------- the gate

def gate_why(gate: Gate) -> str:
    """Why the gate stops or qualifies the checks of its task, in a few words."""
    return {GateReason.USES: "", GateReason.NOTHING_MEASURABLE: NOTHING_MEASURABLE,
            GateReason.CONTRIBUTION_NOT_MEASURED: CONTRIBUTION_NOT_MEASURED, GateReason.NO_NONE: NO_NONE,
            GateReason.NONE_NO_METRIC: f"`{NONE_KIND}` has no metric ({gate.status})",
            GateReason.NO_VANILLA: "vanilla not in this run",
            GateReason.VANILLA_NO_METRIC: f"vanilla has no metric ({gate.status})"}[gate.reason]


def gate_text(gate: Gate, brief: bool = False) -> str:
    """"attention contributes nothing measurable on this task (vanilla vs none: ...)" where it does not;
    "provisional: no `none` trained, so ... not checked" where that is not checked; ``brief``: the interval
    only (or only why it is not checked)."""
    why = gate_why(gate)
    if gate.use is None:
        return why if brief else f"{PROVISIONAL}{why}, {NOT_CHECKED}"
    if gate.use:
        return ""
    gap = gate.gap
    if gap.over is None:  # no kept-share unit: the raw scores say it
        detail = f"{show(gap.row, gap.metric)} vs {show(gap.ref, gap.metric)}"
    elif brief:
        detail = loss_brief(gap)
    else:
        seeds = f"; {seeds_text(gate.seeds)}" if gate.seeds is not None else ""
        detail = (f"{show(gap.row, gap.metric)} vs {show(gap.ref, gap.metric)}: {loss_brief(gap)} "
                  f"({how_text(gap.interval)}){seeds}")
    return f"{why} (vanilla vs {NONE_KIND}: {detail})"


def attention_note(gate: Gate) -> str:
    """What the claims say first about a task whose gate is not open (without the task's key)."""
    then = "every check on it cannot tell" if gate.use is False else "its verdicts below are provisional"
    return f"{gate_text(gate)}; {then}"


# ----------------------------------------------------------------------------- a check

def _provisional(check: Check, brief: bool) -> str:
    """The one "provisional: ..." a check says first, naming every reason (its task's use of attention not
    checked, then the learning facts'); "" where its verdict stands as it is."""
    unchecked, learning = check.unchecked, check.learning
    if unchecked is None:
        return "" if learning is None else f"{PROVISIONAL}{learning_words(learning)}"
    gate = f"{PROVISIONAL}{gate_why(unchecked)}" if brief else gate_text(unchecked)
    if learning is None:
        return gate
    return f"{gate}, {learning_words(learning)}" if brief else f"{gate}, and {learning_words(learning)}"


def _body(check: Check, brief: bool) -> str:
    """A check's words after its group's key: what qualifies it first, then what it found. In brief, a pass
    that ``none`` earns too, or a task where attention adds nothing measurable, says only that."""
    found = finding_text(check.finding, brief=brief)
    provisional = _provisional(check, brief)
    if provisional:
        found = f"{provisional}; {found}"
    if check.floor is not None:
        found = floor_text(check.floor) if brief else f"{floor_text(check.floor)}; {found}"
    if check.gate is not None and check.gate.use is False:
        found = gate_text(check.gate, brief=True) if brief else f"{gate_text(check.gate)}; {found}"
    return found


def check_text(check: Check) -> str:
    """A check in full: "lm-sotu: random ppl 120 vs vanilla ppl 110, ...; needs a loss of at most 1.86% (...)"."""
    return f"{check.key}: {_body(check, False)}" if check.key else finding_text(check.finding)


def check_brief(check: Check) -> str:
    """A check in one line, without the numbers' details."""
    return f"{check.key}: {_body(check, True)}" if check.key else finding_text(check.finding, brief=True)


# ----------------------------------------------------------------------------- a verdict

def verdict_reason(verdict: Verdict, width: int = REASON_WIDTH) -> str:
    """One line saying why: the first check that gave the verdict (the first contradicting or undecided
    one), or, when every check supports, how many did and the first; cut to about ``width`` characters."""
    if not verdict.checks:
        return "no check"
    if verdict.verdict == SUPPORTS:
        judged = [c for c in verdict.checks if c.verdict in JUDGED]
        n, first = len(judged), judged[0]
        text = f"{'the only check' if n == 1 else f'all {n} checks'} support: {check_brief(first)}"
    else:
        deciding = next(c for c in verdict.checks if c.verdict == verdict.verdict)
        text = check_brief(deciding)
    return textwrap.shorten(text, width, placeholder=" ...")


def label_note(verdict: Verdict) -> str:
    """What qualifies a verdict's label: "provisional: no `none` trained" where a deciding check rests on a
    task whose use of attention is not checked, "provisional: vanilla still learning" where every deciding
    check rests on a task whose vanilla had not finished learning, "on what ran; some checks not run" where a
    supported claim lacks some checks; "" otherwise."""
    deciding = [c for c in verdict.checks if c.verdict == verdict.verdict]
    why = next((gate_why(c.unchecked) for c in deciding if c.unchecked is not None), "")
    if not why and deciding and all(c.learning is not None for c in deciding):
        # one deciding check on a task that had finished learning would stand on its own
        why = learning_words(deciding[0].learning)
    if why and verdict.verdict in (SUPPORTS, CONTRADICTS):
        return f"{PROVISIONAL}{why}"
    if verdict.verdict == SUPPORTS and any(c.verdict == NOT_RUN for c in verdict.checks):
        return "on what ran; some checks not run"
    return ""


def verdict_label(verdict: Verdict, bold: bool = False) -> str:
    """"supports", or the verdict with what qualifies it in brackets ("contradicts (provisional: no `none`
    trained)"): the label the claims table and the closing summary show; ``bold``: the verdict in markdown bold."""
    note = label_note(verdict)
    shown = f"**{verdict.verdict}**" if bold else str(verdict.verdict)
    return f"{shown} ({note})" if note else shown
