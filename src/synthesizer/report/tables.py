"""The comparison table: one group per (task, data), one row per attention kind, seeds aggregated.

Input: the raw run records of a comparison (``run_experiment`` result dicts, or failure records
``{"task", "data", "attention", "seed", "error"}``). Output: :class:`Group` objects holding, per kind,
the test metric (mean and sample std over the seeds that trained), parameters, training speed and
time, each also relative to vanilla, and a status that says when a variant diverged, failed or
scored at chance.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field

from .learning_facts import Learning
from ..attention.names import PAPER_KINDS as DEFAULT_KINDS  # the rows' order: the paper's kinds first
from ..runs.files import group_key
from ..runs.results import failed

# A variant "scored at chance" when it did no better than a trivial predictor:
#   accuracy <= majority-class accuracy + 1 point; perplexity >= the unigram model's;
#   BLEU / ROUGE below 1 point (a model that learned nothing produces unrelated text).
CHANCE_MARGIN_ACCURACY = 0.01
CHANCE_MAX_GENERATION_SCORE = 1.0
LEARNED_ACCURACY = 0.9  # a recall task counts as learned from this test accuracy on


@dataclass
class Share:
    """A kind's share of one of vanilla's gains, with the 95% interval of its paired loss against vanilla."""

    value: float
    low: float               # -inf / inf: nothing measured
    high: float

    def text(self) -> str:
        measured = math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high
        shown = f" [{self.low:.0%}, {self.high:.0%}]" if measured else ""
        return f"{self.value:.0%}{shown}"


def loss_text(value: float, low: float, high: float) -> str:
    """"loss +35.7% [+20.1%, +51.0%]": a loss in units of vanilla's gain, its interval where one was measured."""
    shown = "" if not math.isfinite(low) else f" [{low:+.1%}, {high:+.1%}]"
    return f"loss {value:+.1%}{shown}"


NO_ATTENTION_USE = "not clearly better than none"  # the interval fails to exclude no gain: said with it
USE_NOT_MEASURED = "use of attention not measured"  # against none, with no interval: one seed, no per-example scores


@dataclass(frozen=True)
class RowJudgement:
    """What the claims' rules say of a row (claims.rows.judge_rows), kept apart from the row as built."""

    ignores_attention: bool = False   # not clearly better than the group's `none` row, by the measured ``loss``
    use_not_measured: bool = False    # against `none`, with no interval to tell (one seed, no per-example scores)
    loss: tuple[float, float, float] | None = None  # its loss against `none` (value, low, high), where it ignores it
    kept: Share | None = None         # share of vanilla's gain over the trivial predictor
    attention_share: Share | None = None  # share of vanilla's gain over `none`: what its attention adds

    @property
    def flagged(self) -> bool:
        return self.ignores_attention or self.use_not_measured


@dataclass
class Row:
    kind: str
    seeds: list[int]
    n_ok: int                       # seeds whose metric counts (trained, did not diverge)
    status: str                     # "ok", "at chance", "diverged", "failed" (+ "k/n seeds" when mixed): shown, never parsed
    metric_mean: float | None
    metric_std: float | None        # sample std over seeds (None with one seed)
    other_metrics: dict = field(default_factory=dict)   # name -> mean over ok seeds
    params_total: int | None = None
    params_attention: int | None = None
    tokens_per_s: float | None = None
    tokens_per_s_std: float | None = None
    train_time_s: float | None = None
    steps: int | None = None
    learning_rates: list[float] = field(default_factory=list)  # the distinct train.lr its runs trained at
    errors: list[str] = field(default_factory=list)
    # relative to vanilla (None when vanilla is not in the group or has no number)
    rel_metric: float | None = None        # (metric - vanilla) / |vanilla|
    rel_params_total: float | None = None  # ratio
    rel_params_attention: float | None = None
    rel_speed: float | None = None         # tokens/s ratio
    rel_time: float | None = None          # train time ratio
    # per seed whose metric counts, in seed order (paired comparisons between variants use these)
    ok_seeds: list[int] = field(default_factory=list)
    metric_values: list[float] = field(default_factory=list)
    per_example: list[dict | None] = field(default_factory=list)  # each record's "per_example" (None: absent)
    baselines: dict = field(default_factory=dict)  # trivial predictors' test scores (the records' "baselines")
    at_chance: bool = False         # its seeds' mean scored no better than the trivial predictor (status "at chance")
    diverged: bool = False          # no seed counts and some diverged: counted as infinitely worse (status "diverged")
    ok: bool = False                # its status is "ok": every seed trained and counts, above chance


