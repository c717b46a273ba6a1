"""The facts behind "Did vanilla learn?" as records: the flatness of vanilla's validation curve and its
margins over the trivial predictors, with their texts. :mod:`.learning` computes them from the run records;
a table's group (:class:`.tables.Group`) holds them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

FLAT_DROP = 0.02           # a smaller relative fall of the validation loss: flattened
FLAT_NATS = 0.01           # or a smaller absolute fall (nats): a loss already near 0
FRACTION_METRICS = ("accuracy", "f1", "mcc")  # fractions, shown in points (x 100)
METRIC_UNITS = {"bleu": "BLEU", "bleu1": "BLEU-1", "rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L",
                "accuracy": "accuracy points", "f1": "F1 points", "mcc": "MCC points"}


@dataclass
class Flatness:
    """Vanilla's validation-loss fall over the last quarter of training (mean over ``seeds``); seeds whose
    training stopped at its early-stopping target (``reached_target`` of them) have learned what the task asks
    and are not measured (``seeds`` 0 where all did: then ``start`` and ``end`` are the first one's last step)."""

    drop: float               # relative fall, positive = the loss went down
    start: int                # the steps it runs between (first seed)
    end: int
    seeds: int
    nats: float = math.inf    # absolute fall (mean over seeds)
    reached_target: int = 0   # seeds stopped at the early-stopping target
    target: str = ""          # that target: "validation accuracy 0.99"

    @property
    def _target(self) -> str:
        return f" ({self.target})" if self.target else ""

    @property
    def flattened(self) -> bool:
        return self.seeds == 0 or self.drop < FLAT_DROP or self.nats < FLAT_NATS

    def head(self) -> str:
        """"vanilla's validation loss fell 1.3% over the last quarter of training": the fall without its verdict."""
        if self.seeds == 0:
            return f"vanilla reached its early-stopping target{self._target} in every seed"
        moved = f"fell {self.drop:.1%}" if self.drop >= 0 else f"rose {-self.drop:.1%}"
        return f"vanilla's validation loss {moved} over the last quarter of training"

    def text(self) -> str:
        if self.seeds == 0:
            return f"{self.head()} (learned: training stopped there; step {self.end}, first seed)"
        if self.drop < FLAT_DROP:
            state = f"flattened: < {FLAT_DROP:.0%}"
        elif self.flattened:
            state = f"flattened: by only {self.nats:.2g} nats, < {FLAT_NATS:g}"
        else:
            state = "still learning: verdicts on this task are provisional"
        over = f"steps {self.start} to {self.end}" + (f", mean over {self.seeds} seeds" if self.seeds > 1 else "")
        if self.reached_target:
            over += (f"; {self.reached_target} more seed{'s' * (self.reached_target > 1)} reached the early-stopping "
                     f"target{self._target} and {'are' if self.reached_target > 1 else 'is'} not counted")
        return f"{self.head()} ({state}; {over})"


@dataclass
class Margin:
    """Vanilla's test score against one trivial predictor's, on the kept share's ``phi`` scale."""

    predictor: str            # "copying the source"
    key: str                  # the ``baselines`` key: "copy_source_bleu"
    metric: str
    vanilla: float            # mean over seeds
    trivial: float
    gain: float               # phi(vanilla) - phi(trivial), mean over seeds (> 0: vanilla better)
    low: float | None         # its 95% interval (None: nothing measured)
    high: float | None
    how: str                  # how the interval was measured, or why it was not
    minimum: float = 0.0      # the gain the task asks for
    primary: bool = False     # the task's own metric: the predictor of the kept-share scale
    log: bool = False         # perplexity: phi = -ln x
    higher_is_better: bool = True

    @property
    def clear(self) -> bool:
        """Vanilla beats the predictor by more than the task asks and than the uncertainty."""
        return self.gain > self.minimum and (self.low is None or self.low > self.minimum)

    def raw(self, gain: float) -> float:
        """A gain on the phi scale in the metric's units (positive = vanilla better)."""
        return self.trivial * (1.0 - math.exp(-gain)) if self.log else gain

    def _amount(self, value: float) -> str:
        scale = 100.0 if self.metric in FRACTION_METRICS else 1.0
        return f"{value * scale:.3g}"

    @property
    def unit(self) -> str:
        return METRIC_UNITS.get(self.metric, self.metric)

    def text(self, brief: bool = False) -> str:
        """"vanilla 3.8 BLEU above copying the source (20.1 vs 16.3; 95% interval [1.2, 6.4] BLEU, ...)"."""
        raw = self.raw(self.gain)
        side = "above" if (raw > 0) == self.higher_is_better else "below"
        head = f"vanilla {self._amount(abs(raw))} {self.unit} {side} {self.predictor}"
        shown = "" if self.low is None else f"[{self._amount(self.raw(self.low))}, {self._amount(self.raw(self.high))}]"
        if brief:
            out = f"{head} {shown}" if shown else head
        else:
            detail = f"{self.how}: {shown} {self.unit}" if shown else self.how
            if shown and self.primary and self.gain > 0:  # the interval in units of the gain itself
                detail += (f", {self.low / self.gain:.0%} to {self.high / self.gain:.0%} of vanilla's gain, "
                           "the unit of the kept share")
            out = f"{head} ({self.vanilla:.4g} vs {self.trivial:.4g}; {detail})"
        if self.clear:
            return out
        if not self.primary:  # a metric the task is not judged by (dialogue by perplexity: BLEU-1): no warning
            return f"{out}: {self.shortfall()} (not the metric this task is judged by)"
        return f"**warning: {out}: {self.shortfall()}**"

    def shortfall(self) -> str:
        """Why vanilla does not clearly beat the predictor."""
        asked = f"; the task asks for at least {self.minimum:g} {self.unit} above it" if self.minimum else ""
        if self.gain <= 0:
            return "no better than this trivial predictor"
        if self.gain <= self.minimum:
            return asked[2:]
        return f"not clearly above it, the 95% interval reaches {self._amount(self.raw(self.low))}{asked}"


@dataclass(frozen=True)
class Provisional:
    """Why verdicts on a task are provisional though they stand: vanilla is still learning and/or not clearly
    above ``unclear`` (the names of the task's own trivial predictors it does not clearly beat)."""

    still_learning: bool
    unclear: tuple[str, ...] = ()


@dataclass
class Learning:
    """Both facts for one task (group): the flatness of vanilla's curve and its margins."""

    key: str
    flatness: Flatness | None
    margins: list[Margin] = field(default_factory=list)
    curve_note: str = ""      # why there is no flatness

    @property
    def still_learning(self) -> bool:
        return self.flatness is not None and not self.flatness.flattened

    @property
    def provisional(self) -> Provisional | None:
        """Why verdicts on the task are provisional (vanilla still learning and/or not clearly above the task's
        own trivial predictor), or None when both facts hold. Margins on other metrics do not touch the claims,
        which use the task's."""
        unclear = tuple(m.predictor for m in self.margins if m.primary and not m.clear)
        return Provisional(self.still_learning, unclear) if self.still_learning or unclear else None

    def curve_text(self) -> str:
        return self.flatness.text() if self.flatness is not None else self.curve_note

    def text(self) -> str:
        """The paragraph under the task's table."""
        margins = ("; ".join(m.text() for m in self.margins)
                   or "no trivial predictor's score recorded for vanilla's metrics")
        return f"**Did vanilla learn?** {_sentence(self.curve_text())} {_sentence(margins)}"

    def summary(self) -> str:
        """One line for the command's closing summary."""
        curve = (self.flatness.head() + (" (flattened)" if self.flatness.flattened else " (still learning)")
                 if self.flatness is not None else self.curve_note)
        margins = [m.text(brief=True).replace("**", "") for m in self.margins]
        return "; ".join([f"{self.key}: {curve}", *margins])


def _sentence(text: str) -> str:
    text = text[0].upper() + text[1:]
    return text if text.endswith(".") else f"{text}."
