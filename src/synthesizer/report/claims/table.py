"""The seven claims as data: one row of CLAIMS per claim, its special cases fields of the row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...attention.names import PAPER_PURE
from ..tables import Group
from .paper import _SUPERGLUE_KEPT, CLOSE_LOSS, LITTLE_LOSS, MATCH_LOSS, PASSABLE_LOSS
from .records import Gap, Need
from .verdicts import Status, judge_at_most, judge_beyond

# ----------------------------------------------------------------------------- the seven claims
# Each claim is one row of CLAIMS: the task families it is about, its quality checks (kind, reference,
# threshold, what it needs), and whether it also asks for fewer parameters or more speed. The prose of a
# claim's rule is written from the same numbers; evaluate_claims applies every row the same way.

BEST_OTHER = "the best other variant"  # a reference: the best-scoring variant of the group other than the kind
EVERY_TASK = ()

# the group of the GLUE-style average over a pretrained preset's fine-tuned tasks (report.average.put_averages)
GLUE_TASK, GLUE_DATA = "glue", "average"
# task families whose groups average fine-tuned tasks: no model of their own to count or time (their tasks are)
AVERAGES = (GLUE_TASK,)

PURE_SYNTHESIZERS = tuple(kind for kind in PAPER_PURE if kind != "vanilla")  # in the paper's order


@dataclass(frozen=True)
class QualityRule:
    """``kind`` against ``reference``: the loss (kept shares, units of vanilla's gain) judged against
    ``threshold`` as ``need`` asks (clearly behind: :func:`judge_beyond`; otherwise :func:`judge_at_most`)."""

    kind: str
    reference: str
    threshold: float
    need: Need
    source: str = ""          # where the threshold comes from, said with the need
    if_trained: bool = False  # checked where the kind was trained, skipped (not "not run") where it was not

    @property
    def judge(self) -> Callable[[Gap, float], Status]:
        return judge_beyond if self.need is Need.BEHIND else judge_at_most


@dataclass(frozen=True)
class Claim:
    """One claim of the paper and how it is checked on a run."""

    number: int
    short: str                # the claim in a few words, for the results index
    claim: str                # the paper's claim, in a sentence
    rule: str                 # how it is checked, for the report
    tasks: tuple[str, ...]    # the task families it is about (EVERY_TASK: all)
    quality: tuple[QualityRule, ...]
    fewer_params: tuple[tuple[str, str], ...] = ()  # (kind, reference): fewer attention parameters
    faster: tuple[tuple[str, str], ...] = ()        # (kind, reference): faster, timed one at a time
    family: str = ""          # what "does not apply" names where the run has none of ``tasks``
    # where the run has none of ``tasks``: the families whose checks are shown as a reading, without a verdict
    readings: tuple[str, ...] = ()
    untimed: tuple[str, ...] = AVERAGES  # families where parameters and speed are not checked

    def applies(self, group: Group) -> bool:
        return not self.tasks or group.task in self.tasks

    def timed(self, group: Group) -> bool:
        """Are parameters and speed checked on ``group`` (not an average of fine-tuned tasks)?"""
        return group.task not in self.untimed


def _at_most(kind: str, ref: str, threshold: float, why: str) -> QualityRule:
    return QualityRule(kind, ref, threshold, Need.AT_MOST, why)


_FACTORIZED = (("factorized_random", "random"), ("factorized_dense", "dense"))
CLAIMS: tuple[Claim, ...] = (
    Claim(1, "fixed random attention trains to a passable model",
          "Even a fixed random attention matrix trains to a passable model (WMT EnDe 23.89 BLEU vs 27.67).",
          f"On every task: fixed_random keeps at least {1 - PASSABLE_LOSS:.1%} of vanilla's gain over the trivial "
          f"predictor (a loss of at most {PASSABLE_LOSS:.1%}: the paper's 23.89 vs 27.67 BLEU, trivial BLEU taken as "
          "0), with the whole 95% interval inside, on a task where `none` (no attention) clearly fails the same "
          "test. Here and below, a comparison where every variant involved scores at chance, or where vanilla does "
          "not clearly beat the trivial predictor, cannot tell.", EVERY_TASK,
          (_at_most("fixed_random", "vanilla", PASSABLE_LOSS,
                    f"the paper's fixed_random keeps {1 - PASSABLE_LOSS:.1%}, WMT14 EnDe"),)),
    Claim(2, "trained random and dense come close to vanilla (MT, LM)",
          "Trained random and dense come close to vanilla on translation and language modelling.",
          f"On every lm / translation task: random and dense each lose at most {CLOSE_LOSS:.2%} of vanilla's gain "
          "over the trivial predictor (the largest loss of the paper's rows: LM1B random 40.60 vs 38.21, unigram "
          "perplexity taken as 1000), with the whole 95% interval inside, where `none` clearly fails the same test.",
          ("lm", "translation"),
          tuple(_at_most(k, "vanilla", CLOSE_LOSS, "the paper's largest: LM1B random") for k in ("random", "dense")),
          family="language modelling or translation"),
    Claim(3, "factorized: a little worse, fewer parameters, faster",
          "Factorized variants lose a little quality, use fewer parameters, and run faster.",
          f"On every task, factorized_random against random and factorized_dense against dense: a loss of at most "
          f"{LITTLE_LOSS:.2%} of vanilla's gain (the paper's factorized vs dense, 26.42 vs 26.63 BLEU with vanilla "
          "26.62) with the whole 95% interval inside where `none` clearly fails the same test; fewer attention "
          "parameters at the task's own max_len (where the factorization cannot save any at that length, the check "
          "does not apply and says from which length it does); faster in a timing of the variants one at a time "
          "(same process, same load; runs trained side by side do not judge speed).", EVERY_TASK,
          tuple(_at_most(f, full, LITTLE_LOSS, "the paper's: T5 WMT EnDe") for f, full in _FACTORIZED),
          fewer_params=_FACTORIZED, faster=_FACTORIZED),
    Claim(4, "random+vanilla and dense+vanilla match or beat vanilla",
          "Mixtures with dot-product attention (random+vanilla, dense+vanilla) match or beat vanilla.",
          f"On every task, for random+vanilla and dense+vanilla: a loss of at most {MATCH_LOSS:.2%} of vanilla's "
          "gain, the largest the paper still calls a match (LM1B random+vanilla 40.05 vs 38.21, unigram perplexity "
          "taken as 1000), with the whole 95% interval inside, where `none` clearly fails the same test; "
          "contradicted when the whole interval is a larger loss. A difference inside the uncertainty cannot tell.",
          EVERY_TASK, tuple(_at_most(k, "vanilla", MATCH_LOSS, "the paper's tolerance for a match: LM1B random+vanilla")
                            for k in ("random+vanilla", "dense+vanilla"))),
    Claim(5, "random beats dynamic convolution (speed and perplexity)",
          "random is about 60% faster than dynamic convolution and 3.5% better in perplexity (C4).",
          "On every lm task: random keeps more of vanilla's gain than dynamicconv, the whole 95% interval on that "
          "side, where `none` does not, and it is faster in a timing of the two one at a time (train it with "
          "--baselines dynamicconv).", ("lm",),
          (QualityRule("random", "dynamicconv", 0.0, Need.BETTER, "paper: 3.5% better"),),
          faster=(("random", "dynamicconv"),), family="language modelling"),
    Claim(6, "factorized_random beats Linformer on encoding-only tasks",
          "factorized_random outperforms Linformer on encoding-only tasks (AG News, IMDb reviews), and runs faster.",
          "On every classification task: factorized_random keeps more of vanilla's gain over the majority class "
          "than linformer (its projected length k at most max_len / 4, so that it compresses), the whole 95% "
          "interval on that side, where `none` does not, and it is faster in a timing of the two one at a time.",
          ("classification",),
          (QualityRule("factorized_random", "linformer", 0.0, Need.BETTER),),
          faster=(("factorized_random", "linformer"),), family="classification"),
    Claim(7, "pure synthesizers fall behind on GLUE; random+vanilla best",
          "On GLUE/SuperGLUE, pure synthesizers fall clearly behind; random+vanilla is best.",
          "On the GLUE-style average of the tasks fine-tuned from a span-corruption pretraining (the glue preset, "
          f"the paper's setting): each pure synthesizer trained loses more than the {MATCH_LOSS:.2%} of a match "
          f"(claim 4) with the whole 95% interval beyond it (the paper's keep {min(_SUPERGLUE_KEPT):.0%}-"
          f"{max(_SUPERGLUE_KEPT):.0%} of vanilla's gain on SuperGLUE), and random+vanilla keeps more than the best "
          "other variant, the whole interval on that side. Classification trained from scratch (ListOps, the "
          "classification preset) is not GLUE: its reading is shown, without a verdict.", (GLUE_TASK,),
          (*(QualityRule(k, "vanilla", MATCH_LOSS, Need.BEHIND, f"a loss above the {MATCH_LOSS:.2%} of a match",
                         if_trained=True)
             for k in PURE_SYNTHESIZERS),
           QualityRule("random+vanilla", BEST_OTHER, 0.0, Need.BEST)),
          family="GLUE-style (pretrained, then fine-tuned)", readings=("classification",)),
)