@dataclass
class Group:
    key: str                        # "<task>-<data>", also the runs/ sub-folder
    task: str
    data: str
    metric: str
    higher_is_better: bool
    rows: list[Row]
    chance: dict = field(default_factory=dict)   # {"value": float, "why": str} or {}
    learning: Learning | None = None             # did vanilla learn (learning.vanilla_learning); None: no vanilla
    # the one-at-a-time timing of the group's kinds (results.json "timings", see comparison/timing.py); None: not timed
    timing: dict | None = None
    judgements: dict[str, RowJudgement] = field(default_factory=dict)  # by kind (claims.rows.judge_rows)

    def row(self, kind: str) -> Row | None:
        return next((r for r in self.rows if r.kind == kind), None)

    def judged(self, kind: str) -> RowJudgement:
        """What the claims' rules say of ``kind``'s row (nothing, where they were not applied)."""
        return self.judgements.get(kind, RowJudgement())

    def to_dict(self) -> dict:
        return asdict(self)




TASK_NAMES = {"lm": "language modelling", "classification": "classification", "regression": "regression",
              "translation": "translation", "summarization": "summarization", "dialogue": "dialogue",
              "pretrain": "pretraining by span corruption"}


def group_label(group: Group, labels: dict[str, str]) -> str:
    """What a report calls a group: the preset's label (``labels``, by group key: only recorded where the
    runs trained the preset's own data), else the task and the data name the runs record, e.g.
    "language modelling (mine)"."""
    return labels.get(group.key) or f"{TASK_NAMES.get(group.task, group.task)} ({group.data})"


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def trivial_scores(task: str, metric: str, runs: list[dict]) -> dict:
    """The trivial predictor's score for this group, from the runs' ``baselines`` when present."""
    baselines = next((r["baselines"] for r in runs if r.get("baselines")), {})
    if metric == "accuracy":
        if "majority_accuracy" in baselines:
            value = baselines["majority_accuracy"] + CHANCE_MARGIN_ACCURACY
            return {"value": value, "why": f"majority-class accuracy {baselines['majority_accuracy']:.3f} + 0.01"}
        return {}
    if metric == "perplexity":
        if "unigram_perplexity" in baselines:
            return {"value": baselines["unigram_perplexity"],
                    "why": f"unigram-model perplexity {baselines['unigram_perplexity']:.1f}"}
        return {}
    if metric in ("bleu", "bleu1", "rouge1", "rouge2", "rougeL"):
        return {"value": CHANCE_MAX_GENERATION_SCORE, "why": f"{metric} below {CHANCE_MAX_GENERATION_SCORE} point"}
    return {}


def at_chance(value: float, chance: dict, higher_is_better: bool) -> bool:
    if not chance or value is None:
        return False
    return value <= chance["value"] if higher_is_better else value >= chance["value"]


def _order(kinds: set[str]) -> list[str]:
    known = [k for k in DEFAULT_KINDS if k in kinds]
    return known + sorted(kinds - set(known))


def plain_group(key: str, runs: list[dict]) -> Group:
    """The :class:`Group` of one (task, data)'s run records, rows in the paper's order, with its ratios to
    vanilla; what the claims and learning rules add comes after (``groups.build_groups``)."""
    done = [r for r in runs if not failed(r)]
    first = done[0] if done else runs[0]
    metric = first.get("primary_metric", "")
    higher = bool(first.get("higher_is_better", False))
    chance = trivial_scores(first["task"], metric, done)
    rows = [_row(kind, [r for r in runs if r["attention"] == kind], metric, higher, chance)
            for kind in _order({r["attention"] for r in runs})]
    group = Group(key, first["task"], first["data"], metric, higher, rows, chance)
    _relative(group)
    return group


