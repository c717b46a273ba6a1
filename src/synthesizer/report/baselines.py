"""The baselines study's report: what each position scheme changes in vanilla, which learning rate each
kind took, and the claims re-judged against the strongest tuned vanilla.

A baselines study (comparison/baselines.py) keeps, per task, ordinary comparisons in ``ROOT/<task>/``:
``positions-<scheme>/`` (vanilla with each scheme), ``lr-<rate>/`` (the sweep's first seed),
``tuned/`` (every kind at its chosen rate, with the strongest scheme) and ``matched-<kind>/`` (vanilla
widened to a kind's parameter count), beside ``tuning.json`` and ``study.json``. This module reads
those files alone and writes ``ROOT/report.md`` (and .html). Per task:

(a) vanilla's score with each scheme (mean ± std over seeds) and its difference from learned absolute
    positions, the committed comparisons' vanilla, with a 95% t-interval over paired seeds;
(b) dense+vanilla against the strongest tuned vanilla: the difference with its interval, and as a share
    of vanilla's gain over ``none`` (attention's whole contribution);
(c) the claims' verdicts on ``tuned/`` (its report gives the reasons);
(d) the validation loss of every kind at every rate of the sweep, the rate it took, and what that changed
    against the preset's rate (each kind's loss, and the kinds' order);
and each kind with at least 10% more parameters than vanilla against a vanilla of its size, with the claims
judged again with that vanilla in the tuned vanilla's place.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from ..errors import InputError
from ..runs.results import FILENAME, Results, failed, lowest_valid_loss
from .analysis import analyse
from .claims import evaluate_claims, verdict_label
from .groups import build_groups
from .rates import sweep_blocks
from .render import Block, write_report
from .stats import paired_t_interval
from ..runs.files import MATCHED_PREFIX, POSITIONS_PREFIX, STUDY_FILE, TUNED, TUNING_FILE, group_key, read_json

CLAIMS_READ = (1, 2, 4)  # the claims the study re-judges: the pure synthesizers' gap, random's, the mixtures'
REFERENCE_SCHEME = "learned"  # the committed comparisons' vanilla


def strongest(schemes: tuple[str, ...], results: dict[str, Results | None]) -> str:
    """The scheme whose vanilla's seed 0 reached the lowest validation loss (the study's rule, which
    the report states); InputError where none finished."""
    losses = {}
    for scheme in schemes:
        for record in results[scheme].runs if results.get(scheme) else []:
            loss = lowest_valid_loss(record)
            if record.get("seed", 0) == 0 and loss is not None:
                losses[scheme] = loss
    if not losses:
        raise InputError("no position scheme's vanilla run finished with a validation loss: nothing to choose from")
    return min(losses, key=losses.get)


def _results(folder: Path) -> Results | None:
    return Results.load(folder) if Results.exists(folder) else None


def _scores(results: Results | None, kind: str) -> dict[int, float]:
    """{seed: primary test metric} of a kind's finished runs."""
    if results is None:
        return {}
    out = {}
    for r in results.runs:
        if r["attention"] == kind and not failed(r):
            value = r["test_metrics"].get(r["primary_metric"])
            if value is not None:
                out[int(r.get("seed", 0))] = float(value)
    return out


def _metric(results: Results | None) -> tuple[str, bool]:
    for r in results.runs if results else []:
        if not failed(r):
            return r["primary_metric"], r["higher_is_better"]
    return "score", True


def _preset_rate(results: Results | None) -> float | None:
    """The learning rate the position schemes' vanilla trained at (the preset's, every kind's before the
    sweep), or None where no run of theirs records one."""
    for r in results.runs if results else []:
        rate = ((r.get("config") or {}).get("train") or {}).get("lr")
        if rate is not None:
            return float(rate)
    return None


def _mean_std(values: list[float]) -> str:
    if not values:
        return "—"
    mean = statistics.fmean(values)
    return f"{mean:.4g} ± {statistics.stdev(values):.2g}" if len(values) > 1 else f"{mean:.4g}"


def _difference(a: dict[int, float], b: dict[int, float]) -> str:
    """``mean(a - b)`` over the seeds both have, with its 95% t-interval (n/a with fewer than 2)."""
    seeds = sorted(set(a) & set(b))
    if len(seeds) < 2:
        return "n/a (fewer than 2 paired seeds)" if seeds else "—"
    iv = paired_t_interval([a[s] for s in seeds], [b[s] for s in seeds])
    return f"{iv.estimate:+.3g} [{iv.low:+.3g}, {iv.high:+.3g}]"


