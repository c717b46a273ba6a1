"""Planning a comparison (:mod:`.study` decides once what is asked, :mod:`.plan` lists the runs), executing
it here (:mod:`.execute`, a local process pool) or elsewhere (:mod:`.command`, ``synthesizer train`` lines
for any scheduler), and the command that does both then hands the results to the report (:mod:`.run`,
:mod:`.main`).

The names below are imported on first use (PEP 562): ``compare render`` goes through :mod:`.main`
without the training side's torch."""

from ..lazy import lazy_exports

__all__ = ["Options", "Study", "compare", "resolve", "run_comparison", "run_study"]

__getattr__, __dir__ = lazy_exports(__name__, {"Options": "study", "Study": "study", "resolve": "study",
                                               "compare": "run", "run_comparison": "run", "run_study": "run"})
