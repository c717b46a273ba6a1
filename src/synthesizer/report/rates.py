"""The learning-rate sweep as a report shows it (comparison/tuning.py): seed 0's validation loss of every
kind at every rate, the rate each kind then trained every seed at, and a plot of the losses against the rate."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from . import plots
from .render import Block


def tuning_changes(losses: dict[str, dict[str, float | None]], chosen: dict[str, float],
                   base: float) -> list[tuple[str, float, float, float]] | None:
    """(kind, loss at the ``base`` rate, chosen rate, loss at it) of every kind that finished at both, in
    the sweep's order; None where no kind did (``base`` not in the grid, or nothing chosen yet)."""
    rows = []
    for kind, by_rate in losses.items():
        at_base, rate = by_rate.get(repr(float(base))), chosen.get(kind)
        at_chosen = None if rate is None else by_rate.get(repr(float(rate)))
        if at_base is not None and at_chosen is not None:
            rows.append((kind, at_base, rate, at_chosen))
    return rows or None


def _order(rows: list[tuple[str, float]]) -> list[str]:
    """The kinds by their loss, the lowest first."""
    return [kind for kind, _ in sorted(rows, key=lambda row: row[1])]


def change_blocks(losses: dict, chosen: dict, base: float) -> list[Block]:
    """What tuning changed, from the sweep's seed 0: each kind's validation loss at the ``base`` rate (the
    preset's, where every kind trained before the sweep) and at its chosen rate, and whether the kinds' order
    by that loss moved; [] where ``tuning_changes`` finds nothing to compare."""
    rows = tuning_changes(losses, chosen, base)
    if rows is None:
        return []
    before, after = _order([(k, b) for k, b, _, _ in rows]), _order([(k, a) for k, _, _, a in rows])
    order = (f"Tuning left the kinds' order by seed 0's validation loss as it was: {', '.join(before)} (lowest "
             "first)." if before == after else
             f"Tuning changed the kinds' order by seed 0's validation loss (lowest first): {', '.join(before)} at the "
             f"preset's rate; {', '.join(after)} each at its own.")
    return [("p", f"What tuning changed: seed 0's validation loss at the preset's rate ({base!r}, every kind's "
                  "rate before the sweep) and at the kind's chosen rate."),
            ("table", ["kind", f"at {base!r}", "chosen rate", "at the chosen rate", "change"],
             [[kind, f"{b:.4f}", repr(rate), f"{a:.4f}", f"{a - b:+.4f}"] for kind, b, rate, a in rows]),
            ("p", order)]


def sweep_blocks(tuning: dict, heading: Block, plot_path: Callable[[str], Path],
                 base: float | None = None) -> list[Block]:
    """``heading``, then the sweep's table and its plots (one per task group ``key``, drawn at
    ``plot_path(key)``, beside the report), and, given the ``base`` rate every kind trained at before the
    sweep, what tuning changed (``change_blocks``, per task group); [] where ``tuning`` (tuning.json's
    content) has no losses."""
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
    changes: list[Block] = []
    if base is not None and done:  # what tuning changed, once every choice is final
        for key, kinds in tuning["valid_loss"].items():
            changes += change_blocks(kinds, chosen_by_key.get(key, {}), base)
    return [heading,
            ("p", "Validation loss of seed 0 at each rate of the sweep (— where the run diverged or failed), "
                  "and the rate each kind then trained every seed at (the lowest validation loss). A kind whose "
                  "best rate was an end of the grid was also tried past it, until its best had a rate on each "
                  "side (or a run that diverged)."),
            ("table", [*(["task"] if several else []), "kind", *lrs, "chosen"], rows), *pictures, *changes]
