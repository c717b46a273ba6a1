"""Did vanilla learn? Two facts per task of a comparison, computed here once for the report, the command's
closing summary and the claims (whose reasons say "provisional" where either fact fails).

* **Flatness**: the relative fall of vanilla's validation loss over the last quarter of training, from the
  eval records of each run's ``curve``: from the eval at or just before ``LAST_QUARTER`` (75%) of the run's
  steps to its last eval, ``(loss_start - loss_last) / |loss_start|``, the mean over vanilla's seeds. Below
  ``FLAT_DROP`` (2%) the curve has flattened; above it vanilla is still learning and every verdict on the
  task is provisional (a longer run could change it). A loss that fell by less than ``FLAT_NATS`` (0.01
  nats per prediction) has flattened too, whatever its relative fall: a solved task (a diagnostic at 100%
  accuracy) has a loss near 0, where a fall from 0.002 to 0.0005 is 75% of it and changes no prediction.
  A run that stopped at its early-stopping target (``train.stop_at``) has learned what the task asks: it is
  not measured, and where every seed did, vanilla has finished learning.
* **Margins**: vanilla's test score against each trivial predictor the records hold (``baselines``: the
  unigram model for perplexity, copying the source for generation, the majority class for accuracy), in
  raw units and with the 95% interval of the claims (a t-interval over 3 or more seeds; for the task's own
  metric, also a bootstrap over vanilla's per-example statistics, the predictor's score held fixed), on the
  same ``phi`` scale as the kept share (log scale for perplexity). Vanilla *clearly* beats a predictor
  when the whole interval is above ``MIN_MARGINS`` (0 unless the task asks more: translation needs 3 BLEU
  above copying the source); with no interval measured the point estimate decides, and the text says so.
"""

from __future__ import annotations

import statistics

import numpy as np

from .claims import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, GLUE_TASK, MIN_SEEDS, TRIVIAL_NAMES, Scale, trivial_key
from .learning_facts import Flatness, Learning, Margin
from ..runs.results import failed, finite_number
from .stats import bootstrap_metric, per_example_of, t_interval
from .tables import Group

LAST_QUARTER = 0.75        # the last quarter starts at the eval at or just before 75% of the steps
# the margin over a trivial predictor the task asks for, by (task, metric), in the metric's units
MIN_MARGINS = {("translation", "bleu"): 3.0}
# a trivial predictor's name by the prefix of its ``baselines`` key (claims.TRIVIAL_NAMES first)
PREDICTOR_PREFIXES = (("copy_source_", "copying the source"), ("unigram_", "the unigram model"),
                      ("majority_", "the majority class"), ("chance_", "a uniform guess"))
SAME_AS = {"bits_per_token": "perplexity"}  # a transform of another metric: its margin is shown once
LOWER_IS_BETTER = ("perplexity", "loss", "bits_per_token")
VANILLA = "vanilla"


def curve_drop(curve: list[dict], steps: int | None = None) -> tuple[float, int, int, float] | None:
    """(relative fall, start step, end step, absolute fall) of ``valid_loss`` over the last quarter of a run
    of ``steps`` steps (default: its last eval); None without an eval at or before 75% of them and a later one."""
    points = sorted((int(p["step"]), float(p["valid_loss"])) for p in curve or [] if finite_number(p.get("valid_loss")))
    if len(points) < 2:
        return None
    cut = LAST_QUARTER * (steps or points[-1][0])
    before = [p for p in points[:-1] if p[0] <= cut]
    if not before or before[-1][1] == 0:
        return None
    (start, first), (end, last) = before[-1], points[-1]
    return (first - last) / abs(first), start, end, first - last


def early_stop_target(run: dict) -> str:
    """The early-stopping target of ``run``'s config: "validation accuracy 0.99" ("" where it has none)."""
    train = (run.get("config") or {}).get("train") or {}
    metric, at = train.get("stop_metric"), train.get("stop_at")
    return f"validation {metric} {at:g}" if metric and isinstance(at, (int, float)) else ""


def reached_target(run: dict) -> bool:
    """Whether ``run`` stopped because it reached its early-stopping target (training/loop.py's "target")."""
    return run.get("stopped") == "target"


def _flatness(runs: list[dict]) -> Flatness | str:
    # a run stopped at its early-stopping target has learned what the task asks: its last quarter is not measured
    reached = [r for r in runs if reached_target(r)]
    target = early_stop_target(reached[0]) if reached else ""
    measured = [r for r in runs if not reached_target(r)]
    drops = [d for d in (curve_drop(r.get("curve"), r.get("steps")) for r in measured) if d is not None]
    if reached and not measured:
        step = int(reached[0].get("steps") or 0)
        return Flatness(0.0, step, step, 0, 0.0, len(reached), target)
    if not drops:
        if not any(r.get("curve") for r in runs):
            return "no validation curve recorded for vanilla"
        return ("vanilla's validation curve has too few evaluations to tell whether it flattened (it needs one at "
                f"or before {LAST_QUARTER:.0%} of the steps and a later one)")
    return Flatness(statistics.fmean(d[0] for d in drops), drops[0][1], drops[0][2], len(drops),
                    statistics.fmean(d[3] for d in drops), len(reached), target)


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
    scale = Scale(metric, trivial, None, log, higher)
    by_seed = {int(r.get("seed", 0)): r["test_metrics"][metric] for r in runs
               if finite_number(r["test_metrics"].get(metric)) and (not log or r["test_metrics"][metric] > 0)}
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
    ok = sorted((r for r in runs if r.get("attention") == VANILLA and not failed(r) and not r.get("diverged")
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
