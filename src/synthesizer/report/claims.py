"""The paper's seven claims (../shared/PAPER.md), each checked by an explicit rule over the measured table.

**Scale.** Quality is compared as the **kept share**: the part of vanilla's gain over the group's trivial
predictor that a variant keeps, ``(phi(x) - phi(trivial)) / (phi(vanilla) - phi(trivial))`` with ``phi = -ln``
for perplexity and ``phi = x`` for BLEU, ROUGE, accuracy and other higher-is-better metrics. The trivial predictor
is the records' own baseline of the metric (unigram model, majority class, copying the source), else the group's
at-chance line. A variant's **loss** against a reference is the difference of their kept shares (positive = worse),
in units of vanilla's gain, so a threshold means the same at any model size. Where vanilla does not clearly beat
the trivial predictor the scale is undefined and every quality check of the group cannot tell.

**Uncertainty.** With ``MIN_SEEDS`` (3) or more seeds paired across the two variants: a 95% t-interval of the
per-seed losses. Where the records hold per-example statistics of the test metric (``per_example``, see
:mod:`.stats`): a paired bootstrap over test examples, and the union of both intervals when both exist. Otherwise
nothing is measured and the interval is unbounded: a finite gap then cannot tell, never "supports".

**Verdicts.** "At most t worse" (and "better", t = 0): *supports* when the whole interval is at or below t,
*contradicts* when it is all above t, *cannot tell* otherwise; "falls behind" is the reverse. The thresholds are the
paper's own gaps on this scale (constants below; their rows and the translation are in docs/paper_numbers.md). A
kind that diverged counts as infinitely worse. Training speed (tokens, target tokens or examples per second) is
compared with the tolerance ``SPEED_TOLERANCE`` (5%: the CPU is shared and timings drift), or the seed spread of
the speeds when larger. A claim's verdict is "contradicts" if any check contradicts, "supports" if every check
supports, and "cannot tell" otherwise, including when the run did not train a variant the claim needs. Where a
group's vanilla is still learning or does not clearly beat its trivial predictor (``Group.learning``, see
:mod:`.learning`), a quality check keeps its verdict and its text and reason start with "provisional: ...".

**The none floor.** Where a group trained ``none`` (no mixing between tokens), a variant whose loss against it
is not wholly below 0 (the same interval as above) is "not clearly better than none": its table status says so,
with that interval
(:func:`flag_unused_attention`, applied by ``groups.build_groups``) and so does every check that involves it.

**The attention gate.** Where vanilla itself is not clearly better than ``none`` (:func:`uses_attention`, the rule
above), the task measures nothing about attention: every check on it cannot tell, its reason first "attention
contributes nothing measurable on this task" (:func:`gate_check`); with no interval at all (one seed, no
per-example scores) "what attention contributes is not measured", and the table says so instead of the flag.
Where the group trained no ``none`` this cannot be checked and every decided check is marked provisional first.

**Attention's contribution.** Beside the kept share, every check and table gives each kind's share of vanilla's gain
over ``none`` (:func:`attention_scale`, log scale for perplexity): "random keeps 91% [85%, 97%] of what vanilla's
attention adds". The thresholds stay on the kept-share scale (the paper has no ``none``). A check whose interval
straddles its threshold says about how many seeds would decide it (:func:`seeds_note`). The full rules, for users:
docs/claims.md.
"""

from __future__ import annotations

import math
import statistics
import textwrap
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable

import numpy as np

from ..attention.names import PAPER_PURE
from ..data.generated import DIAGNOSTIC_CORPORA
from .stats import DEFAULT_RESAMPLES, SEEDS_CAP, bootstrap_differences, per_example_of, seeds_to_decide, t_interval
from .tables import Group, Row, Share, at_chance



class Status(str, Enum):
    """A check's or a claim's verdict. The first three judge a claim on what ran; "not run" says the kind or
    task a check needs was not trained, "does not apply" that the run holds no task of the family the claim is
    about. A str, so it compares and prints as its words."""

    SUPPORTS = "supports"
    CONTRADICTS = "contradicts"
    CANNOT_TELL = "cannot tell"
    NOT_RUN = "not run"
    DOES_NOT_APPLY = "does not apply"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


SUPPORTS, CONTRADICTS, CANNOT_TELL, NOT_RUN, DOES_NOT_APPLY = Status
JUDGED = (SUPPORTS, CONTRADICTS, CANNOT_TELL)  # the verdicts of a check that measured something
MIN_SEEDS = 3                 # paired seeds needed for a seed interval
BOOTSTRAP_RESAMPLES = DEFAULT_RESAMPLES
BOOTSTRAP_SEED = 0
SPEED_TOLERANCE = 0.05

PURE_SYNTHESIZERS = tuple(kind for kind in PAPER_PURE if kind != "vanilla")  # in the paper's order
# the trivial predictor's score in the records' "baselines", by metric (generation metrics: copy_source_<metric>)
TRIVIAL_KEYS = {"perplexity": "unigram_perplexity", "accuracy": "majority_accuracy"}
TRIVIAL_NAMES = {"unigram_perplexity": "the unigram model", "majority_accuracy": "the majority class"}
CONSTANT_PREDICTION_METRICS = ("pearson", "spearman")  # a constant prediction correlates 0


def kept_share(x: float, vanilla: float, trivial: float, log: bool = False) -> float:
    """The share of vanilla's gain over ``trivial`` that ``x`` keeps (``log``: perplexity, on the log scale)."""
    if log:
        return (math.log(trivial) - math.log(x)) / (math.log(trivial) - math.log(vanilla))
    return (x - trivial) / (vanilla - trivial)


# ----------------------------------------------------------------------------- the paper's numbers
# Each constant is a number of docs/paper_numbers.md; [n] names its row there.

# [1] WMT14 EnDe BLEU, Transformer-base (PAPER.md "Machine translation (BLEU) and LM1B"); trivial BLEU assumed 0
PAPER_ENDE = {"vanilla": 27.67, "fixed_random": 23.89, "random": 27.27, "dense": 27.43}
# [2] WMT14 EnFr BLEU, same table
PAPER_ENFR = {"vanilla": 41.57, "random": 41.12, "dense": 41.39}
# [2], [4] LM1B perplexity, same table; the unigram perplexity is not reported: assumed 1000
PAPER_LM1B = {"vanilla": 38.21, "random": 40.60, "random+vanilla": 40.05}
PAPER_LM1B_UNIGRAM = 1000.0
# [3] Narang et al. T5-base WMT EnDe BLEU (PAPER.md "Narang et al. 2021"): "factorized" is factorized dense
PAPER_T5_ENDE = {"vanilla": 26.62, "dense": 26.63, "factorized_dense": 26.42}

