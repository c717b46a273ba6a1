"""Evaluate the claims: apply every row of CLAIMS the same way to the groups of a run."""

from __future__ import annotations

from ...data.generated import DIAGNOSTIC_CORPORA
from ..tables import Group
from .contribution import contribution, seeds_to_settle
from .floor import NONE_KIND, no_attention_passes, unused
from .gate import attention_gate, gate_check
from .kept import gap_or_check, missing
from .records import Finding, Need, Reason
from .speed import faster_check
from .table import BEST_OTHER, CLAIMS, Claim, QualityRule
from .verdicts import CANNOT_TELL, CONTRADICTS, DOES_NOT_APPLY, NOT_RUN, SUPPORTS, Check, Verdict, combine


def _gap_check(group: Group, rule: QualityRule, ref: str) -> Check:
    """Check the loss of ``rule.kind`` vs ``ref`` against the rule's threshold."""
    kind = rule.kind
    gap = gap_or_check(group, kind, ref)
    if isinstance(gap, Check):
        return gap
    verdict = rule.judge(gap, rule.threshold)
    finding = Finding(Reason.QUALITY, (kind, ref), gap, rule.need, rule.threshold, rule.source,
                      contribution=contribution(group, kind, ref, gap),
                      seeds=seeds_to_settle(gap, rule.threshold) if verdict == CANNOT_TELL else None,
                      unused=unused(group, kind, ref))
    # a verdict on a task whose vanilla is still learning (report.learning) stands, flagged first in its reason
    learning = group.learning.provisional if group.learning is not None else None
    floor = no_attention_passes(group, ref, rule.threshold) if verdict == SUPPORTS and rule.need is not Need.BEHIND else None
    if floor is not None:  # a pass that a model without attention earns too says nothing about attention
        return Check(CANNOT_TELL, finding, group.key, learning, floor)
    return Check(verdict, finding, group.key, learning)


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
        absent = missing(group, rule.kind)
        if absent:
            return [absent]
        ref = _best_other(group, rule.kind)
        if ref is None:
            return [Check(CANNOT_TELL, Finding(Reason.NO_OTHER, (rule.kind,)), group.key)]
    return [_gap_check(group, rule, ref)]


def _claim_checks(claim: Claim, group: Group) -> list[Check]:
    checks = [c for rule in claim.quality for c in _quality_checks(group, rule)]
    if not claim.timed(group):  # an average of fine-tuned tasks has no model of its own: its tasks are timed
        return checks
    for kind, ref in claim.fewer_params:
        checks.append(missing(group, kind, ref) or _fewer_params_check(group, kind, ref))
    for kind, ref in claim.faster:
        checks.append(missing(group, kind, ref) or faster_check(group, kind, ref))
    return checks


def _fewer_params_check(group: Group, kind: str, ref: str) -> Check:
    a, b = group.row(kind).params_attention, group.row(ref).params_attention
    if a is None or b is None:
        return Check(CANNOT_TELL, Finding(Reason.NO_PARAM_COUNT, (kind, ref)), group.key)
    saving = (group.timing or {}).get("params", {}).get(kind, {}).get("saves_from")
    if a >= b and saving is not None:  # the factorization cannot save at this length: the claim is about others
        return Check(DOES_NOT_APPLY, Finding(Reason.PARAMS_CANNOT_SAVE, (kind, ref), counts=(a, b),
                                             max_len=group.timing.get("max_len"), saves_from=saving), group.key)
    return Check(SUPPORTS if a < b else CONTRADICTS, Finding(Reason.PARAMS, (kind, ref), counts=(a, b)), group.key)


def _judge(claim: Claim, groups: list[Group]) -> Verdict:
    chosen = [g for g in groups if claim.applies(g)]
    checks = [c for g in chosen for c in _claim_checks(claim, g)]
    if not groups:
        checks = [Check(NOT_RUN, Finding(Reason.NO_TASK))]
    elif not chosen:
        checks = [Check(DOES_NOT_APPLY, Finding(Reason.NOT_ABOUT, family=claim.family))]
    readings = []
    if not chosen:  # the families the claim is not about but reads: its checks, as a reading only
        readings = [c for g in groups if g.task in claim.readings for c in _claim_checks(claim, g)]
    return Verdict(claim.number, claim.claim, claim.rule, CANNOT_TELL, checks, readings)


def _once(checks: list[Check]) -> list[Check]:
    """Two checks that both miss the same variant say the same thing once."""
    kept: list[Check] = []
    for check in checks:
        if check not in kept:
            kept.append(check)
    return kept


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
            v.checks = [Check(DOES_NOT_APPLY, Finding(Reason.DIAGNOSTICS))]
        v.checks = _once(v.checks)
        v.verdict = combine(v.checks)
        verdicts.append(v)
    return verdicts
