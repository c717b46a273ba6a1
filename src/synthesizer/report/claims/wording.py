"""A verdict's words for the tables and summaries."""

from __future__ import annotations

import textwrap

from .verdicts import JUDGED, NOT_RUN, SUPPORTS, CONTRADICTS, Verdict

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
