"""Did vanilla learn? Two facts per task of a comparison, computed here once for the report, the command's
closing summary and the claims (whose reasons say "provisional" where either fact fails).

* **Flatness**: the relative fall of vanilla's validation loss over the last quarter of training, from the
  eval records of each run's ``curve``: from the eval at or just before ``LAST_QUARTER`` (75%) of the run's
  steps to its last eval, ``(loss_start - loss_last) / |loss_start|``, the mean over vanilla's seeds. Below
  ``FLAT_DROP`` (2%) the curve has flattened; above it vanilla is still learning and every verdict on the
  task is provisional (a longer run could change it). A loss that fell by less than ``FLAT_NATS`` (0.01
  nats per prediction) has flattened too, whatever its relative fall: a solved task (a diagnostic at 100%
  accuracy) has a loss near 0, where a fall from 0.002 to 0.0005 is 75% of it and changes no prediction.
* **Margins**: vanilla's test score against each trivial predictor the records hold (``baselines``: the
  unigram model for perplexity, copying the source for generation, the majority class for accuracy), in
  raw units and with the 95% interval of the claims (a t-interval over 3 or more seeds; for the task's own
  metric, also a bootstrap over vanilla's per-example statistics, the predictor's score held fixed), on the
  same ``phi`` scale as the kept share (log scale for perplexity). Vanilla *clearly* beats a predictor
  when the whole interval is above ``MIN_MARGINS`` (0 unless the task asks more: translation needs 3 BLEU
  above copying the source); with no interval measured the point estimate decides, and the text says so.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np

from .claims import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, GLUE_TASK, MIN_SEEDS, TRIVIAL_NAMES, Scale, trivial_key
from .stats import bootstrap_metric, per_example_of, t_interval
from .tables import Group

LAST_QUARTER = 0.75        # the last quarter starts at the eval at or just before 75% of the steps
FLAT_DROP = 0.02           # a smaller relative fall of the validation loss: flattened
FLAT_NATS = 0.01           # or a smaller absolute fall (nats): a loss already near 0
# the margin over a trivial predictor the task asks for, by (task, metric), in the metric's units
MIN_MARGINS = {("translation", "bleu"): 3.0}
# a trivial predictor's name by the prefix of its ``baselines`` key (claims.TRIVIAL_NAMES first)
PREDICTOR_PREFIXES = (("copy_source_", "copying the source"), ("unigram_", "the unigram model"),
                      ("majority_", "the majority class"), ("chance_", "a uniform guess"))
SAME_AS = {"bits_per_token": "perplexity"}  # a transform of another metric: its margin is shown once
LOWER_IS_BETTER = ("perplexity", "loss", "bits_per_token")
FRACTION_METRICS = ("accuracy", "f1", "mcc")  # fractions, shown in points (x 100)
METRIC_UNITS = {"bleu": "BLEU", "bleu1": "BLEU-1", "rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L",
                "accuracy": "accuracy points", "f1": "F1 points", "mcc": "MCC points"}
VANILLA = "vanilla"


@dataclass
class Flatness:
    """Vanilla's validation-loss fall over the last quarter of training (mean over ``seeds``)."""

    drop: float               # relative fall, positive = the loss went down
    start: int                # the steps it runs between (first seed)
    end: int
    seeds: int
    nats: float = math.inf    # absolute fall (mean over seeds)

    @property
    def flattened(self) -> bool:
        return self.drop < FLAT_DROP or self.nats < FLAT_NATS

    def text(self) -> str:
        moved = f"fell {self.drop:.1%}" if self.drop >= 0 else f"rose {-self.drop:.1%}"
        if self.drop < FLAT_DROP:
            state = f"flattened: < {FLAT_DROP:.0%}"
        elif self.flattened:
            state = f"flattened: by only {self.nats:.2g} nats, < {FLAT_NATS:g}"
        else:
            state = "still learning: verdicts on this task are provisional"
        over = f"steps {self.start} to {self.end}" + (f", mean over {self.seeds} seeds" if self.seeds > 1 else "")
        return f"vanilla's validation loss {moved} over the last quarter of training ({state}; {over})"


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
    def provisional(self) -> str:
        """"provisional: vanilla still learning" (and/or not clearly above the task's own trivial predictor),
        or "" when both facts hold. Margins on other metrics do not touch the claims, which use the task's."""
        parts = ["still learning"] if self.still_learning else []
        parts += [f"not clearly above {m.predictor}" for m in self.margins if m.primary and not m.clear]
        return f"provisional: vanilla {' and '.join(parts)}" if parts else ""

    def curve_text(self) -> str:
        return self.flatness.text() if self.flatness is not None else self.curve_note

    def text(self) -> str:
        """The paragraph under the task's table."""
        margins = ("; ".join(m.text() for m in self.margins)
                   or "no trivial predictor's score recorded for vanilla's metrics")
        return f"**Did vanilla learn?** {_sentence(self.curve_text())} {_sentence(margins)}"

    def summary(self) -> str:
        """One line for the command's closing summary."""
        curve = (self.curve_text().split(" (")[0] + (" (flattened)" if self.flatness.flattened else " (still learning)")
                 if self.flatness is not None else self.curve_note)
        margins = [m.text(brief=True).replace("**", "") for m in self.margins]
        return "; ".join([f"{self.key}: {curve}", *margins])


def _sentence(text: str) -> str:
    text = text[0].upper() + text[1:]
    return text if text.endswith(".") else f"{text}."


