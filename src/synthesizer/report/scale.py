"""The scale study's report: how the gaps between the kinds move with the model's width.

A scale study (comparison/scale.py) is one ordinary comparison per width in ``ROOT/width-W/``; this module
reads their ``results.json`` alone and writes ``ROOT/report.md`` (and .html, and one plot per task). Per
task it shows, at each width:

* each kind's test score;
* each kind's share of what vanilla's attention adds (its gain over ``none``; vanilla = 100%), with the
  claims' 95% interval (``claims.judge_rows``), and the direction of that share from the narrowest to the
  widest width (``trend``): it moves only where the two intervals do not overlap, and a share that clearly
  moves up between two neighbouring widths and down between two others is said to move both ways;
* ``none``'s kept share of vanilla's gain over the trivial predictor: the higher, the less attention has
  to do and the less any check against vanilla can tell;
* on a recall task (a diagnostic corpus), how many seeds of each kind learned it (test accuracy at least
  ``LEARNED_ACCURACY``), and the widths where vanilla itself missed it: a share above 100% there may say
  that vanilla failed rather than that the kind does more than attention;
* where the widths swept learning rates (the ``recall`` preset), each kind's best test score of seed 0 over
  the rates against width, as a table and a plot (Zoology's figure);
* the compute: parameters, tokens, a FLOPs estimate and the wall time;
* the claims' verdicts at each width, as each width's own report gives them, and per claim the shares
  of its kinds on each task it applies to, with their trend: what the claim's check reads, at every width.

Nothing is extrapolated: the text names the widths measured and the budget they share.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..data.generated import DIAGNOSTIC_CORPORA
from . import plots
from ..runs.results import FILENAME, Results, failed
from .analysis import Analysis, analyse
from .claims import CLAIMS, NONE_KIND, verdict_label
from .document import minutes
from .learning import early_stop_target, reached_target
from .render import Block, write_report
from .tables import LEARNED_ACCURACY, Group, Share, fmt_metric, group_key, group_label, status_text
from ..runs.files import LR_PREFIX, TUNED, TUNING_FILE, read_json

WIDTH_PREFIX = "width-"
REPORT_FILE = "report.md"
FLOPS_PER_PARAM_TOKEN = 6  # forward + backward multiply-adds x 2 per parameter and token (attention's n^2 terms left out)


def width_folders(root: str | Path) -> dict[int, Path]:
    """``{W: the folder of width W's comparison}``, by width: ``ROOT/width-W`` where it holds a results.json,
    or ``ROOT/width-W/tuned`` where the width ran the learning-rate protocol (comparison/tuning.py)."""
    found = {}
    for folder in Path(root).glob(f"{WIDTH_PREFIX}*"):
        suffix = folder.name[len(WIDTH_PREFIX):]
        for results in (folder, folder / TUNED):
            if suffix.isdigit() and Results.exists(results):
                found[int(suffix)] = results
                break
    return dict(sorted(found.items()))


def recorded_width(results: Results, folder: Path) -> int:
    """The model width that the runs of a width folder's ``results`` record (their config's ``model.d_model``):
    what the report states, whatever the folder is called. InputError where they record none, or several."""
    widths = {((r.get("config") or {}).get("model") or {}).get("d_model") for r in results.runs if not failed(r)}
    widths.discard(None)
    if len(widths) != 1 or not all(isinstance(w, int) for w in widths):
        found = f"the widths {', '.join(map(str, sorted(widths, key=str)))}" if widths else "no model.d_model"
        raise InputError(f"{folder / FILENAME}: its runs record {found}; a scale study's width folder holds the "
                         "finished runs of one width")
    return widths.pop()


def is_scale_folder(root: str | Path) -> bool:
    """A scale study's folder: width folders, and no results.json of its own."""
    return not Results.exists(root) and bool(width_folders(root))


