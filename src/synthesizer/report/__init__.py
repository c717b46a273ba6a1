"""Reports of comparisons, pure: results.json -> groups -> learning and the paper's claims -> markdown/HTML,
plots. Training the runs, the presets and reading attention maps out of checkpoints are
``synthesizer.comparison``'s; nothing here imports torch or the models.

The names below are imported on first use (PEP 562): a module of the report (:mod:`.layer_place`) is
imported without the others (the plots pick matplotlib's backend when imported)."""

from ..lazy import lazy_exports

__all__ = ["build_groups", "evaluate_claims", "render"]

__getattr__, __dir__ = lazy_exports(__name__, {"build_groups": "groups", "evaluate_claims": "claims",
                                               "render": "summary"})