def curve_drop(curve: list[dict], steps: int | None = None) -> tuple[float, int, int, float] | None:
    """(relative fall, start step, end step, absolute fall) of ``valid_loss`` over the last quarter of a run
    of ``steps`` steps (default: its last eval); None without an eval at or before 75% of them and a later one."""
    points = sorted((int(p["step"]), float(p["valid_loss"])) for p in curve or []
                    if isinstance(p.get("valid_loss"), (int, float)) and math.isfinite(p["valid_loss"]))
    if len(points) < 2:
        return None
    cut = LAST_QUARTER * (steps or points[-1][0])
    before = [p for p in points[:-1] if p[0] <= cut]
    if not before or before[-1][1] == 0:
        return None
    (start, first), (end, last) = before[-1], points[-1]
    return (first - last) / abs(first), start, end, first - last


def _flatness(runs: list[dict]) -> Flatness | str:
    drops = [d for d in (curve_drop(r.get("curve"), r.get("steps")) for r in runs) if d is not None]
    if not drops:
        if not any(r.get("curve") for r in runs):
            return "no validation curve recorded for vanilla"
        return ("vanilla's validation curve has too few evaluations to tell whether it flattened (it needs one at "
                f"or before {LAST_QUARTER:.0%} of the steps and a later one)")
    return Flatness(statistics.fmean(d[0] for d in drops), drops[0][1], drops[0][2], len(drops),
                    statistics.fmean(d[3] for d in drops))


def predictor_name(key: str) -> str:
    if key in TRIVIAL_NAMES:
        return TRIVIAL_NAMES[key]
    return next((name for prefix, name in PREDICTOR_PREFIXES if key.startswith(prefix)), key)


def _metric_of(key: str) -> str:
    return next((key[len(prefix):] for prefix, _ in PREDICTOR_PREFIXES if key.startswith(prefix)), key)


def _margin(group: Group, runs: list[dict], key: str, metric: str, trivial: float, primary: bool) -> Margin | None:
    higher = group.higher_is_better if metric == group.metric else metric not in LOWER_IS_BETTER
    log = metric == "perplexity"
    if log and trivial <= 0:
        return None
    scale = Scale(metric, trivial, "", log, higher)
    by_seed = {int(r.get("seed", 0)): r["test_metrics"][metric] for r in runs
               if isinstance(r["test_metrics"].get(metric), (int, float)) and math.isfinite(r["test_metrics"][metric])
               and (not log or r["test_metrics"][metric] > 0)}
    if not by_seed:
        return None
    gains = [scale.phi(v) - scale.phi(trivial) for v in by_seed.values()]
    bounds, how = [], []
    if len(gains) >= MIN_SEEDS:
        iv = t_interval(gains)
        bounds.append((iv.low, iv.high))
        how.append(f"t-interval over {len(gains)} seeds")
    stats = [per_example_of(r.get("per_example"), metric) for r in runs if int(r.get("seed", 0)) in by_seed]
    if primary and not log and stats and all(stats) and len({(k, np.shape(v)) for k, v in stats}) == 1:
        kind = stats[0][0]
        metrics = bootstrap_metric(kind, np.stack([np.asarray(v, dtype=np.float64) for _, v in stats]),
                                   BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED)
        low, high = np.quantile([scale.phi(m) - scale.phi(trivial) for m in metrics], [0.025, 0.975])
        bounds.append((float(low), float(high)))
        how.append(f"bootstrap over {np.shape(stats[0][1])[0]} test examples, {predictor_name(key)} held fixed")
    if bounds:
        low, high, how_text = min(b[0] for b in bounds), max(b[1] for b in bounds), "95% " + " and ".join(how)
    else:
        low = high = None
        how_text = (f"no uncertainty measured: {len(gains)} seed{'s' if len(gains) > 1 else ''} (a seed interval "
                    f"needs {MIN_SEEDS}), no per-example statistics")
    return Margin(predictor_name(key), key, metric, statistics.fmean(by_seed.values()), trivial,
                  statistics.fmean(gains), low, high, how_text, MIN_MARGINS.get((group.task, metric), 0.0),
                  primary, log, higher)


def vanilla_learning(group: Group, runs: list[dict]) -> Learning | None:
    """Both facts for ``group`` from its raw run records; None when vanilla did not train there."""
    ok = sorted((r for r in runs if r.get("attention") == VANILLA and "error" not in r and not r.get("diverged")
                 and r.get("test_metrics")), key=lambda r: r.get("seed", 0))
    if not ok:
        return None
    # an average of fine-tuned tasks has no training of its own: their tables say whether vanilla flattened
    flat = "an average of the tasks above, each with its own curve" if group.task == GLUE_TASK else _flatness(ok)
    baselines = next((r["baselines"] for r in ok if r.get("baselines")), {})
    own_key = trivial_key(group.metric)  # the predictor of the kept-share scale
    margins = []
    for key, value in baselines.items():
        metric = _metric_of(key)
        if not isinstance(value, (int, float)) or SAME_AS.get(metric) in {_metric_of(k) for k in baselines}:
            continue
        margin = _margin(group, ok, key, metric, float(value), primary=key == own_key)
        if margin is not None:
            margins.append(margin)
    return Learning(group.key, flat if isinstance(flat, Flatness) else None, margins,
                    flat if isinstance(flat, str) else "")
