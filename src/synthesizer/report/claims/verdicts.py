"""A check's and a claim's verdict, and how checks combine into a claim's."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ..learning_facts import Provisional
from .records import Finding, Gap, Gate, NoneFloor


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


@dataclass(frozen=True)
class Check:
    """One check of a claim on group ``key`` ("" = none in particular): its verdict and what it found, with
    what qualifies it: ``learning`` (vanilla still learning or not clearly above its trivial predictor: the
    verdict stands, provisional), ``floor`` (``none`` passes too: a pass turned "cannot tell") and ``gate``
    (the group's attention gate where it applied: "cannot tell" where attention contributes nothing
    measurable; provisional where it is not checked)."""

    verdict: Status
    finding: Finding
    key: str = ""
    learning: Provisional | None = None
    floor: NoneFloor | None = None
    gate: Gate | None = None

    @property
    def unchecked(self) -> Gate | None:
        """The gate that leaves this decided check provisional: its task's use of attention is not checked."""
        return self.gate if self.gate is not None and self.gate.use is None else None

    @property
    def provisional(self) -> bool:
        return self.verdict in (SUPPORTS, CONTRADICTS) and (self.unchecked is not None or self.learning is not None)

    @property
    def gap(self) -> Gap | None:
        return self.finding.gap


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