def _scheme_blocks(schemes: dict[str, dict | None], strongest: str | None, metric: str, better: str) -> list[Block]:
    """(a): vanilla's score with each scheme and its difference from learned absolute positions and from
    the strongest scheme (chosen on seed 0 alone, so the other seeds may favour another one)."""
    reference = _scores(schemes.get(REFERENCE_SCHEME), "vanilla")
    chosen = _scores(schemes.get(strongest), "vanilla") if strongest else {}
    rows = []
    for scheme, results in schemes.items():
        scores = _scores(results, "vanilla")
        rows.append([scheme + (" (the strongest)" if scheme == strongest else ""), str(len(scores)),
                     _mean_std(list(scores.values())),
                     "—" if scheme == REFERENCE_SCHEME else _difference(scores, reference),
                     "—" if scheme == strongest or not chosen else _difference(scores, chosen)])
    return [("h3", "(a) Vanilla with each position scheme"),
            ("p", f"Test {metric} ({better} is better), mean ± std over seeds, at the preset's learning rate; each "
                  f"difference (from learned absolute positions, the committed comparisons' vanilla, and from the "
                  "strongest scheme) is the mean over paired seeds with its 95% t-interval. The strongest scheme "
                  "was chosen by seed 0's validation loss: a scheme whose interval against it lies wholly on the "
                  "better side beat it over the seeds, though the choice did not see them."),
            ("table", ["positions", "seeds", metric, f"difference from {REFERENCE_SCHEME}",
                       "difference from the strongest"], rows)]


def _labels(verdicts: list) -> dict[int, str]:
    return {v.number: verdict_label(v) for v in verdicts}


def _verdicts(runs: list[dict]) -> dict[int, str]:
    """The claims' verdicts on these runs judged together, without the speed checks (no timings)."""
    return _labels(evaluate_claims(build_groups(runs)))


def _tuned_blocks(tuned: Results, metric: str, better: str, before: list[Results], report: str) -> list[Block]:
    """(b) dense+vanilla against the strongest tuned vanilla, and (c) the claims on the tuned comparison (its
    report at ``report``, relative to the study's), beside their verdicts on ``before`` (the comparisons the
    study re-judges, where given)."""
    vanilla, dense_vanilla, none = (_scores(tuned, k) for k in ("vanilla", "dense+vanilla", "none"))
    items = [f"dense+vanilla minus vanilla, test {metric}: {_difference(dense_vanilla, vanilla)}"]
    if vanilla and none and dense_vanilla:
        gain = statistics.fmean(none.values()) - statistics.fmean(vanilla.values())
        if gain:
            lead = statistics.fmean(vanilla.values()) - statistics.fmean(dense_vanilla.values())
            items.append(f"vanilla's gain over `none` (what its attention adds): {abs(gain):.4g}; dense+vanilla's "
                         f"lead over vanilla is {100 * lead / gain:+.0f}% of it ({better} {metric} is better)")
    after = _labels(analyse(tuned).verdicts)
    keys = {group_key(r["task"], r["data"]) for r in tuned.runs}
    blocks = [("h3", "(b) dense+vanilla against the strongest vanilla"), ("list", items),
              ("h3", "(c) The claims against the strongest tuned vanilla"),
              ("p", f"Verdicts of [the tuned comparison's report]({report}), which gives each one's reasons.")]
    if not before:
        return blocks + [("table", ["claim", "verdict"], [[str(n), after.get(n, "—")] for n in CLAIMS_READ])]
    # the same tasks' runs of several comparisons, judged together: not one results file's analysis
    earlier = _verdicts([r for results in before for r in results.runs if group_key(r["task"], r["data"]) in keys])
    return blocks + [("p", "Before: the same task in the comparison the study re-judges (learned absolute positions, "
                           "every kind at vanilla's rate; its speed checks are left out here)."),
                     ("table", ["claim", "before", "against the strongest tuned vanilla"],
                      [[str(n), earlier.get(n, "—"), after.get(n, "—")] for n in CLAIMS_READ])]


def _with_vanilla(tuned: Results, wide: Results | None) -> dict[int, str]:
    """The verdicts on the tuned runs with ``wide``'s vanilla runs in place of the tuned vanilla's (the speed
    checks left out, as in the "before" column)."""
    runs = [r for r in tuned.runs if r["attention"] != "vanilla"]
    runs += [r for r in (wide.runs if wide is not None else []) if r["attention"] == "vanilla"]
    return _verdicts(runs)


