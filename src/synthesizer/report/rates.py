"""The learning-rate sweep as a report shows it (comparison/tuning.py): seed 0's validation loss of every
kind at every rate, the rate each kind then trained every seed at, and a plot of the losses against the rate."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from . import plots
from .render import Block


def sweep_blocks(tuning: dict, heading: Block, plot_path: Callable[[str], Path]) -> list[Block]:
    """``heading``, then the sweep's table and its plots (one per task group ``key``, drawn at
    ``plot_path(key)``, beside the report); [] where ``tuning`` (tuning.json's content) has no losses."""
    if not tuning.get("valid_loss"):
        return []
    chosen_by_key = tuning.get("chosen") or {}
    done = tuning.get("done", False)  # while the sweep goes on, a choice may still change
    pictures: list[Block] = []
    for key, kinds in tuning["valid_loss"].items():
        plot = plots.plot_rate_sweep(kinds, chosen_by_key.get(key, {}), key, plot_path(key))
        if plot is not None:
            pictures.append(("img", plot.name, f"{key}: validation loss of seed 0 against the learning rate"))
    lrs = [repr(float(lr)) for lr in tuning.get("lrs", [])]
    several = len(tuning["valid_loss"]) > 1  # then each row names its task group
    rows = []
    for key, kinds in tuning["valid_loss"].items():
        for kind, losses in kinds.items():
            chosen = chosen_by_key.get(key, {}).get(kind)
            rows.append([*([key] if several else []), kind,
                         *[(("not tried" if done else "not run yet") if lr not in losses
                            else "—" if losses[lr] is None else f"{losses[lr]:.4f}") for lr in lrs],
                         ("the preset's (none finished)" if chosen is None else repr(chosen))
                         + ("" if done else " (so far)")])
    return [heading,
            ("p", "Validation loss of seed 0 at each rate of the sweep (— where the run diverged or failed), "
                  "and the rate each kind then trained every seed at (the lowest validation loss). A kind whose "
                  "best rate was an end of the grid was also tried past it, until its best had a rate on each "
                  "side (or a run that diverged)."),
            ("table", [*(["task"] if several else []), "kind", *lrs, "chosen"], rows), *pictures]
