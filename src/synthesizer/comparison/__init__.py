"""Planning a comparison (:mod:`.plan`), executing it here (:mod:`.execute`, a local process pool) or
elsewhere (:mod:`.command`, ``synthesizer train`` lines for any scheduler), and the command that does both
then hands the results to the report (:mod:`.run`, :mod:`.main`).

The names below are imported on first use (PEP 562): ``compare --render`` goes through :mod:`.main`
without the training side's torch."""

from ..lazy import lazy_exports

__all__ = ["Options", "compare", "run_comparison"]

__getattr__, __dir__ = lazy_exports(__name__, {"Options": "plan", "compare": "run", "run_comparison": "run"})
