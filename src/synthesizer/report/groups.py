"""Run records -> one :class:`~.tables.Group` per (task, data), with what the claims and learning rules add."""

from __future__ import annotations

from .claims import judge_rows
from .learning import vanilla_learning
from .tables import Group, group_key, plain_group


def build_groups(runs: list[dict], timings: dict | None = None) -> list[Group]:
    """Aggregate raw run records into one :class:`Group` per (task, data), rows in the paper's order.
    Each group holds the claims' judgement of its rows (``judgements``): where the group trained ``none`` (no
    mixing between tokens), a row not clearly better than it is flagged "not clearly better than none" with
    its interval, by the claims' rule; and each row's kept and attention shares. Each group also gets ``learning``:
    whether its vanilla flattened and beat the trivial predictors, and ``timing``: its one-at-a-time timing from
    ``timings`` (results.json's, by group key), if any."""
    by_group: dict[str, list[dict]] = {}
    for run in runs:
        by_group.setdefault(group_key(run["task"], run["data"]), []).append(run)
    groups = []
    for key, group_runs in by_group.items():
        group = plain_group(key, group_runs)
        group.judgements = judge_rows(group)
        group.learning = vanilla_learning(group, group_runs)
        group.timing = (timings or {}).get(key)
        groups.append(group)
    return groups