# [1] fixed_random keeps 86.3% of vanilla's gain on WMT14 EnDe: a loss of at most 13.7% is "passable"
PASSABLE_LOSS = 1 - kept_share(PAPER_ENDE["fixed_random"], PAPER_ENDE["vanilla"], 0.0)
# [2] the largest loss of random / dense among the paper's MT and LM1B rows (LM1B random: 1.86%)
CLOSE_LOSS = max([1 - kept_share(t[k], t["vanilla"], 0.0) for t in (PAPER_ENDE, PAPER_ENFR) for k in ("random", "dense")]
                 + [1 - kept_share(PAPER_LM1B["random"], PAPER_LM1B["vanilla"], PAPER_LM1B_UNIGRAM, log=True)])
# [3] factorized (dense) against dense, in units of vanilla's gain: 0.79%
LITTLE_LOSS = (PAPER_T5_ENDE["dense"] - PAPER_T5_ENDE["factorized_dense"]) / PAPER_T5_ENDE["vanilla"]
# [4] the largest loss the paper still presents as "match or beat" (LM1B random+vanilla): 1.44%
MATCH_LOSS = 1 - kept_share(PAPER_LM1B["random+vanilla"], PAPER_LM1B["vanilla"], PAPER_LM1B_UNIGRAM, log=True)


@dataclass
class Check:
    verdict: Status
    text: str
    brief: str = ""           # the text without the numbers' details, for one-line summaries ("" = text)
    key: str = ""             # the group it checks ("" = none in particular): the attention gate applies by it
    unchecked: str = ""       # why its task's use of attention is not checked ("no `none` trained"): provisional
    learning: str = ""        # "provisional: vanilla still learning ...": its text starts with it (report.learning)


@dataclass
class Verdict:
    number: int
    claim: str
    rule: str
    verdict: Status
    checks: list[Check] = field(default_factory=list)
    # shown beside the checks, never counted: what the run measured where the claim does not apply
    # (claim 7 on classification trained from scratch, which is not GLUE)
    readings: list[Check] = field(default_factory=list)


@dataclass
class Gap:
    """A loss (positive = worse / slower) with its interval ``[low, high]`` (unbounded: nothing measured)."""

    value: float
    low: float
    high: float
    note: str
    brief: str = ""           # "loss +35.7% [+20.1%, +51.0%]"
    how: str = ""             # how the interval was measured
    per_seed: list[float] = field(default_factory=list)  # the paired per-seed losses of the t-interval, if any
    over_examples: tuple[float, float] | None = None      # the bootstrap's interval over test examples, if any


@dataclass
class Scale:
    """The kept-share scale of a group: ``share(x) = (phi(x) - phi(trivial)) / gain``."""

    metric: str
    trivial: float
    why: str                  # "copying the source (copy_source_bleu 8.3)"
    log: bool                 # perplexity: phi = -ln x
    higher_is_better: bool
    gain: float = 0.0         # phi(vanilla) - phi(trivial), > 0 where the scale is defined
    origin: float | None = None  # phi of the share's 0 when not phi(trivial): none's mean phi (attention_scale)

    def phi(self, x: float) -> float:
        if self.log:
            return -math.log(x)
        return x if self.higher_is_better else -x

    def share(self, phi: float) -> float:
        return (phi - (self.phi(self.trivial) if self.origin is None else self.origin)) / self.gain


REASON_WIDTH = 140  # characters of a check's text in the one-line summary of a verdict


def verdict_reason(verdict: Verdict, width: int = REASON_WIDTH) -> str:
    """One line saying why: the first check that gave the verdict (the first contradicting or undecided
    one), or, when every check supports, how many did and the first; cut to about ``width`` characters."""
    if not verdict.checks:
        return "no check"
    if verdict.verdict == SUPPORTS:
        judged = [c for c in verdict.checks if c.verdict in JUDGED]
        n, first = len(judged), judged[0]
        text = f"{'the only check' if n == 1 else f'all {n} checks'} support: {first.brief or first.text}"
    else:
        deciding = next(c for c in verdict.checks if c.verdict == verdict.verdict)
        text = deciding.brief or deciding.text
    return textwrap.shorten(text, width, placeholder=" ...")


def combine(checks: list[Check]) -> Status:
    """A claim's verdict from its checks: "contradicts" if any contradicts, "supports" if every check that
    measured something supports, "cannot tell" otherwise; with no such check, "not run" where a kind or task
    it needs was not trained (or nothing was) and "does not apply" where the run holds no task it is about."""
    verdicts = {c.verdict for c in checks if c.verdict in JUDGED}
    if not verdicts:
        return DOES_NOT_APPLY if checks and all(c.verdict == DOES_NOT_APPLY for c in checks) else NOT_RUN
    if CONTRADICTS in verdicts:
        return CONTRADICTS
    return SUPPORTS if verdicts == {SUPPORTS} else CANNOT_TELL


def judge_at_most(gap: Gap, threshold: float) -> Status:
    """Is the loss at most ``threshold``? Only an interval entirely on one side decides."""
    if gap.high <= threshold:
        return SUPPORTS
    if gap.low > threshold:
        return CONTRADICTS
    return CANNOT_TELL


def judge_beyond(gap: Gap, threshold: float) -> Status:
    """Is the loss above ``threshold`` ("falls behind")? The reverse of :func:`judge_at_most`."""
    return {SUPPORTS: CONTRADICTS, CONTRADICTS: SUPPORTS}.get(judge_at_most(gap, threshold), CANNOT_TELL)


# ----------------------------------------------------------------------------- scale and uncertainty

def trivial_key(metric: str) -> str:
    """The records' ``baselines`` key of the trivial predictor of ``metric``."""
    return TRIVIAL_KEYS.get(metric, f"copy_source_{metric}")


def trivial_score(group: Group) -> tuple[float, str] | None:
    """The trivial predictor's test score for the group's metric, and what it is."""
    key = trivial_key(group.metric)
    for row in group.rows:
        if row.baselines.get(key) is not None:
            name = TRIVIAL_NAMES.get(key, "copying the source")
            return row.baselines[key], f"{name} ({key} {row.baselines[key]:.4g})"
    if group.metric in CONSTANT_PREDICTION_METRICS:
        return 0.0, "a constant prediction (0)"
    if group.chance:
        return group.chance["value"], f"the at-chance line ({group.chance['why']})"
    return None


def _phis(row: Row, scale: Scale) -> dict[int, float]:
    """phi of the metric per ok seed (seed -> value); a row without per-seed values gives its mean (key None)."""
    if row.metric_values:
        return {s: scale.phi(v) for s, v in zip(row.ok_seeds, row.metric_values)}
    return {} if row.metric_mean is None else {None: scale.phi(row.metric_mean)}