class Study:
    """The widths' results and their analyses (``analyses[W]``, as width W's own report makes it) and groups:
    ``groups[key][W]`` is task ``key``'s :class:`Group` at width W."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.results: dict[int, Results] = {}
        self.folders: dict[int, Path] = {}  # each width's folder, found by its name; its width is its runs'
        for folder in width_folders(root).values():
            results = Results.load(folder)
            width = recorded_width(results, folder)
            if width in self.folders:
                raise InputError(f"{folder} and {self.folders[width]} both hold runs of width {width} (their records' "
                                 "model.d_model); a scale study has one folder per width")
            self.results[width], self.folders[width] = results, folder
        if not self.results:
            raise InputError(f"{root}: no {WIDTH_PREFIX}W/{FILENAME} folders, so no scale study to report")
        self.results = dict(sorted(self.results.items()))
        self.widths = list(self.results)
        self.analyses: dict[int, Analysis] = {width: analyse(results) for width, results in self.results.items()}
        self.groups: dict[str, dict[int, Group]] = {}
        self.labels: dict[str, str] = {}
        for width, results in self.results.items():
            for group in self.analyses[width].groups:
                self.groups.setdefault(group.key, {})[width] = group
            self.labels.update(results.labels)

    def runs(self, width: int, key: str) -> list[dict]:
        return [r for r in self.results[width].runs_of(key) if not failed(r)]


# How trend() reads a share across widths, as the report states it.
TREND_RULE = ("a share moves only where its intervals at the narrowest and widest width do not overlap; \"moves "
              "both ways\" where it clearly rises between two neighbouring widths and falls between two others")


def _measured(share: Share) -> bool:
    return math.isfinite(share.low) and math.isfinite(share.high)


def trend(points: list[tuple[int, Share]]) -> str:
    """The direction of a share from the narrowest to the widest width it was measured at: "rises" or "falls"
    where the two 95% intervals do not overlap, else "no clear change"; "moves both ways" where it clearly
    rises between two neighbouring widths and clearly falls between two others (the ends alone would hide
    it); with the values at every width."""
    values = ", ".join(f"{share.text()} at {width}" for width, share in points)
    if len(points) < 2:
        return values
    (_, first), (_, last) = points[0], points[-1]
    if not (_measured(first) and _measured(last)):
        return f"{values} (no interval measured, so no direction)"
    steps = [(a, b) for (_, a), (_, b) in zip(points, points[1:]) if _measured(a) and _measured(b)]
    if any(b.low > a.high for a, b in steps) and any(b.high < a.low for a, b in steps):
        return f"moves both ways (clearly up between two widths, clearly down between two others): {values}"
    if last.low > first.high:
        return f"rises: {values}"
    if last.high < first.low:
        return f"falls: {values}"
    return f"no clear change (the intervals overlap): {values}"


def _score_table(by_width: dict[int, Group], widths: list[int]) -> Block:
    kinds = list(dict.fromkeys(row.kind for g in by_width.values() for row in g.rows))
    rows = []
    for kind in kinds:
        cells = []
        for w in widths:
            group = by_width.get(w)
            row = group.row(kind) if group is not None else None
            clean = row is not None and row.ok and not group.judged(kind).flagged
            cells.append("—" if row is None else fmt_metric(row.metric_mean, row.metric_std, group.metric)
                         + ("" if clean else f" ({status_text(group, row)})"))
        rows.append([kind, *cells])
    return ("table", ["kind", *[f"width {w}" for w in widths]], rows)


def _share_points(by_width: dict[int, Group], kind: str, widths: list[int],
                  field: str = "attention_share") -> list[tuple[int, Share | None]]:
    """``(W, kind's share at W)`` for each width, None where it is not measured: its share of vanilla's
    attention gain, or (``field="kept"``) its kept share of vanilla's gain over the trivial predictor."""
    points = []
    for w in widths:
        row = by_width[w].row(kind) if w in by_width else None
        points.append((w, None if row is None else getattr(by_width[w].judged(kind), field)))
    return points


def _share_table(by_width: dict[int, Group], widths: list[int]) -> tuple[Block, list[str]]:
    """The shares of attention's gain per kind and width, none's kept share, and the trend of each kind."""
    kinds = [row.kind for g in by_width.values() for row in g.rows if row.kind not in ("vanilla", NONE_KIND)]
    none = f"`{NONE_KIND}` keeps of vanilla's gain over the trivial predictor"
    lines = [(kind, f"{kind}'s share of what vanilla's attention adds", "attention_share")
             for kind in dict.fromkeys(kinds)] + [(NONE_KIND, none, "kept")]
    rows, readings = [], []
    for kind, label, field in lines:
        shares = _share_points(by_width, kind, widths, field)
        rows.append([none if kind == NONE_KIND else kind, *("—" if s is None else s.text() for _, s in shares)])
        points = [(w, share) for w, share in shares if share is not None]
        if points:
            readings.append(f"{label}: {trend(points)}")
    return ("table", ["kind", *[f"width {w}" for w in widths]], rows), readings


@dataclass(frozen=True)
class BestRate:
    """A kind's best test score of seed 0 over the rates one width swept (best by test, as Zoology reports it)."""

    value: float
    lr: str  # the rate as its folder names it
    chosen: float | None  # the rate the protocol chose by validation loss for every seed


def best_over_rates(study: Study, key: str, widths: list[int]) -> dict[str, dict[int, BestRate]]:
    """``{kind: {width: BestRate}}`` of task ``key``; a width that swept no learning rates has none."""
    best: dict[str, dict[int, BestRate]] = {}
    for w in widths:
        root = study.root / f"{WIDTH_PREFIX}{w}"
        if not (root / TUNING_FILE).is_file():
            continue
        chosen = (read_json(root / TUNING_FILE).get("chosen") or {}).get(key, {})
        scores: dict[str, list[tuple[float, str, int]]] = {}  # kind: (score signed so larger is better, rate, sign)
        for folder in root.glob(f"{LR_PREFIX}*"):
            if not Results.exists(folder):
                continue
            for r in Results.load(folder).runs:
                value = None if failed(r) else r["test_metrics"].get(r["primary_metric"])
                if group_key(r["task"], r["data"]) == key and r.get("seed", 0) == 0 and value is not None:
                    sign = 1 if r["higher_is_better"] else -1
                    scores.setdefault(r["attention"], []).append((sign * value, folder.name[len(LR_PREFIX):], sign))
        for kind, found in scores.items():
            signed, lr, sign = max(found)
            best.setdefault(kind, {})[w] = BestRate(sign * signed, lr, chosen.get(kind))
    return best


def _sweep_table(best: dict[str, dict[int, BestRate]], widths: list[int]) -> Block:
    """Per kind and width: the best test score over the swept rates, its rate, and the rate chosen by validation."""
    return ("table", ["kind", *[f"width {w}" for w in widths]],
            [[kind, *(f"{cells[w].value:.3g} ({cells[w].lr}; chosen {cells[w].chosen!r})" if w in cells else "—"
                      for w in widths)] for kind, cells in best.items()])


def _best_blocks(study: Study, key: str, widths: list[int], first: Group, folder: Path) -> list[Block]:
    """Each kind's best test score of seed 0 over the swept rates against width, as a plot and a table (none
    where no width swept learning rates)."""
    best = best_over_rates(study, key, widths)
    if not best:
        return []
    blocks: list[Block] = [("h3", "Best over learning rates (seed 0)")]
    plot = plots.plot_best_over_rates({kind: {w: b.value for w, b in cells.items()} for kind, cells in best.items()},
                                      first.metric, first.higher_is_better, f"{key}: best over learning rates",
                                      folder / f"best_rate_{key}.png")
    if plot is not None:
        blocks.append(("img", plot.name, f"{key}: each kind's best test {first.metric} of seed 0 over the learning "
                                         "rates against width"))
    return blocks + [("p", f"Each kind's test {first.metric} at the best of the learning rates swept (the rate in "
                           "brackets; best by test, as Zoology reports it), from the sweep's first seed, beside the "
                           "rate the protocol chose by validation loss for every seed (the tables above)."),
                     _sweep_table(best, widths)]


def _learned_table(by_width: dict[int, Group], study: Study, key: str, widths: list[int]) -> Block:
    """Seeds that learned the recall task (test accuracy >= LEARNED_ACCURACY), per kind and width."""
    kinds = list(dict.fromkeys(row.kind for g in by_width.values() for row in g.rows))
    rows = []
    for kind in kinds:
        cells = []
        for w in widths:
            learned, seeds = _learned(study, w, key, kind)
            cells.append(f"{learned}/{seeds}" if seeds else "—")
        rows.append([kind, *cells])
    return ("table", ["kind", *[f"width {w}" for w in widths]], rows)


def _learned(study: Study, width: int, key: str, kind: str) -> tuple[int, int]:
    """(seeds of ``kind`` that learned the recall task ``key`` at ``width``, seeds with a test accuracy)."""
    runs = [r for r in study.runs(width, key) if r["attention"] == kind] if width in study.results else []
    accs = [a for a in ((r.get("test_metrics") or {}).get("accuracy") for r in runs) if a is not None]
    return sum(a >= LEARNED_ACCURACY for a in accs), len(accs)


def _vanilla_missed(study: Study, key: str, widths: list[int]) -> list[str]:
    """The widths (with "k/n seeds") where some seed of vanilla did not learn the recall task ``key``."""
    counts = {w: _learned(study, w, key, "vanilla") for w in widths}
    return [f"{w} ({k}/{n} seeds learned it)" for w, (k, n) in counts.items() if n and k < n]


def _budget(study: Study, key: str, widths: list[int]) -> str:
    """" within N steps" (and its early stop) of task ``key``'s runs, as their configs record it; "" where
    the runs disagree or do not record it."""
    budgets = {(((r.get("config") or {}).get("train") or {}).get("max_steps"), early_stop_target(r))
               for w in widths for r in study.runs(w, key)}
    if len(budgets) != 1:
        return ""
    (steps, target), = budgets
    if not isinstance(steps, int):
        return ""
    return f" within {steps:,} steps" + (f", stopping early at {target}" if target else "")


def _compute_rows(study: Study, key: str, by_width: dict[int, Group]) -> list[list[str]]:
    rows = []
    for w, group in by_width.items():
        runs = [r for r in study.runs(w, key) if r["attention"] == "vanilla"] or study.runs(w, key)
        if not runs:
            continue
        params = runs[0].get("params") or {}
        total = params.get("total")
        embeddings = (params.get("by_component") or {}).get("embeddings", 0)
        tokens = statistics.fmean(r.get("train_tokens_per_s", 0.0) * r.get("train_time_s", 0.0) for r in runs)
        inner = (total - embeddings) if total else None
        flops = FLOPS_PER_PARAM_TOKEN * inner * tokens if inner else None
        times = [r.get("train_time_s") for r in study.runs(w, key) if r.get("train_time_s")]
        rows.append([str(w), f"{total:,}" if total else "?", f"{inner:,}" if inner else "?", f"{tokens / 1e6:.2f}M",
                     f"{flops:.2e}" if flops else "?", minutes(statistics.median(times)) if times else "?",
                     minutes(sum(times)) if times else "?"])
    return rows


def _learning_items(by_width: dict[int, Group]) -> list[str]:
    items = []
    for w, group in by_width.items():
        if group.learning is not None and group.learning.flatness is not None:
            items.append(f"width {w}: {group.learning.flatness.text()}")
    return items


def _task_blocks(study: Study, key: str, folder: Path) -> list[Block]:
    by_width = study.groups[key]
    widths = [w for w in study.widths if w in by_width]
    first = next(iter(by_width.values()))
    blocks: list[Block] = [("h2", f"{group_label(first, study.labels)} — `{key}`")]
    plot = plots.plot_scale(by_width, folder / f"scale_{key}.png")
    if plot is not None:
        blocks.append(("img", plot.name, f"{key}: score, share of attention's gain and `{NONE_KIND}`'s kept share "
                                         "against width (bars: 95% intervals)"))
    blocks += [("h3", f"Test {first.metric} (mean ± std over seeds)"), _score_table(by_width, widths)]
    table, readings = _share_table(by_width, widths)
    blocks += [("h3", f"Share of what vanilla's attention adds (its gain over `{NONE_KIND}`)"),
               ("p", "Per kind: (its score - none's) / (vanilla's - none's), on the log scale for perplexity; the "
                     "bracket is the 95% interval of its paired loss against vanilla. — where vanilla is not clearly "
                     f"better than `{NONE_KIND}` at that width (no gain to share) or the kind was not trained."),
               table]
    if readings:
        blocks += [("p", f"Reading ({TREND_RULE}):"), ("list", readings)]
    recall = first.data in DIAGNOSTIC_CORPORA
    missed = _vanilla_missed(study, key, widths) if recall else []
    if missed:
        blocks.append(("p", "Vanilla did not learn the task in every seed at width" + "s" * (len(missed) > 1) + " "
                            + ", ".join(missed) + _budget(study, key, widths) + ": a "
                            "share there is measured against vanilla's mean accuracy, which counts the seeds that "
                            "missed the lookup, so a share above 100% may say that vanilla failed at that width "
                            "rather than that the kind does more than attention."))
    if recall:
        blocks += [("h3", f"Seeds that learned it (test accuracy at least {LEARNED_ACCURACY:.0%})"),
                   ("p", "Recall is often learned all at once after a long plateau, so a flat validation loss "
                         "does not mean a run has finished learning: a seed that has not learned the task says "
                         "\"not within this budget\", not \"cannot\"."),
                   _learned_table(by_width, study, key, widths)]
    blocks += _best_blocks(study, key, widths, first, folder)
    learning = _learning_items(by_width)
    if learning:
        blocks += [("h3", "Did vanilla flatten?"), ("list", learning)]
    rows = _compute_rows(study, key, by_width)
    if rows:
        blocks += [("h3", "Compute per run"),
                   ("p", f"Vanilla's parameters; tokens trained (mean over its seeds); FLOPs ≈ "
                         f"{FLOPS_PER_PARAM_TOKEN} × parameters without embeddings × tokens (attention's products "
                         "over pairs of positions not counted); wall time of one run (median over every kind and "
                         "seed) and of all the width's runs, as trained here."),
                   ("table", ["width", "parameters", "without embeddings", "tokens", "FLOPs", "one run", "all runs"],
                    rows)]
    return blocks


def _claim_readings(study: Study) -> list[str]:
    """Per claim judged against vanilla, the trend of each of its kinds' shares on each task it applies to:
    the quantity the claim's check reads, at every width."""
    items = []
    for claim in CLAIMS:
        kinds = [rule.kind for rule in claim.quality if rule.reference == "vanilla"]
        for key, by_width in study.groups.items():
            if not any(claim.applies(g) for g in by_width.values()):
                continue
            for kind in kinds:
                points = [(w, share) for w, share in _share_points(by_width, kind, study.widths) if share is not None]
                if points:
                    items.append(f"claim {claim.number}, {kind} on `{key}`: {trend(points)}")
    return items


def _claims_block(study: Study) -> list[Block]:
    columns = {w: {v.number: verdict_label(v) for v in study.analyses[w].verdicts} for w in study.widths}
    rows = [[f"{claim.number}. {claim.claim}", *[columns[w].get(claim.number, "—") for w in study.widths]]
            for claim in CLAIMS]
    blocks: list[Block] = [
        ("h2", "The claims at each width"),
        ("p", "Each width's verdicts, as its own report (width-W/report.md) gives them with their reasons; a claim "
              "becomes decidable at a width where `none` clearly fails the test that the kinds pass."),
        ("table", ["claim", *[f"width {w}" for w in study.widths]], rows)]
    readings = _claim_readings(study)
    if readings:
        blocks += [("p", "What each claim's check reads, at every width: its kinds' shares of what vanilla's "
                         f"attention adds (vanilla = 100%), and their direction ({TREND_RULE}):"),
                   ("list", readings)]
    return blocks


def _header(study: Study) -> list[Block]:
    first = study.results[study.widths[0]]
    # every width's commands, each once: the study's training command, then the command that made each width's folder
    commands = dict.fromkeys(c for w in study.widths for c in study.results[w].commands)
    seeds = sorted({seed for res in study.results.values() for seed in res.seeds})
    stopped_early = any(reached_target(r) for res in study.results.values() for r in res.runs)
    code = sorted({name for res in study.results.values() for name in res.code})
    items = [f"widths (d_model, with d_ff = 4 d_model; heads and layers as each task has them): "
             f"{', '.join(map(str, study.widths))}",
             f"seeds: {', '.join(map(str, seeds)) or 'none'}",
             f"size: {first.size or 'custom'}; every width trains each task with the same data, steps and "
             "tokens (the task's budget at this size)" + (
                 "; a run that reaches the task's early-stopping target stops there" if stopped_early else ""),
             *[f"command: `{c}`" for c in commands],
             f"trained by: {'; '.join(code) or 'code not recorded'}",
             # a task the size leaves out is left out at every width: said once, with its reason
             *[f"left out at this size: `{config}` ({why})" for config, why in
               {c: w for res in study.results.values() for c, w in res.left_out.items()}.items()],
             "each width's own report, with every table, curve and verdict reason: " + ", ".join(
                 f"[width {w}]({study.folders[w].relative_to(study.root).as_posix()}/report.md)" for w in study.widths)]
    return [("h1", f"Synthesizer scale study: {', '.join(first.presets or ['runs'])}"), ("list", items),
            ("p", f"What is measured: the widths listed, each trained for the same number of tokens"
                  f"{' (fewer where a run reached its early-stopping target)' if stopped_early else ''}. Nothing here "
                  f"says what happens beyond the widest width, at other budgets, or at the paper's scale; a trend "
                  "between two widths is a trend between those two widths.")]


def write_scale_report(root: str | Path) -> Path:
    """Write ``ROOT/report.md`` (and report.html, the plots) from the width folders' results.json."""
    study = Study(root)
    folder = Path(root)
    blocks = _header(study)
    for key in study.groups:
        blocks += _task_blocks(study, key, folder)
    blocks += _claims_block(study)
    md, _ = write_report(blocks, folder, "Synthesizer scale study")
    return md
