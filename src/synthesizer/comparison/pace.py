"""The time-left estimate printed after each run of a comparison."""

from __future__ import annotations

import time

from ..report.document import minutes


class Pace:
    """How long the runs of a plan still need, from the wall-clock pace of those trained so far by this
    invocation (runs read back do not count; parallel runs count as they overlap): rough, since runs
    of different tasks and kinds differ in length."""

    def __init__(self, total: int):
        self.total, self.trained, self.busy, self.last = total, 0, 0.0, time.perf_counter()

    def after(self, done: int, took: float) -> str:
        """"; about 12.5 min to go for 7 more runs" after run ``done`` of ``total`` (took 0: read back)."""
        left = self.total - done
        if left <= 0:
            return ""
        now = time.perf_counter()
        if took:  # trained here: the wall time since the previous run ended was spent on it
            self.busy += now - self.last
            self.trained += 1
        self.last = now  # a run read back took no time, wherever it comes in the plan
        if not self.trained:
            return ""
        seconds = self.busy / self.trained * left
        return f"; about {minutes(seconds)} to go for {left} more run{'s' if left > 1 else ''}"