def scale_of(group: Group) -> Scale | Check:
    """The group's kept-share scale, or the "cannot tell" Check saying why it is undefined."""
    vanilla = group.row("vanilla")
    if vanilla is None or vanilla.metric_mean is None:
        why = "not in this run" if vanilla is None else f"has no metric ({vanilla.status})"
        return Check(CANNOT_TELL, f"{group.key}: vanilla {why}, so there is no kept-share scale", key=group.key)
    trivial = trivial_score(group)
    if trivial is None:
        return Check(CANNOT_TELL, f"{group.key}: no trivial predictor's score for {group.metric}, so no kept-share scale",
                     key=group.key)
    scale = Scale(group.metric, trivial[0], trivial[1], group.metric == "perplexity", group.higher_is_better)
    gains = [p - scale.phi(scale.trivial) for p in _phis(vanilla, scale).values()]
    scale.gain = statistics.fmean(gains)
    unclear = (scale.gain <= 0 or at_chance(vanilla.metric_mean, group.chance, group.higher_is_better)
               or (len(gains) >= MIN_SEEDS and t_interval(gains).low <= 0))
    if unclear:
        return Check(CANNOT_TELL, f"{group.key}: vanilla's {group.metric} {vanilla.metric_mean:.4g} does not clearly "
                                  f"beat {scale.why}, so the kept-share scale is undefined", key=group.key)
    return scale


def _per_example(row: Row, seeds: list[int], metric: str) -> dict[int, tuple[str, np.ndarray]]:
    out = {}
    for s, stats in zip(row.ok_seeds, row.per_example):
        found = per_example_of(stats, metric) if s in seeds else None
        if found:
            out[s] = (found[0], np.asarray(found[1], dtype=np.float64))
    return out


def _bootstrap(group: Group, row: Row, ref: Row, seeds: list[int]) -> tuple[np.ndarray, int, int] | None:
    """Resampled raw differences ``metric(ref) - metric(row)`` (seed-averaged) where both rows hold
    per-example statistics of the same test examples: (differences, examples, seeds)."""
    a, b = _per_example(ref, seeds, group.metric), _per_example(row, seeds, group.metric)
    both = [s for s in seeds if s in a and s in b and a[s][0] == b[s][0] and a[s][1].shape == b[s][1].shape]
    if not both or len({a[s][0] for s in both}) > 1 or len({a[s][1].shape for s in both}) > 1:
        return None
    kind = a[both[0]][0]
    diffs = bootstrap_differences(kind, np.stack([a[s][1] for s in both]), np.stack([b[s][1] for s in both]),
                                  BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED)
    return diffs, a[both[0]][1].shape[0], len(both)


def _interval(group: Group, scale: Scale, row: Row, ref: Row
              ) -> tuple[float, float, str, list[float], tuple[float, float] | None]:
    """The 95% interval of the loss of ``row`` against ``ref``, how it was measured, the paired per-seed
    losses of its t-interval ([] without one) and the bootstrap's own interval (None without one)."""
    pr, pf = _phis(row, scale), _phis(ref, scale)
    seeds = sorted((set(pr) & set(pf)) - {None})
    bounds, how, per_seed, over_examples = [], [], [], None
    if len(seeds) >= MIN_SEEDS:
        per_seed = [(pf[s] - pr[s]) / scale.gain for s in seeds]
        iv = t_interval(per_seed)
        bounds.append((iv.low, iv.high))
        how.append(f"t-interval over {len(seeds)} paired seeds")
    boot = _bootstrap(group, row, ref, seeds)
    if boot is not None and not scale.log:  # per-example kinds are higher-is-better scores
        diffs, n, k = boot
        low, high = np.quantile(diffs / scale.gain, [0.025, 0.975])
        over_examples = (float(low), float(high))
        bounds.append(over_examples)
        how.append(f"paired bootstrap over {n} test examples ({BOOTSTRAP_RESAMPLES} resamples"
                   f"{f', {k} seeds' if k > 1 else ''})")
    if not bounds:
        n = min(len(pr), len(pf))
        reason = (f"{n} seed: no uncertainty measured" if n <= 1 else
                  f"{n} paired seeds: no uncertainty measured (a seed interval needs {MIN_SEEDS})")
        return -math.inf, math.inf, reason + ", no per-example statistics", [], None
    return min(b[0] for b in bounds), max(b[1] for b in bounds), "95% " + " and ".join(how), per_seed, over_examples


def _show(row: Row, group: Group, scale: Scale | None = None) -> str:
    if row.metric_mean is None:
        return f"({row.status})"
    std = f" ± {row.metric_std:.3g}" if row.metric_std is not None else ""
    kept = ""
    if scale is not None:
        phis = _phis(row, scale)
        kept = f" (keeps {scale.share(statistics.fmean(phis.values())):.1%})"
    return f"{group.metric} {row.metric_mean:.4g}{std}{kept}"


def quality_gap(group: Group, row: Row, ref: Row, scale: Scale) -> Gap | None:
    """Loss of ``row`` against ``ref`` on the kept-share scale; None if either has no metric and did not diverge."""
    if row.metric_mean is None or ref.metric_mean is None:
        if row.diverged and ref.metric_mean is not None:
            return Gap(math.inf, math.inf, math.inf, f"{row.kind} diverged, {ref.kind} {_show(ref, group, scale)}")
        if ref.diverged and row.metric_mean is not None:
            return Gap(-math.inf, -math.inf, -math.inf, f"{ref.kind} diverged, {row.kind} {_show(row, group, scale)}")
        return None
    value = scale.share(statistics.fmean(_phis(ref, scale).values())) - scale.share(statistics.fmean(_phis(row, scale).values()))
    low, high, how, per_seed, over_examples = _interval(group, scale, row, ref)
    shown = "" if not math.isfinite(low) else f" [{low:+.1%}, {high:+.1%}]"
    note = (f"{row.kind} {_show(row, group, scale)} vs {ref.kind} {_show(ref, group, scale)}, kept shares of vanilla's "
            f"gain over {scale.why}: loss {value:+.1%}{shown} ({how})")
    return Gap(value, low, high, note, f"loss {value:+.1%}{shown}", how, per_seed, over_examples)


