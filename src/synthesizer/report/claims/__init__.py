"""The paper's seven claims (../shared/PAPER.md), each checked by an explicit rule over the measured table.

**Scale.** Quality is compared as the **kept share**: the part of vanilla's gain over the group's trivial
predictor that a variant keeps, ``(phi(x) - phi(trivial)) / (phi(vanilla) - phi(trivial))`` with ``phi = -ln``
for perplexity and ``phi = x`` for BLEU, ROUGE, accuracy and other higher-is-better metrics. The trivial predictor
is the records' own baseline of the metric (unigram model, majority class, copying the source), else the group's
at-chance line. A variant's **loss** against a reference is the difference of their kept shares (positive = worse),
in units of vanilla's gain, so a threshold means the same at any model size. Where vanilla does not clearly beat
the trivial predictor the scale is undefined and every quality check of the group cannot tell.

**Uncertainty.** With ``MIN_SEEDS`` (3) or more seeds paired across the two variants: a 95% t-interval of the
per-seed losses. Where the records hold per-example statistics of the test metric (``per_example``, see
:mod:`.stats`): a paired bootstrap over test examples, and the union of both intervals when both exist. Otherwise
nothing is measured and the interval is unbounded: a finite gap then cannot tell, never "supports".

**Verdicts.** "At most t worse" (and "better", t = 0): *supports* when the whole interval is at or below t,
*contradicts* when it is all above t, *cannot tell* otherwise; "falls behind" is the reverse. The thresholds are the
paper's own gaps on this scale (constants below; their rows and the translation are in docs/paper_numbers.md). A
kind that diverged counts as infinitely worse. Training speed (tokens, target tokens or examples per second) is
compared with the tolerance ``SPEED_TOLERANCE`` (5%: the CPU is shared and timings drift), or the seed spread of
the speeds when larger. A claim's verdict is "contradicts" if any check contradicts, "supports" if every check
supports, and "cannot tell" otherwise, including when the run did not train a variant the claim needs. Where a
group's vanilla is still learning or does not clearly beat its trivial predictor (``Group.learning``, see
:mod:`.learning`), a quality check keeps its verdict and its text and reason start with "provisional: ...".

**The none floor.** Where a group trained ``none`` (no mixing between tokens), a variant whose loss against it
is not wholly below 0 (the same interval as above) is "not clearly better than none": its table status says so,
with that interval (:func:`judge_rows`, a record per row kept by ``groups.build_groups`` beside the rows) and
so does every check that involves it.

**The attention gate.** Where vanilla itself is not clearly better than ``none`` (:func:`uses_attention`, the rule
above), the task measures nothing about attention: every check on it cannot tell, its reason first "attention
contributes nothing measurable on this task" (:func:`attention_gate`, :func:`gate_check`); with no interval at all (one seed, no
per-example scores) "what attention contributes is not measured", and the table says so instead of the flag.
Where the group trained no ``none`` this cannot be checked and every decided check is marked provisional first.

**Attention's contribution.** Beside the kept share, every check and table gives each kind's share of vanilla's gain
over ``none`` (:func:`attention_scale`, log scale for perplexity): "random keeps 91% [85%, 97%] of what vanilla's
attention adds". The thresholds stay on the kept-share scale (the paper has no ``none``). A check whose interval
straddles its threshold says about how many seeds would decide it (:func:`seeds_to_settle`). The full rules, for
users: docs/claims.md.

**Data, then words.** A check is a record (:class:`Check`: its verdict, what it found as a :class:`Reason` with
the numbers it needs, and what qualifies it: the learning facts, the none floor, the gate); a claim's special
cases are fields of its row in :data:`CLAIMS`. Every sentence is written from these records by :mod:`.wording`,
at the edge: the report, the summary and the index call it; nothing reads the words back.
"""

from ..tables import NO_ATTENTION_USE, USE_NOT_MEASURED
from .contribution import attention_scale, contribution, seeds_to_settle
from .floor import NONE_KIND, attention_use_gap, no_attention_passes, uses_attention
from .gate import attention_gate, attention_notes, gate_check
from .kept import (BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, MIN_SEEDS, TRIVIAL_KEYS, Scale, quality_gap, scale_of,
                   trivial_key, trivial_score)
from .paper import (CLOSE_LOSS, LITTLE_LOSS, MATCH_LOSS, PAPER_ENDE, PAPER_ENFR, PAPER_LM1B, PAPER_LM1B_UNIGRAM,
                    PAPER_T5_ENDE, PAPER_T5_SUPERGLUE, PASSABLE_LOSS, SUPERGLUE_TRIVIAL, kept_share)
from .records import (Contribution, Decide, Finding, Floor, Gap, Gate, GateReason, Interval, Need, NoneFloor,
                      QualityGap, Reason, Seeds, Side, SpeedGap, Timing, Trivial)
from .rows import judge_rows, share_of
from .rules import evaluate_claims
from .speed import SPEED_TOLERANCE, slowdown, timed_slowdown
from .table import AVERAGES, BEST_OTHER, CLAIMS, GLUE_DATA, GLUE_TASK, PURE_SYNTHESIZERS, Claim, QualityRule
from .verdicts import (CANNOT_TELL, CONTRADICTS, DOES_NOT_APPLY, JUDGED, NOT_RUN, SUPPORTS, Check, Status, Verdict,
                       combine, judge_at_most, judge_beyond)
from .wording import (CONTRIBUTION_NOT_MEASURED, NO_NONE, NOT_CHECKED, NOTHING_MEASURABLE, REASON_WIDTH,
                      TRIVIAL_NAMES, attention_note, check_brief, check_text, label_note, verdict_label, verdict_reason)
