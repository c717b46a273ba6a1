"""Planning a comparison (:mod:`.plan`), executing it here (:mod:`.execute`, a local process pool) or
elsewhere (:mod:`.command`, ``synthesizer train`` lines for any scheduler), and the command that does both
then hands the results to the report (:mod:`.run`, :mod:`.main`)."""

from .plan import Options
from .run import compare, run_comparison

__all__ = ["Options", "compare", "run_comparison"]
