"""Evaluate the claims: apply every row of CLAIMS to the groups of a run."""

from __future__ import annotations

from ...data.generated import DIAGNOSTIC_CORPORA
from ..tables import Group
from .contribution import _contribution_note, seeds_note
from .floor import NONE_KIND, _attention_use_note, no_attention_passes
from .gate import attention_gate, gate_check
from .kept import _missing, _quality_gap
from .speed import _faster_check
from .table import BEST_OTHER, CLAIMS, GLUE_TASK, Claim, QualityRule
from .verdicts import CANNOT_TELL, CONTRADICTS, DOES_NOT_APPLY, NOT_RUN, SUPPORTS, Check, Verdict, combine, judge_at_most

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