def slowdown(row: Row, ref: Row) -> Gap | None:
    """Relative speed deficit of ``row`` against ``ref`` (positive = slower), from training speed (units per second)."""
    if not row.tokens_per_s or not ref.tokens_per_s:
        return None
    value = (ref.tokens_per_s - row.tokens_per_s) / ref.tokens_per_s
    spread = ((row.tokens_per_s_std or 0.0) + (ref.tokens_per_s_std or 0.0)) / ref.tokens_per_s
    u = max(spread, SPEED_TOLERANCE)
    note = (f"training speed {row.kind} {row.tokens_per_s:,.0f}/s vs {ref.kind} {ref.tokens_per_s:,.0f}/s: "
            f"{abs(value):.1%} {'slower' if value > 0 else 'faster'} (± {u:.0%})")
    return Gap(value, value - u, value + u, note)


def _scored_at_chance(row: Row | None) -> bool:
    return row is not None and row.at_chance


def _missing(group: Group, *kinds: str) -> Check | None:
    """A "not run" check when a variant is absent; a "cannot tell" one when a variant has no metric, or when
    every variant compared scored at chance (then their differences are noise, not signal)."""
    absent = [k for k in kinds if group.row(k) is None]
    if absent:
        return Check(NOT_RUN, f"{group.key}: {', '.join(absent)} not in this run", key=group.key)
    if len(kinds) > 1 and all(_scored_at_chance(group.row(k)) for k in kinds):
        return Check(CANNOT_TELL, f"{group.key}: {' and '.join(kinds)} {'both' if len(kinds) == 2 else 'all'} score at "
                                  f"chance ({group.chance.get('why', '')})", key=group.key)
    no_metric = [k for k in kinds if group.row(k).metric_mean is None and not group.row(k).diverged]
    if no_metric:
        return Check(CANNOT_TELL, f"{group.key}: no metric for {', '.join(no_metric)} ({group.row(no_metric[0]).status})",
                     key=group.key)
    return None


def _quality_gap(group: Group, kind: str, ref: str) -> Gap | Check:
    """The loss of ``kind`` vs ``ref``, or the "cannot tell" Check that stands in for it."""
    missing = _missing(group, kind, ref)
    if missing:
        return missing
    scale = scale_of(group)
    if isinstance(scale, Check):
        return scale
    gap = quality_gap(group, group.row(kind), group.row(ref), scale)
    return gap if gap is not None else Check(CANNOT_TELL, f"{group.key}: {kind} vs {ref}: no comparable metric",
                                             key=group.key)


def _gap_check(group: Group, kind: str, ref: str, threshold: float, what: str, judge=judge_at_most) -> Check:
    """Check the loss of ``kind`` vs ``ref`` against ``threshold`` (``judge_at_most``: at most; ``judge_beyond``: above)."""
    gap = _quality_gap(group, kind, ref)
    if isinstance(gap, Check):
        return gap
    need = what.split(" (")[0]  # the requirement without where its threshold comes from
    # a verdict on a task whose vanilla is still learning (report.learning) stands, flagged first in its reason
    provisional = group.learning.provisional if group.learning is not None else ""
    where = f"{group.key}: {provisional}; " if provisional else f"{group.key}: "
    verdict = judge(gap, threshold)
    contribution = _contribution_note(group, kind, ref, gap)
    seeds = seeds_note(gap, threshold) if verdict == CANNOT_TELL else ""
    brief = (f"{where}{kind} vs {ref}: {gap.brief or gap.note}; {need}{f' ({gap.how})' if gap.how else ''}"
             f"{f'; {seeds}' if seeds else ''}")
    text = (f"{where}{gap.note}{f'; {contribution}' if contribution else ''}; {what}"
            f"{f'; {seeds}' if seeds else ''}{_attention_use_note(group, kind, ref)}")
    floor = no_attention_passes(group, ref, threshold) if verdict == SUPPORTS and judge is judge_at_most else ""
    if floor:  # a pass that a model without attention earns too says nothing about attention
        return Check(CANNOT_TELL, f"{group.key}: {floor}; {text.removeprefix(f'{group.key}: ')}",
                     f"{group.key}: {floor}", group.key)
    return Check(verdict, text, brief, group.key, learning=provisional)


def no_attention_passes(group: Group, ref: str, threshold: float) -> str:
    """The floor of an "at most ``threshold`` worse than ``ref``" check: "" where ``none`` (no mixing between
    tokens) clearly fails it (its whole loss interval above ``threshold``), so passing it says something about
    attention; else why a pass does not ("none keeps 93% [92%, 94%] of vanilla's gain: no attention passes
    this test too"), which turns the pass into "cannot tell". Without ``none`` it cannot be checked."""
    if group.row(NONE_KIND) is None:
        return f"{NO_NONE}, so whether a model without attention passes this test too is not checked"
    gap = _quality_gap(group, NONE_KIND, ref)
    if isinstance(gap, Check):
        return f"whether a model without attention passes this test too is not measured ({gap.text.split(': ', 1)[-1]})"
    verdict = judge_at_most(gap, threshold)
    if verdict == CONTRADICTS:
        return ""
    if ref == "vanilla":
        shown = f"{NONE_KIND} keeps {Share(1 - gap.value, 1 - gap.high, 1 - gap.low).text()} of vanilla's gain"
    else:
        shown = f"{NONE_KIND} vs {ref}: {gap.brief or gap.note}"
    return f"{shown}: no attention {'passes' if verdict == SUPPORTS else 'may pass'} this test too"


def timed_slowdown(timing: dict, kind: str, ref: str) -> Gap | None:
    """Relative slowdown of ``kind`` against ``ref`` (positive = slower) in the group's one-at-a-time timing
    (comparison/timing.py): the median of the paired per-repeat ratios of step times, less 1, give or take
    ``SPEED_TOLERANCE`` or half the ratios' interquartile range if larger; None where either was not timed."""
    kinds = timing.get("kinds", {})
    if kind not in kinds or ref not in kinds:
        return None
    ratios = [a / b for a, b in zip(kinds[kind]["step_s"], kinds[ref]["step_s"]) if b > 0]
    if not ratios:
        return None
    value = statistics.median(ratios) - 1.0
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    u = max(SPEED_TOLERANCE, (q3 - q1) / 2)
    shape = f"batch {timing.get('batch')} x {timing.get('seq')} tokens"
    note = (f"one-at-a-time timing of a training step of the attention layer ({shape}, median of {len(ratios)} "
            f"interleaved repeats): {kind} {kinds[kind]['median_s'] * 1e3:.2f} ms vs {ref} "
            f"{kinds[ref]['median_s'] * 1e3:.2f} ms, {abs(value):.1%} {'slower' if value > 0 else 'faster'} (± {u:.0%})")
    return Gap(value, value - u, value + u, note)