def _row(kind: str, runs: list[dict], metric: str, higher: bool, chance: dict) -> Row:
    runs = sorted(runs, key=lambda r: r.get("seed", 0))
    failures = [r for r in runs if failed(r)]
    trained = [r for r in runs if not failed(r)]
    diverged = [r for r in trained if r.get("diverged")]
    ok = [r for r in trained if not r.get("diverged") and (r.get("test_metrics") or {}).get(metric) is not None]
    mean, std = _mean_std([r["test_metrics"][metric] for r in ok])
    others = sorted({m for r in ok for m in r["test_metrics"]} - {metric})
    other_metrics = {m: _mean_std([r["test_metrics"].get(m) for r in ok])[0] for m in others}
    # the median over logging windows leaves out evaluation time; older records only have the mean
    speed, speed_std = _mean_std([r.get("train_tokens_per_s_median", r.get("train_tokens_per_s")) for r in trained])
    time, _ = _mean_std([r.get("train_time_s") for r in trained])
    params = (trained[0].get("params") or {}) if trained else {}

    n = len(runs)
    steps = [str(r["diverged_step"]) for r in diverged if r.get("diverged_step") is not None]
    at_step = f" at step {', '.join(steps)}" if steps else ""  # older records have no step
    notes = [f"{what} {len(rs)}/{n} seeds{at}" for what, rs, at in (("diverged", diverged, at_step), ("failed", failures, ""))
             if rs]
    if ok:
        status = "at chance" if at_chance(mean, chance, higher) else "ok"
        status = "; ".join([status, *notes])
    elif diverged:
        status = f"diverged{at_step}" if len(diverged) == n else "; ".join([f"diverged{at_step}", *notes[1:]])
    elif failures:
        status = "failed" if len(failures) == n else "; ".join(["failed", *notes])
    else:
        status = "no metric"
    return Row(kind=kind, seeds=[r.get("seed", 0) for r in runs], n_ok=len(ok), status=status, ok=status == "ok",
               at_chance=bool(ok) and at_chance(mean, chance, higher), diverged=not ok and bool(diverged),
               metric_mean=mean, metric_std=std, other_metrics=other_metrics,
               params_total=params.get("total"), params_attention=attention_params(params),
               tokens_per_s=speed, tokens_per_s_std=speed_std, train_time_s=time,
               steps=trained[0].get("steps") if trained else None,
               learning_rates=sorted({lr for r in runs if (lr := run_learning_rate(r)) is not None}),
               errors=[r["error"] for r in failures],
               ok_seeds=[r.get("seed", 0) for r in ok], metric_values=[r["test_metrics"][metric] for r in ok],
               per_example=[r.get("per_example") for r in ok],
               baselines=next((dict(r["baselines"]) for r in trained if r.get("baselines")), {}))


def run_learning_rate(record: dict) -> float | None:
    """The learning rate a run trained at (its config's ``train.lr``); None where the record keeps no config."""
    lr = ((record.get("config") or {}).get("train") or {}).get("lr")
    return float(lr) if isinstance(lr, (int, float)) else None


def attention_params(params: dict) -> int | None:
    """Parameters that decide where to attend: every ``attention.*`` count except values and output
    (Q/K for vanilla, R, the dense MLPs, alpha; a baseline's own projections, e.g. Linformer's E/F)."""
    by = params.get("by_component")
    if not by:
        return params.get("attention_logits")
    return sum(v for k, v in by.items() if k.startswith("attention.") and k != "attention.values_output")


# What a training "token" is for each task: the units step_fn counts.
SPEED_UNITS = {"lm": "tokens", "classification": "examples", "regression": "examples",
               "glue": "examples"}  # glue: the average over fine-tuned classification tasks (claims.GLUE_TASK)


