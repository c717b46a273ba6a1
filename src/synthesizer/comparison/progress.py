"""The line a comparison prints as each run finishes, and its runs' warnings, each said once."""

from __future__ import annotations

from typing import Callable

from ..report.tables import speed_unit
from ..runs.results import failed
from .execute import WARNINGS_KEY


class Warned:
    """Prints each distinct warning of a comparison's runs once per group (task and data), where the runs
    repeat it: a warning about a split's data (its text names the corpus and split) comes once, not once per
    kind and seed."""

    def __init__(self, log: Callable[[str], None]):
        self.log, self.seen = log, set()

    def __call__(self, record: dict, where: str) -> None:
        """Take the warnings out of ``record`` and print the new ones, each under ``where`` (the group key)."""
        for text in record.pop(WARNINGS_KEY, []):
            if (where, text) not in self.seen:
                self.seen.add((where, text))
                self.log(f"{where}: {text}")


def summary(record: dict, took: float) -> str:
    """"test perplexity 98.5, 1,234 tokens/s, trained 40 s, 52 s in all" (or "FAILED: why")."""
    if failed(record):
        return f"FAILED: {record['error']}"
    metric = record.get("primary_metric", "")
    value = (record.get("test_metrics") or {}).get(metric)
    text = f"test {metric} {'n/a' if value is None else f'{value:.4g}'}"
    if record.get("diverged"):
        text += " (DIVERGED)"
    speed = record.get("train_tokens_per_s_median", record.get("train_tokens_per_s")) or 0.0
    text += f", {speed:,.0f} {speed_unit(record.get('task', ''))}/s, trained {record.get('train_time_s') or 0:.0f} s"
    return text + (f", {took:.0f} s in all" if took else " (done earlier)")
