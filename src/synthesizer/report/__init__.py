"""Comparisons and their reports: presets, the comparison table, the paper's claims, plots, markdown/HTML."""

from .claims import evaluate_claims
from .compare import main, render, run_comparison
from .presets import DEFAULT_KINDS, PRESETS
from .groups import build_groups

__all__ = ["DEFAULT_KINDS", "PRESETS", "build_groups", "evaluate_claims", "main", "render", "run_comparison"]
