"""Planning a comparison (:mod:`.study` decides once what is asked, :mod:`.plan` lists the runs), executing
it here (:mod:`.execute`, a local process pool) or elsewhere (:mod:`.command`, ``synthesizer train`` lines
for any scheduler), and the command that does both then hands the results to the report (:mod:`.run`,
:mod:`.main`)."""

from .run import compare, run_comparison, run_study
from .study import Options, Study, resolve

__all__ = ["Options", "Study", "compare", "resolve", "run_comparison", "run_study"]
