"""Reports of comparisons, pure: results.json -> groups -> learning and the paper's claims -> markdown/HTML,
plots. Training the runs is ``synthesizer.comparison``'s."""

from .claims import evaluate_claims
from .presets import DEFAULT_KINDS, PRESETS
from .groups import build_groups
from .summary import render

__all__ = ["DEFAULT_KINDS", "PRESETS", "build_groups", "evaluate_claims", "render"]