def _faster_check(group: Group, kind: str, ref: str) -> Check:
    """Is ``kind`` faster than ``ref``? Judged from the group's one-at-a-time timing only; the speeds of runs
    trained side by side are quoted as information where there is none."""
    gap = None if group.timing is None else timed_slowdown(group.timing, kind, ref)
    if gap is None:
        side_by_side = slowdown(group.row(kind), group.row(ref))
        seen = f"; trained side by side (information only): {side_by_side.note}" if side_by_side else ""
        return Check(CANNOT_TELL, f"{group.key}: {kind} and {ref} were not timed one at a time (`synthesizer compare "
                                  f"--time DIR` does it){seen}", f"{group.key}: {kind} vs {ref} not timed one at a time",
                     group.key)
    # faster = slowdown < 0, i.e. slowdown <= 0 with the margin
    return Check(judge_at_most(gap, 0.0), f"{group.key}: {gap.note}; needs {kind} faster", key=group.key)


# ----------------------------------------------------------------------------- the `none` floor

NONE_KIND = "none"  # the token mixer without mixing (attention/none.py): each position keeps its own value
NO_ATTENTION_USE = f"not clearly better than {NONE_KIND}"  # the interval fails to exclude no gain: said with it
USE_NOT_MEASURED = "use of attention not measured"  # against none, with no interval: one seed, no per-example scores


def attention_use_gap(group: Group, kind: str) -> Gap | None:
    """The loss of ``kind`` against the group's ``none`` row (negative = better than no mixing), with the
    claims' interval; None without a ``none`` row or a metric on either side. Where the kept-share scale
    is undefined the loss is in raw units of the metric (phi): only the sign of the interval matters here."""
    row, floor = group.row(kind), group.row(NONE_KIND)
    if kind == NONE_KIND or row is None or floor is None or row.metric_mean is None or floor.metric_mean is None:
        return None
    scale = scale_of(group)
    if isinstance(scale, Check):
        scale = Scale(group.metric, 1.0, "", group.metric == "perplexity", group.higher_is_better, gain=1.0)
    return quality_gap(group, row, floor, scale)


def uses_attention(group: Group, kind: str) -> bool | None:
    """Is ``kind`` clearly better than ``none`` (the whole 95% interval of its loss against none below 0, as
    the claims' "better" checks)? None where the group has no ``none`` row or either has no metric. The one
    rule behind the tables' flag and the claims' attention gate."""
    gap = attention_use_gap(group, kind)
    # strictly below 0: identical predictions give a bootstrap interval of exactly [0, 0], which is no gain
    return None if gap is None else gap.high < 0.0


def measured(gap: Gap) -> bool:
    """Was an interval measured for ``gap`` (not the unbounded one of a single seed without per-example scores)?"""
    return not (gap.low == -math.inf and gap.high == math.inf)


def flag_unused_attention(group: Group) -> None:
    """Mark every row not clearly better than ``none`` (:func:`uses_attention`): ``ignores_attention`` and a
    status note; where no interval could be measured, only the note that says so. Only where the group trained
    ``none``."""
    for row in group.rows:
        if uses_attention(group, row.kind) is not False:
            continue
        if row.attention_note:  # flagged already
            continue
        gap = attention_use_gap(group, row.kind)
        row.ignores_attention = measured(gap)
        row.attention_note = NO_ATTENTION_USE if row.ignores_attention else USE_NOT_MEASURED
        interval = f" ({gap.brief or gap.note})" if row.ignores_attention else ""
        row.status = f"{row.status}; {row.attention_note}{interval}"


# ----------------------------------------------------------------------------- attention's contribution

NOTHING_MEASURABLE = "attention contributes nothing measurable on this task"
CONTRIBUTION_NOT_MEASURED = "what attention contributes is not measured on this task"
NO_NONE = f"no `{NONE_KIND}` trained"
NOT_CHECKED = "so whether attention contributes anything on this task is not checked"
NO_NONE_PROVISIONAL = f"provisional: {NO_NONE}, {NOT_CHECKED}"


def attention_scale(group: Group) -> Scale | None:
    """The scale of attention's contribution: ``share(x) = (phi(x) - phi(none)) / (phi(vanilla) - phi(none))``,
    phi of each the mean over its ok seeds (log scale for perplexity, as the kept share). None without
    ``none`` or vanilla metrics, or where vanilla is not better than ``none`` on average (no gain to share)."""
    vanilla, floor = group.row("vanilla"), group.row(NONE_KIND)
    if vanilla is None or floor is None or vanilla.metric_mean is None or floor.metric_mean is None:
        return None
    scale = Scale(group.metric, floor.metric_mean, f"{NONE_KIND} (no mixing)", group.metric == "perplexity",
                  group.higher_is_better)
    scale.origin = statistics.fmean(_phis(floor, scale).values())
    scale.gain = statistics.fmean(_phis(vanilla, scale).values()) - scale.origin
    return scale if scale.gain > 0 else None


def share_of(group: Group, kind: str, scale: Scale) -> Share | None:
    """``kind``'s share of vanilla's gain on ``scale`` (kept share: :func:`scale_of`; attention's: :func:`attention_scale`),
    its interval ``1 -`` that of its loss against vanilla (the claims' interval); None without a metric."""
    row, vanilla = group.row(kind), group.row("vanilla")
    if row is None or vanilla is None or row.metric_mean is None or vanilla.metric_mean is None:
        return None
    value = scale.share(statistics.fmean(_phis(row, scale).values()))
    if kind == "vanilla":
        return Share(1.0, 1.0, 1.0)
    low, high, *_ = _interval(group, scale, row, vanilla)
    return Share(value, 1.0 - high, 1.0 - low)


def put_shares(group: Group) -> None:
    """Each row's ``kept`` (share of vanilla's gain over the trivial predictor) and ``attention_share`` (of
    vanilla's gain over ``none``), where the scales are defined; the latter only where vanilla clearly beats none."""
    scale = scale_of(group)
    attention = attention_scale(group) if uses_attention(group, "vanilla") else None
    for row in group.rows:
        row.kept = None if isinstance(scale, Check) else share_of(group, row.kind, scale)
        row.attention_share = None if attention is None else share_of(group, row.kind, attention)


def _contribution_note(group: Group, kind: str, ref: str, gap: Gap) -> str:
    """"random keeps 91% [85%, 97%] of what vanilla's attention adds (its gain over none)": the loss ``gap``
    re-expressed in units of vanilla's gain over ``none`` (both intervals are linear in the unit, so the
    kept share's interval rescales exactly); "" where vanilla does not clearly beat ``none`` or is absent."""
    attention, scale = attention_scale(group), scale_of(group)
    if attention is None or isinstance(scale, Check) or not uses_attention(group, "vanilla"):
        return ""
    if not (math.isfinite(gap.value) and math.isfinite(gap.low) and math.isfinite(gap.high)):
        return ""
    unit = scale.gain / attention.gain
    value, low, high = gap.value * unit, gap.low * unit, gap.high * unit
    adds = f"of what vanilla's attention adds (its gain over {NONE_KIND})"
    if ref == "vanilla":
        return f"{kind} keeps {Share(1 - value, 1 - high, 1 - low).text()} {adds}"
    kept = {k: attention.share(statistics.fmean(_phis(group.row(k), attention).values())) for k in (kind, ref)}
    return (f"{kind} keeps {kept[kind]:.0%} and {ref} {kept[ref]:.0%} {adds}: a loss of {value:+.1%} "
            f"[{low:+.1%}, {high:+.1%}] of it")


