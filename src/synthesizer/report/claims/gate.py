"""The attention gate: does attention matter on a task at all (vanilla clearly better than `none`)?"""

from __future__ import annotations

from ...data.generated import DIAGNOSTIC_CORPORA
from ..tables import Group
from .contribution import seeds_note
from .floor import NO_NONE, NONE_KIND, attention_use_gap, measured, uses_attention
from .kept import _show, scale_of
from .verdicts import CANNOT_TELL, JUDGED, Check

NOTHING_MEASURABLE = "attention contributes nothing measurable on this task"
CONTRIBUTION_NOT_MEASURED = "what attention contributes is not measured on this task"

NOT_CHECKED = "so whether attention contributes anything on this task is not checked"
NO_NONE_PROVISIONAL = f"provisional: {NO_NONE}, {NOT_CHECKED}"

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
