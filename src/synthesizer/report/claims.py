"""The paper's seven claims (../shared/PAPER.md), each checked by an explicit rule over the measured table.

Every rule compares two variants of one group (task + data) with two numbers:

* the **quality gap** of a variant against a reference: the relative loss of quality, positive = worse.
  For metrics where higher is better: ``(ref - x) / |ref|``. For perplexity it is taken on the log
  scale, ``(ln x - ln ref) / ln ref`` (the paper's C4 numbers are log-perplexities, and a perplexity
  ratio would exaggerate small differences of a weak model);
* its **uncertainty** ``u``: the seed spread, ``(std_x + std_ref) / |ref|`` (on the same scale), or,
  when a variant has a single seed, the fixed tolerance ``SINGLE_SEED_TOLERANCE`` (1%), since one seed
  gives no spread to measure.

A statement "gap <= t" is *supported* when ``gap + u <= t`` (true even at the edge of the spread),
*contradicted* when ``gap - u > t`` and *cannot tell* otherwise. Training speed (tokens, target tokens or examples per second) is compared
the same way with the tolerance ``SPEED_TOLERANCE`` (5%: the CPU is shared and timings drift), or
the seed spread of the speeds when larger. A claim's verdict is "contradicts" if any of its checks
contradicts, "supports" if every check supports, and "cannot tell" otherwise, including when the run
did not train a variant the claim needs (a kind that diverged counts as infinitely worse).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .tables import Group, Row

SUPPORTS, CONTRADICTS, CANNOT_TELL = "supports", "contradicts", "cannot tell"
SINGLE_SEED_TOLERANCE = 0.01
SPEED_TOLERANCE = 0.05
PASSABLE_GAP = 0.15   # claim 1: the paper's fixed_random loses 13.7% BLEU (23.89 vs 27.67)
CLOSE_GAP = 0.05      # claim 2: random / dense lose 0.6-1.7% in the paper; we allow 5%
LITTLE_GAP = 0.10     # claim 3: "lose a little quality"

PURE_SYNTHESIZERS = ("random", "fixed_random", "dense", "factorized_random", "factorized_dense")


@dataclass
class Check:
    verdict: str
    text: str


@dataclass
class Verdict:
    number: int
    claim: str
    rule: str
    verdict: str
    checks: list[Check] = field(default_factory=list)


@dataclass
class Gap:
    """A relative difference (positive = worse / slower) and its uncertainty."""

    value: float
    u: float
    note: str


def combine(checks: list[Check]) -> str:
    if not checks:
        return CANNOT_TELL
    verdicts = {c.verdict for c in checks}
    if CONTRADICTS in verdicts:
        return CONTRADICTS
    return SUPPORTS if verdicts == {SUPPORTS} else CANNOT_TELL


def judge_at_most(gap: Gap, threshold: float) -> str:
    """Is ``gap <= threshold``, given its uncertainty?"""
    if gap.value + gap.u <= threshold:
        return SUPPORTS
    if gap.value - gap.u > threshold:
        return CONTRADICTS
    return CANNOT_TELL


def quality_gap(group: Group, row: Row, ref: Row) -> Gap | None:
    """Relative quality loss of ``row`` against ``ref``; None if either has no metric and did not diverge."""
    if row.metric_mean is None or ref.metric_mean is None:
        if row.status.startswith("diverged") and ref.metric_mean is not None:
            return Gap(math.inf, 0.0, f"{row.kind} diverged, {ref.kind} {_show(ref, group)}")
        if ref.status.startswith("diverged") and row.metric_mean is not None:
            return Gap(-math.inf, 0.0, f"{ref.kind} diverged, {row.kind} {_show(row, group)}")
        return None
    if group.metric == "perplexity":
        x, r = math.log(row.metric_mean), math.log(ref.metric_mean)
        sx = (row.metric_std or 0.0) / row.metric_mean  # d ln(p) = dp / p
        sr = (ref.metric_std or 0.0) / ref.metric_mean
    else:
        x, r, sx, sr = row.metric_mean, ref.metric_mean, row.metric_std or 0.0, ref.metric_std or 0.0
    if r == 0:
        return None
    value = (x - r) / abs(r) if not group.higher_is_better else (r - x) / abs(r)
    single = row.n_ok < 2 or ref.n_ok < 2
    u = max((sx + sr) / abs(r), SINGLE_SEED_TOLERANCE) if single else (sx + sr) / abs(r)
    scale = "log-perplexity" if group.metric == "perplexity" else group.metric
    spread = f"1-seed tolerance {SINGLE_SEED_TOLERANCE:.0%}" if single else "seed spread"
    note = (f"{row.kind} {_show(row, group)} vs {ref.kind} {_show(ref, group)}: "
            f"{'worse' if value > 0 else 'better'} by {abs(value):.1%} on the {scale} scale (± {u:.1%}, {spread})")
    return Gap(value, u, note)


def slowdown(row: Row, ref: Row) -> Gap | None:
    """Relative speed deficit of ``row`` against ``ref`` (positive = slower), from training speed (units per second)."""
    if not row.tokens_per_s or not ref.tokens_per_s:
        return None
    value = (ref.tokens_per_s - row.tokens_per_s) / ref.tokens_per_s
    spread = ((row.tokens_per_s_std or 0.0) + (ref.tokens_per_s_std or 0.0)) / ref.tokens_per_s
    u = max(spread, SPEED_TOLERANCE)
    note = (f"training speed {row.kind} {row.tokens_per_s:,.0f}/s vs {ref.kind} {ref.tokens_per_s:,.0f}/s: "
            f"{abs(value):.1%} {'slower' if value > 0 else 'faster'} (± {u:.0%})")
    return Gap(value, u, note)


def _show(row: Row, group: Group) -> str:
    if row.metric_mean is None:
        return f"({row.status})"
    std = f" ± {row.metric_std:.3g}" if row.metric_std is not None else ""
    return f"{group.metric} {row.metric_mean:.4g}{std}"


def _chance(row: Row | None) -> bool:
    return row is not None and row.status.startswith("at chance")


def _missing(group: Group, *kinds: str) -> Check | None:
    """A "cannot tell" check when a variant is absent, has no metric, or when every variant compared
    scored at chance (then their differences are noise, not signal)."""
    absent = [k for k in kinds if group.row(k) is None]
    if absent:
        return Check(CANNOT_TELL, f"{group.key}: {', '.join(absent)} not in this run")
    if len(kinds) > 1 and all(_chance(group.row(k)) for k in kinds):
        return Check(CANNOT_TELL, f"{group.key}: {' and '.join(kinds)} {'both' if len(kinds) == 2 else 'all'} score at chance ({group.chance.get('why', '')})")
    no_metric = [k for k in kinds if group.row(k).metric_mean is None and not group.row(k).status.startswith("diverged")]
    if no_metric:
        return Check(CANNOT_TELL, f"{group.key}: no metric for {', '.join(no_metric)} ({group.row(no_metric[0]).status})")
    return None


def _quality_gap(group: Group, kind: str, ref: str):
    """The quality gap of ``kind`` vs ``ref``, or the "cannot tell" Check that stands in for it."""
    missing = _missing(group, kind, ref)
    if missing:
        return missing
    gap = quality_gap(group, group.row(kind), group.row(ref))
    return gap if gap is not None else Check(CANNOT_TELL, f"{group.key}: {kind} vs {ref}: no comparable metric")


def _gap_check(group: Group, kind: str, ref: str, threshold: float, what: str) -> Check:
    """Check "quality gap of ``kind`` vs ``ref`` <= threshold"."""
    gap = _quality_gap(group, kind, ref)
    if isinstance(gap, Check):
        return gap
    return Check(judge_at_most(gap, threshold), f"{group.key}: {gap.note}; {what}")


def _faster_check(group: Group, kind: str, ref: str) -> Check:
    missing = _missing(group, kind, ref)
    if missing:
        return missing
    gap = slowdown(group.row(kind), group.row(ref))
    if gap is None:
        return Check(CANNOT_TELL, f"{group.key}: no training speed for {kind} or {ref}")
    # faster = slowdown < 0, i.e. slowdown <= 0 with the margin
    return Check(judge_at_most(gap, 0.0), f"{group.key}: {gap.note}; needs {kind} faster")


def _no_groups(what: str = "") -> list[Check]:
    return [Check(CANNOT_TELL, f"no {what + ' ' if what else ''}task in this run")]


# ----------------------------------------------------------------------------- the seven claims

def claim1(groups: list[Group]) -> Verdict:
    checks = [_gap_check(g, "fixed_random", "vanilla", PASSABLE_GAP, f"needs a gap <= {PASSABLE_GAP:.0%}")
              for g in groups]
    for g in groups:
        if _chance(g.row("fixed_random")) and g.row("vanilla") is not None and not _chance(g.row("vanilla")):
            checks.append(Check(CONTRADICTS, f"{g.key}: fixed_random scored at chance ({g.chance.get('why', '')})"))
    return Verdict(1, "Even a fixed random attention matrix trains to a passable model (WMT EnDe 23.89 BLEU vs 27.67).",
                   f"On every task: fixed_random's quality gap to vanilla is at most {PASSABLE_GAP:.0%} "
                   "(the paper's gap is 13.7%) and it does not score at chance while vanilla does better. "
                   "Here and below, a comparison where every variant involved scores at chance cannot tell.",
                   "", checks or _no_groups())


def claim2(groups: list[Group]) -> Verdict:
    chosen = [g for g in groups if g.task in ("lm", "translation")]
    checks = [_gap_check(g, kind, "vanilla", CLOSE_GAP, f"needs a gap <= {CLOSE_GAP:.0%}")
              for g in chosen for kind in ("random", "dense")]
    return Verdict(2, "Trained random and dense come close to vanilla on translation and language modelling.",
                   f"On every lm / translation task: random's and dense's quality gaps to vanilla are at most "
                   f"{CLOSE_GAP:.0%} (0.6-1.7% in the paper).", "", checks or _no_groups("lm or translation"))


def claim3(groups: list[Group]) -> Verdict:
    checks = []
    for g in groups:
        for fact, full in (("factorized_random", "random"), ("factorized_dense", "dense")):
            missing = _missing(g, fact, full)
            if missing:
                checks.append(missing)
                continue
            a, b = g.row(fact), g.row(full)
            checks.append(_gap_check(g, fact, full, LITTLE_GAP, f"needs a loss of at most {LITTLE_GAP:.0%}"))
            if a.params_attention is not None and b.params_attention is not None:
                fewer = a.params_attention < b.params_attention
                checks.append(Check(SUPPORTS if fewer else CONTRADICTS,
                                    f"{g.key}: attention parameters {fact} {a.params_attention:,} vs {full} "
                                    f"{b.params_attention:,}; needs fewer"))
            checks.append(_faster_check(g, fact, full))
    return Verdict(3, "Factorized variants lose a little quality, use fewer parameters, and run faster.",
                   f"On every task, factorized_random against random and factorized_dense against dense: a quality "
                   f"gap of at most {LITTLE_GAP:.0%}, fewer attention parameters, higher training speed.",
                   "", checks or _no_groups())


def claim4(groups: list[Group]) -> Verdict:
    checks = []
    for g in groups:
        for kind in ("random+vanilla", "dense+vanilla"):
            gap = _quality_gap(g, kind, "vanilla")
            if isinstance(gap, Check):
                checks.append(gap)
                continue
            # "match or beat": a gap inside the spread is a match, so only a clear loss contradicts
            verdict = CONTRADICTS if gap.value - gap.u > 0 else SUPPORTS
            how = "beats" if gap.value + gap.u <= 0 else ("matches (within the spread)" if verdict == SUPPORTS else "is worse")
            checks.append(Check(verdict, f"{g.key}: {gap.note}; {how}"))
    return Verdict(4, "Mixtures with dot-product attention (random+vanilla, dense+vanilla) match or beat vanilla.",
                   "On every task, for random+vanilla and dense+vanilla: the quality gap to vanilla is not above the "
                   "spread (gap - u <= 0); a gap inside the spread counts as a match.",
                   "", checks or _no_groups())


def claim5(groups: list[Group]) -> Verdict:
    chosen = [g for g in groups if g.task == "lm"]
    checks = []
    for g in chosen:
        quality = _gap_check(g, "random", "dynamicconv", 0.0, "needs random better (paper: 3.5% better)")
        checks += [quality, _faster_check(g, "random", "dynamicconv")]
    return Verdict(5, "random is about 60% faster than dynamic convolution and 3.5% better in perplexity (C4).",
                   "On every lm task: random's log-perplexity is lower than dynamicconv's beyond the spread and its "
                   "training speed higher beyond the timing tolerance (train it with --baselines dynamicconv).",
                   "", checks or _no_groups("lm"))


def claim6(groups: list[Group]) -> Verdict:
    chosen = [g for g in groups if g.task == "classification"]
    checks = []
    for g in chosen:
        checks += [_gap_check(g, "factorized_random", "linformer", 0.0, "needs factorized_random better"),
                   _faster_check(g, "factorized_random", "linformer")]
    return Verdict(6, "factorized_random outperforms Linformer on encoding-only tasks (AG News, IMDb reviews), and runs faster.",
                   "On every classification task: factorized_random's accuracy is higher than linformer's beyond the "
                   "spread and its training speed higher beyond the timing tolerance.",
                   "", checks or _no_groups("classification"))


def claim7(groups: list[Group]) -> Verdict:
    chosen = [g for g in groups if g.task == "classification"]
    checks = []
    for g in chosen:
        for kind in PURE_SYNTHESIZERS:
            if g.row(kind) is None:
                continue
            gap = _quality_gap(g, kind, "vanilla")
            if isinstance(gap, Check):
                checks.append(gap)
                continue
            # "falls clearly behind": gap > 0 beyond the spread
            verdict = {SUPPORTS: CONTRADICTS, CONTRADICTS: SUPPORTS}.get(judge_at_most(gap, 0.0), CANNOT_TELL)
            checks.append(Check(verdict, f"{g.key}: {gap.note}; needs {kind} clearly behind"))
        missing = _missing(g, "random+vanilla")
        if missing:
            checks.append(missing)
            continue
        others = [r for r in g.rows if r.kind != "random+vanilla" and r.metric_mean is not None]
        if not others:
            checks.append(Check(CANNOT_TELL, f"{g.key}: no other variant to rank random+vanilla against"))
            continue
        best = max(others, key=lambda r: r.metric_mean if g.higher_is_better else -r.metric_mean)
        if _chance(best) and _chance(g.row("random+vanilla")):
            checks.append(Check(CANNOT_TELL, f"{g.key}: random+vanilla and the best other variant both score at chance"))
            continue
        gap = quality_gap(g, g.row("random+vanilla"), best)
        if gap is None:
            checks.append(Check(CANNOT_TELL, f"{g.key}: random+vanilla has no comparable metric"))
            continue
        checks.append(Check(judge_at_most(gap, 0.0), f"{g.key}: best other variant: {gap.note}; needs random+vanilla best"))
    return Verdict(7, "On GLUE/SuperGLUE, pure synthesizers fall clearly behind; random+vanilla is best.",
                   "On every classification task (our stand-in for GLUE): each pure synthesizer trained is worse "
                   "than vanilla beyond the spread, and random+vanilla beats the best other variant beyond the spread.",
                   "", checks or _no_groups("classification"))


CLAIMS = (claim1, claim2, claim3, claim4, claim5, claim6, claim7)


def evaluate_claims(groups: list[Group]) -> list[Verdict]:
    """The verdict on every claim, with the checks (and numbers) behind it."""
    verdicts = []
    for rule in CLAIMS:
        v = rule(groups)
        seen = set()  # two checks that both miss the same variant say the same thing once
        v.checks = [c for c in v.checks if (c.verdict, c.text) not in seen and not seen.add((c.verdict, c.text))]
        v.verdict = combine(v.checks)
        verdicts.append(v)
    return verdicts