def _matched_blocks(folder: Path, tuned: Results, matched_d_ff: dict, metric: str) -> list[Block]:
    """Each kind with at least 10% more parameters than vanilla against a vanilla of its size, and the claims
    judged with that vanilla in the tuned vanilla's place."""
    rows, verdicts = [], {}
    for path in sorted(folder.glob(f"{MATCHED_PREFIX}*")):
        kind = path.name[len(MATCHED_PREFIX):]
        wide_results = _results(path)
        wide, theirs = _scores(wide_results, "vanilla"), _scores(tuned, kind)
        rows.append([kind, str(matched_d_ff.get(kind, "?")), _mean_std(list(wide.values())),
                     _mean_std(list(theirs.values())), _difference(theirs, wide)])
        if wide:
            verdicts[kind] = _with_vanilla(tuned, wide_results)
    if not rows:
        return []
    blocks: list[Block] = [
        ("h3", "Against a vanilla of the same size"),
        ("p", "Vanilla widened in d_ff to the parameter count of each kind that has at least 10% more "
              "than vanilla, at vanilla's chosen rate."),
        ("table", ["kind", "vanilla's d_ff", f"wide vanilla {metric}", f"kind {metric}",
                   "kind minus wide vanilla"], rows)]
    if verdicts:
        after = _verdicts(tuned.runs)
        blocks += [("p", "The claims judged again with each widened vanilla in the tuned vanilla's place (the "
                         "same rules; speed checks left out):"),
                   ("table", ["claim", "against the tuned vanilla",
                              *[f"against vanilla of {kind}'s size" for kind in verdicts]],
                    [[str(n), after.get(n, "—"), *[v.get(n, "—") for v in verdicts.values()]]
                     for n in CLAIMS_READ])]
    return blocks


def _task_blocks(folder: Path, before: list[Results]) -> list[Block]:
    study = read_json(folder / STUDY_FILE) if (folder / STUDY_FILE).is_file() else {}
    tuning = read_json(folder / TUNING_FILE) if (folder / TUNING_FILE).is_file() else {}
    found = {p.name[len(POSITIONS_PREFIX):]: _results(p) for p in folder.glob(f"{POSITIONS_PREFIX}*")}
    order = study.get("positions") or sorted(found)  # the study's order, once it has recorded it
    schemes = {s: found[s] for s in sorted(found, key=lambda s: order.index(s) if s in order else len(order))}
    tuned = _results(folder / TUNED)
    metric, higher = _metric(tuned or next((r for r in schemes.values() if r), None))
    better = "higher" if higher else "lower"
    blocks: list[Block] = [("h2", f"`{folder.name}`")]
    if "matched_d_ff" not in study:  # written once the task's last stage is done
        blocks.append(("p", "**In progress:** this task's study has not finished its stages; what is below is what "
                            "has finished. The same command resumes it from these folders' results.json."))
    try:  # the study's choice, or (before it is recorded) the same rule on the runs so far
        best = study.get("strongest") or strongest(tuple(schemes), schemes)
    except ValueError:
        best = None
    blocks += _scheme_blocks(schemes, best, metric, better)
    blocks += sweep_blocks(tuning, ("h3", "(d) Learning rates"),  # one task per folder: one plot
                           lambda key: folder.parent / f"rates_{folder.name}.png",
                           _preset_rate(schemes.get(best)))
    if tuned is not None:
        blocks += _tuned_blocks(tuned, metric, better, before, f"{folder.name}/{TUNED}/report.md")
        blocks += _matched_blocks(folder, tuned, study.get("matched_d_ff") or {}, metric)
    return blocks


def task_folders(root: Path) -> list[Path]:
    """The study's task folders: those holding a ``positions-*`` comparison or a study.json."""
    return sorted(p for p in root.iterdir() if p.is_dir() and ((p / STUDY_FILE).is_file()
                                                                or any(p.glob(f"{POSITIONS_PREFIX}*/{FILENAME}"))))


def write_baselines_report(root: str | Path, against: list[str | Path] = ()) -> Path:
    """Write ``ROOT/report.md`` (and report.html) from the study's folders; ``against``: comparison folders
    (the committed ones the study re-judges) whose verdicts on the same tasks stand beside the new ones."""
    root = Path(root)
    before = [Results.load(Path(folder) / FILENAME) for folder in against]
    folders = task_folders(root)
    if not folders:
        raise InputError(f"{root}: no task folder with {POSITIONS_PREFIX}*/{FILENAME}, so no baselines study to report")
    parts = [Results.load(sub) for f in folders for sub in sorted(f.iterdir()) if Results.exists(sub)]
    code = sorted({name for results in parts for name in results.code})
    commands = dict.fromkeys(c for results in parts for c in results.commands)
    blocks: list[Block] = [
        ("h1", "Synthesizer baselines study: the strongest vanilla, every kind at its best learning rate"),
        ("list", [f"tasks: {', '.join(f.name for f in folders)}", *[f"command: `{c}`" for c in commands],
                  f"trained by: {'; '.join(code) or 'code not recorded'}",
                  "every choice (the position scheme, each kind's learning rate) by the lowest validation loss of "
                  "seed 0; no test number chooses anything"])]
    for folder in folders:
        blocks += _task_blocks(folder, before)
    md, _ = write_report(blocks, root, "Synthesizer baselines study")
    return md
