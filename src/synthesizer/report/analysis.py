"""A comparison's results, analysed once: its groups, the claims' verdicts and the notes on where attention
matters, which the document, the closing summary, the index, the scale report and the demo's lead all read.

Built once per results and handed on, so that every part of one report judges the same groups (the closing
summary once rebuilt them without the timings, and could say another verdict than the report).
"""

from __future__ import annotations

from dataclasses import dataclass
from ..runs.results import Results
from .claims import Gate, Verdict, attention_notes, evaluate_claims
from .groups import build_groups
from .tables import Group


@dataclass(frozen=True)
class Analysis:
    """``groups``: one per (task, data), with their timings; ``verdicts``: :func:`claims.evaluate_claims` of
    them; ``notes``: :func:`claims.attention_notes` (where attention matters, as data: the wording renders it);
    ``pretraining``: the groups of a pretrained preset's pretraining runs (no claim is judged on them)."""

    groups: list[Group]
    verdicts: list[Verdict]
    notes: list[Gate]
    pretraining: list[Group]


def analyse(results: Results) -> Analysis:
    """The :class:`Analysis` of ``results``."""
    groups = build_groups(results.runs, results.timings)
    pretraining = build_groups(results.pretraining) if results.pretraining else []
    return Analysis(groups, evaluate_claims(groups), attention_notes(groups), pretraining)