def seeds_note(gap: Gap, threshold: float) -> str:
    """For an interval that straddles ``threshold``: about how many seeds would decide, from the paired
    per-seed losses (their mean and spread held), or "" where there are none."""
    if len(gap.per_seed) < 2:
        return ""
    n = seeds_to_decide(gap.per_seed, threshold)
    if n is None:
        return "no number of seeds would decide: the mean is on the threshold"
    if n > SEEDS_CAP:
        return f"more than {SEEDS_CAP} seeds would be needed to decide"
    if n <= len(gap.per_seed):  # the seeds decide; the interval over test examples is the wider one
        return "the seeds alone decide; the interval over test examples does not"
    text = f"about {n} seeds would decide, if the mean and spread of these {len(gap.per_seed)} held"
    if gap.over_examples is not None and gap.over_examples[0] <= threshold <= gap.over_examples[1]:
        text += " (the seed interval; the one over test examples straddles the threshold too)"
    return text


def attention_gate(group: Group) -> tuple[bool | None, str, str]:
    """Does attention matter on this task? ``(use, reason, brief)``: (True, "", "") where vanilla clearly beats
    ``none``; (False, "attention contributes nothing measurable on this task (vanilla vs none: ...)", the same
    with the interval only) where it does not; (None, "provisional: no `none` trained, so ... not checked",
    "no `none` trained") where it cannot be checked (or: `none` or vanilla has no metric)."""
    use = uses_attention(group, "vanilla")
    vanilla, floor = group.row("vanilla"), group.row(NONE_KIND)
    if use is None:
        if floor is None:
            why = NO_NONE
        elif floor.metric_mean is None:
            why = f"`{NONE_KIND}` has no metric ({floor.status})"
        else:
            why = "vanilla not in this run" if vanilla is None else f"vanilla has no metric ({vanilla.status})"
        return None, f"provisional: {why}, {NOT_CHECKED}", why
    if use:
        return True, "", ""
    gap = attention_use_gap(group, "vanilla")
    scale = scale_of(group)
    if isinstance(scale, Check):  # no kept-share unit: the raw scores say it
        detail = brief = f"{_show(vanilla, group)} vs {_show(floor, group)}"
    else:
        detail = f"{_show(vanilla, group, scale)} vs {_show(floor, group, scale)}: {gap.brief or gap.note} ({gap.how})"
        brief = gap.brief or gap.note
        seeds = seeds_note(gap, 0.0)
        detail += f"; {seeds}" if seeds else ""
    # one seed without per-example scores: vanilla may well be ahead, but by how much is unknown
    why = NOTHING_MEASURABLE if measured(gap) else CONTRIBUTION_NOT_MEASURED
    return False, f"{why} (vanilla vs {NONE_KIND}: {detail})", f"{why} (vanilla vs {NONE_KIND}: {brief})"


def gate_check(check: Check, group: Group, gate: tuple[bool | None, str, str] | None = None) -> Check:
    """``check`` under its group's attention gate (``gate``: :func:`attention_gate` of the group, if known):
    "cannot tell" with the reason first where attention contributes nothing measurable; a decided check
    marked provisional first where it cannot be checked (no ``none`` trained)."""
    use, reason, short = gate or attention_gate(group)
    if use or check.key != group.key or check.verdict not in JUDGED:
        return check
    rest = check.text.removeprefix(f"{group.key}: ")
    if use is False:
        return Check(CANNOT_TELL, f"{group.key}: {reason}; {rest}", f"{group.key}: {short}", group.key)
    if check.verdict == CANNOT_TELL:
        return check
    brief = (check.brief or check.text).removeprefix(f"{group.key}: ")
    # one "provisional:" first, naming every reason (the learning facts' own come after)
    if check.learning:
        text = f"{reason}, and {rest.removeprefix('provisional: ')}"
        brief = f"provisional: {short}, {brief.removeprefix('provisional: ')}"
    else:
        text, brief = f"{reason}; {rest}", f"provisional: {short}; {brief}"
    return Check(check.verdict, f"{group.key}: {text}", f"{group.key}: {brief}", group.key, unchecked=short)


def verdict_label(verdict: Verdict) -> str:
    """"supports", or "contradicts (provisional: no `none` trained)" where a deciding check rests on a task whose
    use of attention is not checked, "contradicts (provisional: vanilla still learning)" where every deciding
    check rests on a task whose vanilla had not finished learning, or "supports (on what ran; some checks not
    run)": the label the claims table and the closing summary show."""
    deciding = [c for c in verdict.checks if c.verdict == verdict.verdict]
    why = next((c.unchecked for c in deciding if c.unchecked), "")
    if not why and deciding and all(c.learning for c in deciding):
        # one deciding check on a task that had finished learning would stand on its own
        why = deciding[0].learning.removeprefix("provisional: ")
    if why and verdict.verdict in (SUPPORTS, CONTRADICTS):
        return f"{verdict.verdict} (provisional: {why})"
    if verdict.verdict == SUPPORTS and any(c.verdict == NOT_RUN for c in verdict.checks):
        return f"{verdict.verdict} (on what ran; some checks not run)"
    return str(verdict.verdict)


def attention_notes(groups: list[Group]) -> list[str]:
    """What the claims say first: each judged task where attention contributes nothing measurable (its verdicts
    cannot tell) and each without ``none`` (its verdicts provisional)."""
    notes = []
    for group in groups:
        if group.data in DIAGNOSTIC_CORPORA:
            continue
        use, reason, _ = attention_gate(group)
        if use is False:
            notes.append(f"{group.key}: {reason}; every check on it cannot tell")
        elif use is None:
            notes.append(f"{group.key}: {reason}; its verdicts below are provisional")
    return notes


def _attention_use_note(group: Group, *kinds: str) -> str:
    """"; fixed_random not clearly better than none (loss ... [..., ...], how measured)" for flagged kinds."""
    notes = []
    for kind in kinds:
        row = group.row(kind)
        gap = attention_use_gap(group, kind) if row is not None and row.ignores_attention else None
        if gap is not None:
            notes.append(f"{kind} {NO_ATTENTION_USE} ({gap.brief or gap.note}{f', {gap.how}' if gap.how else ''})")
    return "".join(f"; {n}" for n in notes)


