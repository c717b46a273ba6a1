"""A planned run of a comparison: which experiment trains into which run folder, and how to ask for it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class PlannedRun:
    """One (task, data, attention kind, seed) of a comparison and the run folder it trains in.

    ``config`` is the task's experiment config before the kind and seed are applied (an
    ``ExperimentConfig``; a fine-tuning run's has ``init_from`` set to its pretraining run).
    ``config_name`` (a shipped config's name or a file) with ``overrides`` applied in order is that
    config, as ``synthesizer train --config NAME --set ...`` builds it; "" when the config came from
    elsewhere (a test's fake), so that no command line can be written for it."""

    task: str
    data: str
    kind: str
    seed: int
    config: Any
    folder: Path
    config_name: str = ""
    overrides: tuple[str, ...] = ()
