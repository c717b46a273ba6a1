"""The attention gate: does attention matter on a task at all (vanilla clearly better than `none`)?"""

from __future__ import annotations

from dataclasses import replace

from ...data.generated import DIAGNOSTIC_CORPORA
from ..tables import Group
from .contribution import seeds_to_settle
from .floor import NONE_KIND, attention_use_gap, uses_attention
from .records import Gate, GateReason
from .verdicts import CANNOT_TELL, JUDGED, Check


def attention_gate(group: Group) -> Gate:
    """Does attention matter on this task? ``use`` True where vanilla clearly beats ``none``; False where it
    does not (with vanilla's loss against none, and how many seeds would decide where the kept-share scale is
    defined); None where it cannot be checked (no ``none`` trained, or ``none`` or vanilla has no metric)."""
    use = uses_attention(group, "vanilla")
    vanilla, floor = group.row("vanilla"), group.row(NONE_KIND)
    if use is None:
        if floor is None:
            return Gate(group.key, None, GateReason.NO_NONE)
        if floor.metric_mean is None:
            return Gate(group.key, None, GateReason.NONE_NO_METRIC, status=floor.status)
        if vanilla is None:
            return Gate(group.key, None, GateReason.NO_VANILLA)
        return Gate(group.key, None, GateReason.VANILLA_NO_METRIC, status=vanilla.status)
    if use:
        return Gate(group.key, True, GateReason.USES)
    gap = attention_use_gap(group, "vanilla")
    seeds = seeds_to_settle(gap, 0.0) if gap.over is not None else None  # no kept-share unit: raw scores only
    # one seed without per-example scores: vanilla may well be ahead, but by how much is unknown
    why = GateReason.NOTHING_MEASURABLE if gap.measured else GateReason.CONTRIBUTION_NOT_MEASURED
    return Gate(group.key, False, why, gap, seeds)


def gate_check(check: Check, group: Group, gate: Gate | None = None) -> Check:
    """``check`` under its group's attention gate (``gate``: :func:`attention_gate` of the group, if known):
    "cannot tell" where attention contributes nothing measurable; a decided check provisional where it
    cannot be checked (no ``none`` trained). The gate is kept on the check, which says it first."""
    gate = gate or attention_gate(group)
    if gate.use or check.key != group.key or check.verdict not in JUDGED:
        return check
    if gate.use is False:
        return replace(check, verdict=CANNOT_TELL, gate=gate)
    return check if check.verdict == CANNOT_TELL else replace(check, gate=gate)


def attention_notes(groups: list[Group]) -> list[Gate]:
    """What the claims say first: the gate of each judged task where attention contributes nothing measurable
    (its verdicts cannot tell) or where that is not checked (its verdicts provisional)."""
    gates = (attention_gate(group) for group in groups if group.data not in DIAGNOSTIC_CORPORA)
    return [gate for gate in gates if not gate.use]