# ----------------------------------------------------------------------------- the seven claims
# Each claim is one row of CLAIMS: the task families it is about, its quality checks (kind, reference,
# threshold, judge), and whether it also asks for fewer parameters or more speed. The prose of a claim's rule
# is written from the same numbers; evaluate_claims applies every row the same way.

BEST_OTHER = "the best other variant"  # a reference: the best-scoring variant of the group other than the kind
EVERY_TASK = ()

# [7] T5-base SuperGLUE (Narang et al. 2021), trivial 47.1 (the most-frequent-class baseline): the pure
# synthesizers keep 29-64% of vanilla's gain; random+vanilla beats the best other variant (dense+vanilla)
PAPER_T5_SUPERGLUE = {"vanilla": 71.66, "dense": 61.03, "factorized_dense": 62.78, "random": 54.27,
                      "random+vanilla": 75.24, "dense+vanilla": 74.25}
SUPERGLUE_TRIVIAL = 47.1
# the group of the GLUE-style average over a pretrained preset's fine-tuned tasks (report.average.put_averages)
GLUE_TASK, GLUE_DATA = "glue", "average"
_SUPERGLUE_KEPT = [kept_share(PAPER_T5_SUPERGLUE[k], PAPER_T5_SUPERGLUE["vanilla"], SUPERGLUE_TRIVIAL)
                   for k in ("random", "dense", "factorized_dense")]


@dataclass(frozen=True)
class QualityRule:
    """``kind`` against ``reference``: the loss (kept shares, units of vanilla's gain) judged against
    ``threshold`` by ``judge`` (at most: ``judge_at_most``; clearly beyond: ``judge_beyond``)."""

    kind: str
    reference: str
    threshold: float
    judge: Callable[[Gap, float], Status]
    need: str                 # what the check asks, with where its threshold comes from
    if_trained: bool = False  # checked where the kind was trained, skipped (not "not run") where it was not


@dataclass(frozen=True)
class Claim:
    """One claim of the paper and how it is checked on a run."""

    number: int
    claim: str                # the paper's claim, in a sentence
    rule: str                 # how it is checked, for the report
    tasks: tuple[str, ...]    # the task families it is about (EVERY_TASK: all)
    quality: tuple[QualityRule, ...]
    fewer_params: tuple[tuple[str, str], ...] = ()  # (kind, reference): fewer attention parameters
    faster: tuple[tuple[str, str], ...] = ()        # (kind, reference): faster, timed one at a time
    family: str = ""          # what "does not apply" names where the run has none of ``tasks``

    def applies(self, group: Group) -> bool:
        return not self.tasks or group.task in self.tasks


def _at_most(kind: str, ref: str, threshold: float, why: str) -> QualityRule:
    return QualityRule(kind, ref, threshold, judge_at_most, f"needs a loss of at most {threshold:.2%} ({why})")


_FACTORIZED = (("factorized_random", "random"), ("factorized_dense", "dense"))
CLAIMS: tuple[Claim, ...] = (
    Claim(1, "Even a fixed random attention matrix trains to a passable model (WMT EnDe 23.89 BLEU vs 27.67).",
          f"On every task: fixed_random keeps at least {1 - PASSABLE_LOSS:.1%} of vanilla's gain over the trivial "
          f"predictor (a loss of at most {PASSABLE_LOSS:.1%}: the paper's 23.89 vs 27.67 BLEU, trivial BLEU taken as "
          "0), with the whole 95% interval inside, on a task where `none` (no attention) clearly fails the same "
          "test. Here and below, a comparison where every variant involved scores at chance, or where vanilla does "
          "not clearly beat the trivial predictor, cannot tell.", EVERY_TASK,
          (_at_most("fixed_random", "vanilla", PASSABLE_LOSS,
                    f"the paper's fixed_random keeps {1 - PASSABLE_LOSS:.1%}, WMT14 EnDe"),)),
    Claim(2, "Trained random and dense come close to vanilla on translation and language modelling.",
          f"On every lm / translation task: random and dense each lose at most {CLOSE_LOSS:.2%} of vanilla's gain "
          "over the trivial predictor (the largest loss of the paper's rows: LM1B random 40.60 vs 38.21, unigram "
          "perplexity taken as 1000), with the whole 95% interval inside, where `none` clearly fails the same test.",
          ("lm", "translation"),
          tuple(_at_most(k, "vanilla", CLOSE_LOSS, "the paper's largest: LM1B random") for k in ("random", "dense")),
          family="language modelling or translation"),
    Claim(3, "Factorized variants lose a little quality, use fewer parameters, and run faster.",
          f"On every task, factorized_random against random and factorized_dense against dense: a loss of at most "
          f"{LITTLE_LOSS:.2%} of vanilla's gain (the paper's factorized vs dense, 26.42 vs 26.63 BLEU with vanilla "
          "26.62) with the whole 95% interval inside where `none` clearly fails the same test; fewer attention "
          "parameters at the task's own max_len (where the factorization cannot save any at that length, the check "
          "does not apply and says from which length it does); faster in a timing of the variants one at a time "
          "(same process, same load; runs trained side by side do not judge speed).", EVERY_TASK,
          tuple(_at_most(f, full, LITTLE_LOSS, "the paper's: T5 WMT EnDe") for f, full in _FACTORIZED),
          fewer_params=_FACTORIZED, faster=_FACTORIZED),
    Claim(4, "Mixtures with dot-product attention (random+vanilla, dense+vanilla) match or beat vanilla.",
          f"On every task, for random+vanilla and dense+vanilla: a loss of at most {MATCH_LOSS:.2%} of vanilla's "
          "gain, the largest the paper still calls a match (LM1B random+vanilla 40.05 vs 38.21, unigram perplexity "
          "taken as 1000), with the whole 95% interval inside, where `none` clearly fails the same test; "
          "contradicted when the whole interval is a larger loss. A difference inside the uncertainty cannot tell.",
          EVERY_TASK, tuple(_at_most(k, "vanilla", MATCH_LOSS, "the paper's tolerance for a match: LM1B random+vanilla")
                            for k in ("random+vanilla", "dense+vanilla"))),
    Claim(5, "random is about 60% faster than dynamic convolution and 3.5% better in perplexity (C4).",
          "On every lm task: random keeps more of vanilla's gain than dynamicconv, the whole 95% interval on that "
          "side, where `none` does not, and it is faster in a timing of the two one at a time (train it with "
          "--baselines dynamicconv).", ("lm",),
          (QualityRule("random", "dynamicconv", 0.0, judge_at_most, "needs random better (paper: 3.5% better)"),),
          faster=(("random", "dynamicconv"),), family="language modelling"),
    Claim(6, "factorized_random outperforms Linformer on encoding-only tasks (AG News, IMDb reviews), and runs faster.",
          "On every classification task: factorized_random keeps more of vanilla's gain over the majority class "
          "than linformer (its projected length k at most max_len / 4, so that it compresses), the whole 95% "
          "interval on that side, where `none` does not, and it is faster in a timing of the two one at a time.",
          ("classification",),
          (QualityRule("factorized_random", "linformer", 0.0, judge_at_most, "needs factorized_random better"),),
          faster=(("factorized_random", "linformer"),), family="classification"),
    Claim(7, "On GLUE/SuperGLUE, pure synthesizers fall clearly behind; random+vanilla is best.",
          "On the GLUE-style average of the tasks fine-tuned from a span-corruption pretraining (the glue preset, "
          f"the paper's setting): each pure synthesizer trained loses more than the {MATCH_LOSS:.2%} of a match "
          f"(claim 4) with the whole 95% interval beyond it (the paper's keep {min(_SUPERGLUE_KEPT):.0%}-"
          f"{max(_SUPERGLUE_KEPT):.0%} of vanilla's gain on SuperGLUE), and random+vanilla keeps more than the best "
          "other variant, the whole interval on that side. Classification trained from scratch (ListOps, the "
          "classification preset) is not GLUE: its reading is shown, without a verdict.", (GLUE_TASK,),
          (*(QualityRule(k, "vanilla", MATCH_LOSS, judge_beyond,
                         f"needs {k} clearly behind (a loss above the {MATCH_LOSS:.2%} of a match)", if_trained=True)
             for k in PURE_SYNTHESIZERS),
           QualityRule("random+vanilla", BEST_OTHER, 0.0, judge_at_most, "best other variant; needs random+vanilla better")),
          family="GLUE-style (pretrained, then fine-tuned)"),
)


