"""Reports of comparisons, pure: results.json -> groups -> learning and the paper's claims -> markdown/HTML,
plots. Training the runs, the presets and reading attention maps out of checkpoints are
``synthesizer.comparison``'s; nothing here imports torch or the models."""

from .claims import evaluate_claims
from .groups import build_groups
from .summary import render

__all__ = ["build_groups", "evaluate_claims", "render"]
