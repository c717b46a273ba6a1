"""A check's and a claim's verdict, and how checks combine into a claim's."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


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