def _best_other(group: Group, kind: str) -> str | None:
    """The best-scoring variant of ``group`` other than ``kind`` and ``none``; None if there is none."""
    others = [r for r in group.rows if r.kind not in (kind, NONE_KIND) and r.metric_mean is not None]
    if not others:
        return None
    return max(others, key=lambda r: r.metric_mean if group.higher_is_better else -r.metric_mean).kind


def _quality_checks(group: Group, rule: QualityRule) -> list[Check]:
    """The check of ``rule`` on ``group``; a kind absent from it is "not run", or skipped for a rule that
    applies only where it was trained (claim 7 judges each pure synthesizer that was)."""
    if group.row(rule.kind) is None and rule.if_trained:
        return []
    ref = rule.reference
    if ref == BEST_OTHER:
        missing = _missing(group, rule.kind)
        if missing:
            return [missing]
        ref = _best_other(group, rule.kind)
        if ref is None:
            return [Check(CANNOT_TELL, f"{group.key}: no other variant to rank {rule.kind} against", key=group.key)]
    return [_gap_check(group, rule.kind, ref, rule.threshold, rule.need, judge=rule.judge)]


def _claim_checks(claim: Claim, group: Group) -> list[Check]:
    checks = [c for rule in claim.quality for c in _quality_checks(group, rule)]
    if group.task == GLUE_TASK:  # an average of fine-tuned tasks has no model of its own: its tasks are timed
        return checks
    for kind, ref in claim.fewer_params:
        checks.append(_missing(group, kind, ref) or _fewer_params_check(group, kind, ref))
    for kind, ref in claim.faster:
        checks.append(_missing(group, kind, ref) or _faster_check(group, kind, ref))
    return checks


def _fewer_params_check(group: Group, kind: str, ref: str) -> Check:
    a, b = group.row(kind).params_attention, group.row(ref).params_attention
    if a is None or b is None:
        return Check(CANNOT_TELL, f"{group.key}: no attention parameter count for {kind} or {ref}", key=group.key)
    text = f"{group.key}: attention parameters {kind} {a:,} vs {ref} {b:,}; needs fewer"
    saving = (group.timing or {}).get("params", {}).get(kind, {}).get("saves_from")
    if a >= b and saving is not None:  # the factorization cannot save at this length: the claim is about others
        max_len = group.timing.get("max_len")
        where = f"from max_len {saving:,} on" if saving else "at no max_len up to the lengths counted"
        return Check(DOES_NOT_APPLY, f"{text}; at max_len {max_len} the factorization cannot save parameters "
                                     f"(it does {where})", key=group.key)
    return Check(SUPPORTS if a < b else CONTRADICTS, text, key=group.key)


def _does_not_apply(claim: Claim) -> Check:
    return Check(DOES_NOT_APPLY, f"the claim is about {claim.family} tasks; this run has none")


def _judge(claim: Claim, groups: list[Group]) -> Verdict:
    chosen = [g for g in groups if claim.applies(g)]
    checks = [c for g in chosen for c in _claim_checks(claim, g)]
    if not groups:
        checks = [Check(NOT_RUN, "no task in this run")]
    elif not chosen:
        checks = [_does_not_apply(claim)]
    readings = []
    if claim.number == 7 and not chosen:  # classification from scratch: the claim's checks, as a reading only
        readings = [c for g in groups if g.task == "classification" for c in _claim_checks(claim, g)]
    return Verdict(claim.number, claim.claim, claim.rule, CANNOT_TELL, checks, readings)


def evaluate_claims(groups: list[Group]) -> list[Verdict]:
    """The verdict on every claim (:data:`CLAIMS`), with the checks (and numbers) behind it. The diagnostics are
    left out: they were built to show where input-independent attention must fail (recall), which no claim is
    about."""
    judged = [g for g in groups if g.data not in DIAGNOSTIC_CORPORA]
    by_key = {g.key: g for g in judged}
    gates = {g.key: attention_gate(g) for g in judged}
    verdicts = []
    for claim in CLAIMS:
        v = _judge(claim, judged)
        v.checks = [gate_check(c, by_key[c.key], gates[c.key]) if c.key in by_key else c for c in v.checks]
        v.readings = [gate_check(c, by_key[c.key], gates[c.key]) if c.key in by_key else c for c in v.readings]
        if groups and not judged:
            v.checks = [Check(DOES_NOT_APPLY, "not judged on the diagnostics, which probe what the paper's tasks "
                                              "leave out (content-based lookup); see the tables")]
        seen = set()  # two checks that both miss the same variant say the same thing once
        v.checks = [c for c in v.checks if (c.verdict, c.text) not in seen and not seen.add((c.verdict, c.text))]
        v.verdict = combine(v.checks)
        verdicts.append(v)
    return verdicts