def speed_unit(task: str) -> str:
    return SPEED_UNITS.get(task, "target tokens")


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def _relative(group: Group) -> None:
    base = group.row("vanilla")
    if base is None:
        return
    for row in group.rows:
        if row.metric_mean is not None and base.metric_mean:
            row.rel_metric = (row.metric_mean - base.metric_mean) / abs(base.metric_mean)
        row.rel_params_total = _ratio(row.params_total, base.params_total)
        row.rel_params_attention = _ratio(row.params_attention, base.params_attention)
        row.rel_speed = _ratio(row.tokens_per_s, base.tokens_per_s)
        row.rel_time = _ratio(row.train_time_s, base.train_time_s)


# ----------------------------------------------------------------------------- formatting

def fmt_metric(mean: float | None, std: float | None, metric: str) -> str:
    if mean is None:
        return "n/a"
    digits = 3 if metric in ("accuracy", "f1", "mcc", "pearson", "spearman") else (1 if metric == "perplexity" and mean >= 100 else 2)
    text = f"{mean:.{digits}f}"
    return f"{text} ± {std:.{digits}f}" if std is not None else text


def fmt_count(n: int | None) -> str:
    if n is None:
        return "n/a"
    if n >= 1_000_000:
        return f"{n / 1e6:.2f}M"
    if n >= 10_000:
        return f"{n / 1e3:.1f}k"
    return str(n)


def _fmt_ratio(x: float | None) -> str:
    return "" if x is None else f" (×{x:.2f})"


def status_text(group: Group, row: Row) -> str:
    """A row's status with the claims' judgement of it: "ok; not clearly better than none (loss ... [...])"."""
    judged = group.judged(row.kind)
    if judged.ignores_attention:
        return f"{row.status}; {NO_ATTENTION_USE} ({loss_text(*judged.loss)})"
    return f"{row.status}; {USE_NOT_MEASURED}" if judged.use_not_measured else row.status


def table_rows(group: Group) -> tuple[list[str], list[list[str]]]:
    """Header and cells of a group's table (the same cells go to markdown, HTML and stdout); a learning-rate
    column where the rows trained at different rates (each kind at its own: ``compare --lrs``)."""
    direction = "higher is better" if group.higher_is_better else "lower is better"
    own_rates = len({lr for r in group.rows for lr in r.learning_rates}) > 1
    header = ["attention", *(["learning rate"] if own_rates else []), f"test {group.metric} ({direction})",
              "Δ vs vanilla", "kept share (vs trivial)", "of attention's gain (vs none)", "params",
              "attention params", f"train {speed_unit(group.task)}/s", "train time", "seeds", "status"]
    cells = []
    for r in group.rows:
        rel = "" if r.rel_metric is None else f"{r.rel_metric * 100:+.1f}%"
        cells.append([
            r.kind, *([" / ".join(f"{lr:g}" for lr in r.learning_rates)] if own_rates else []),
            fmt_metric(r.metric_mean, r.metric_std, group.metric), rel,
            *("" if share is None else share.text() for share in (group.judged(r.kind).kept,
                                                                   group.judged(r.kind).attention_share)),
            fmt_count(r.params_total) + _fmt_ratio(r.rel_params_total),
            fmt_count(r.params_attention) + _fmt_ratio(r.rel_params_attention),
            ("n/a" if r.tokens_per_s is None else f"{r.tokens_per_s:,.0f}") + _fmt_ratio(r.rel_speed),
            ("n/a" if r.train_time_s is None else f"{r.train_time_s:.0f} s") + _fmt_ratio(r.rel_time),
            str(r.n_ok) if r.n_ok == len(r.seeds) else f"{r.n_ok}/{len(r.seeds)}",
            status_text(group, r),
        ])
    return header, cells


def text_table(header: list[str], cells: list[list[str]]) -> str:
    """A fixed-width table for the terminal."""
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(header)]
    line = lambda row: "  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(c) for c in cells)])
