"""Assemble the comparison report from a results dict: tables, claims, plots, then markdown + HTML."""

from __future__ import annotations

import json
import re
from pathlib import Path

from . import plots
from .lead import lead_blocks
from .analysis import Analysis, analyse
from .claims import (MIN_SEEDS, NO_ATTENTION_USE, NONE_KIND, SPEED_TOLERANCE, USE_NOT_MEASURED, Gate, Verdict,
                     attention_note, check_text, verdict_label)
from .render import Block, write_report
from ..runs.results import Results, data_fingerprint, describe_code
from .hybrid import hybrid_blocks
from .rates import sweep_blocks
from .tables import Group, group_key, group_label, table_rows

def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text.replace("+", "-plus-")).strip("-")


def minutes(seconds: float) -> str:
    """"12.5 min", or "40 s" under a minute."""
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


HASH_CHARS = 12  # of a sha256 shown in the header; results.json holds the whole hash


def provenance_items(results: Results) -> list[str]:
    """The header's lines on what made the numbers: the code every run was trained with (version, commit,
    "modified"; "not recorded" before runs recorded it), the code rendering the report, and per task the
    data's origin, its split hashes and the tokenizer's hash (docs/reproduce.md checks a copy against them)."""
    runs = results.provenance
    trained: dict[str, int] = {}
    for r in runs:
        code = r["provenance"].get("code")
        name = f"synthesizer {describe_code(code)}" if code else "code not recorded (runs record it from 0.3.0.dev0 on)"
        trained[name] = trained.get(name, 0) + 1
    items = []
    if trained:
        items.append("trained by: " + "; ".join(f"{name} ({n} runs)" for name, n in trained.items()))
    if results.rendered_by:  # set by whoever renders (the comparison), which may run git; the report does not
        items.append(f"rendered by: {describe_code(results.rendered_by)}")
    seen = set()
    for r in runs:
        key = group_key(r["task"], r["data"])
        fingerprint = data_fingerprint(r)
        if key in seen or fingerprint is None:
            continue
        seen.add(key)
        data = r["provenance"]["data"]
        splits = ", ".join(f"{split} {v.get('examples', '?')} examples sha256 {str(v.get('sha256'))[:HASH_CHARS]}"
                           for split, v in data.get("splits", {}).items())
        tokenizer = fingerprint[1]
        items.append(f"data `{key}`: {data.get('origin', 'origin not recorded')}; {splits}"
                     f"{f'; tokenizer sha256 {tokenizer[:HASH_CHARS]}' if tokenizer else ''}")
    return items


def _side_by_side(results: Results) -> str:
    """What of the wall time a study spent training this comparison's runs beside other comparisons' runs."""
    if not results.side_by_side_s:
        return ""
    return (f"; {minutes(results.side_by_side_s)} of it is this comparison's share of the time its runs trained "
            "beside other comparisons' runs, in proportion to their training time")


def _header(results: Results) -> list[Block]:
    presets = ", ".join(results.presets or ["(runs given)"])
    m = results.machine
    machine = f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, torch {m.get('torch', '?')} ({m.get('torch_threads', '?')} threads)"
    if m.get("gpu"):
        machine += f", GPU {m['gpu']}"
    if (m.get("parallel_runs") or 1) > 1:
        machine += f"; {m['parallel_runs']} runs trained at a time"
    seeds = results.seeds
    blocks: list[Block] = [("h1", f"Synthesizer comparison: {presets} ({results.size or 'custom'} size)")]
    items = [f"command: `{c}`" for c in results.commands]
    items += [f"machine: {machine}",
              f"wall time: {minutes(results.wall_time_s)} in all (every invocation of the command, "
              "including data loading, tokenizer training and evaluation" + _side_by_side(results) + ")",
              f"seeds: {', '.join(map(str, seeds)) or 'none'}"]
    loads = results.load_averages
    if loads:
        items.append(f"machine load (1-minute load average at the end of each run): {min(loads):.1f} to "
                     f"{max(loads):.1f} on {m.get('cores', '?')} cores; speeds of runs made under different loads "
                     "are not comparable")
    if (m.get("parallel_runs") or 1) > 1:
        items.append(f"speeds: runs trained {m['parallel_runs']} at a time, so a run's speed also depends on the run "
                     "beside it; `synthesizer bench model` times the variants one at a time")
    items += provenance_items(results)
    for config, why in results.left_out.items():
        items.append(f"left out at this size: `{config}` ({why})")
    if results.sessions:
        items.append(f"finished: {results.sessions[-1].get('finished', '?')}")
    blocks.append(("list", items))
    blocks.append(("p", "Every variant of a task trains with the same data, tokenizer, model size, step budget and "
                        "seeds; only the attention differs. Test metrics come from the checkpoint with the best "
                        "validation score. Numbers are mean ± sample std over seeds (no ± with one seed); ×r is the "
                        "ratio to vanilla; Δ is the metric's relative difference to vanilla. Status: **ok**; "
                        "**at chance** (no better than the trivial predictor named under the table); **diverged** "
                        "(NaN/inf training loss; its metric is left out); **failed** (the run raised an error, "
                        f"listed below the table); **{NO_ATTENTION_USE}** (where `{NONE_KIND}` was trained: the 95% "
                        f"interval of its loss against no mixing between tokens, given in brackets, does not exclude "
                        f"that it gains nothing; **{USE_NOT_MEASURED}** where one seed without "
                        "per-example scores gives no interval to tell). Train speed: the median over logging windows of the units trained per "
                        "second (tokens for lm, target tokens for seq2seq, examples for classification), so evaluation "
                        "pauses do not count; train time includes them. Timings were measured on a shared machine: "
                        "expect noise."))
    return blocks


def shared_setup(configs: list[dict]) -> tuple[dict, list[str]]:
    """The config every run shares (by section: a field is shown where all runs agree on it), without the
    seed and the attention kind; and the ``section.field`` names that differ between runs (a learning rate
    per kind, where each kind trained at its own)."""
    shown: dict = {}
    differs: list[str] = []
    for section in dict.fromkeys(k for c in configs for k in c):
        if section in ("seed", "init_from"):  # init_from: where each run's pretraining folder was
            continue
        values = [c.get(section) for c in configs]
        if all(isinstance(v, dict) for v in values):
            fields = {}
            for name in dict.fromkeys(f for v in values for f in v):
                if section == "model" and name == "attention":
                    continue
                seen = {json.dumps(v.get(name), sort_keys=True) for v in values}
                if len(seen) == 1:
                    fields[name] = values[0].get(name)
                else:
                    differs.append(f"{section}.{name}")
            shown[section] = fields
        elif len({json.dumps(v, sort_keys=True) for v in values}) == 1:
            shown[section] = values[0]
        else:
            differs.append(section)
    return shown, differs


def _group_blocks(group: Group, runs: list[dict], maps: dict, label: str, folder: Path) -> list[Block]:
    blocks: list[Block] = [("h2", f"{label} — `{group.key}`")]
    shown, differs = shared_setup([r["config"] for r in runs if r.get("config")])
    if shown:
        named = [f"`{name}`" + (" (the table's learning-rate column)" if name == "train.lr" else "") for name in differs]
        apart = f" Set per variant: {', '.join(named)}." if differs else ""
        blocks.append(("p", "Setup shared by every variant: "
                            + "; ".join(f"{k} `{json.dumps(v, sort_keys=True)}`" for k, v in shown.items() if v)
                            + "." + apart))
    header, rows = table_rows(group)
    blocks.append(("table", header, rows))
    if group.learning is not None:
        blocks.append(("p", group.learning.text()))
    notes = []
    if group.chance:
        notes.append(f"At chance means: {group.chance['why']}.")
    baselines = next((r["baselines"] for r in runs if r.get("baselines")), {})
    if baselines:
        notes.append("Trivial predictors on the same test data: "
                     + ", ".join(f"{k} {v:.4g}" for k, v in baselines.items()) + ".")
    if any(group.judged(r.kind).ignores_attention for r in group.rows):
        notes.append(f"**{NO_ATTENTION_USE}**: the variant may gain nothing over `{NONE_KIND}` (each position "
                     "keeps its own value, no mixing between tokens): the 95% interval of its loss against "
                     f"`{NONE_KIND}` (in its status), measured as in the claims below, does not lie wholly on the "
                     "better side.")
    steps = sorted({r.steps for r in group.rows if r.steps is not None})
    if steps:
        notes.append(f"Training steps: {', '.join(map(str, steps))}.")
    if notes:
        blocks.append(("p", " ".join(notes)))
    others = sorted({m for r in group.rows for m in r.other_metrics})
    if others:
        cells = [[r.kind] + ["n/a" if r.other_metrics.get(m) is None else f"{r.other_metrics[m]:.4g}" for m in others]
                 for r in group.rows]
        blocks += [("p", "Other test metrics (mean over seeds):"), ("table", ["attention", *others], cells)]
    errors = [f"{r.kind}: {e}" for r in group.rows for e in r.errors]
    if errors:
        blocks += [("p", "**Failed runs:**"), ("list", errors)]

    figures = [(plots.plot_curves(group, runs, folder / f"{slug(group.key)}-curves.png"),
                f"Validation curves of every variant: the mean over seeds as a line, the {plots.CURVE_BAND} "
                "(one seed: the run itself)."),
               (plots.plot_metric_vs_speed(group, folder / f"{slug(group.key)}-speed.png"),
                "Test metric against training speed (error bars: std over seeds)."),
               (plots.plot_mixture_weights(group, runs, folder / f"{slug(group.key)}-mixtures.png"),
                "Mixture weights softmax(α) during training (first seed; per-head weights averaged). A weight "
                "scales its component's logits before the one softmax, so it is not that component's share of "
                "the attention: a component with a small weight can still dominate it where its logits are large.")]
    for kind in [r.kind for r in group.rows if r.kind in maps]:
        path = plots.plot_attention(maps[kind], f"{group.key}: {kind}", folder / f"{slug(group.key)}-attention-{slug(kind)}.png")
        figures.append((path, f"Attention of `{kind}` per layer and head (query position down, key position "
                              "across; encoder-decoder models: the self-attention of each stack), best checkpoint "
                              "of seed 0."))
    blocks += [("img", path.name, caption) for path, caption in figures if path is not None]
    return blocks


def _claim_blocks(verdicts: list[Verdict], notes: list[Gate] = ()) -> list[Block]:
    """The claims section: ``notes`` (:func:`claims.attention_notes`: where attention matters) first, then the
    rules, the verdicts' table and every check."""
    blocks: list[Block] = [
        ("h2", "The paper's claims"),
        ("p", "Each claim of the paper is checked by an explicit rule over the tables above. Quality is compared "
              "as the **kept share**: the part of vanilla's gain over the trivial predictor (unigram model, majority "
              "class, copying the source) that a variant keeps, on the log scale for perplexity; a loss of 0.1 is "
              "a tenth of vanilla's gain, whatever the model size. Its uncertainty is measured: a 95% t-interval "
              f"of the paired per-seed losses with {MIN_SEEDS} or more seeds, and a paired bootstrap over test "
              "examples where per-example scores are recorded; with neither, nothing is measured. The thresholds "
              "are the paper's own gaps on the same scale (docs/paper_numbers.md of the project). **supports**: the "
              "whole interval satisfies the rule, on a task where `none` (no attention) clearly fails the same test; "
              "**contradicts**: the whole interval violates it; **cannot tell**: the interval straddles the "
              "threshold, nothing was measured, vanilla does not clearly beat the trivial predictor, or `none` "
              "passes (or may pass) the test too, so passing it says nothing about attention; **not run**: the run "
              "lacks a kind the check needs; **does not apply**: the run has no task of the family the claim is "
              "about, or (parameters) the factorization cannot save any at the task's length. A check on a task whose vanilla "
              "is still learning, or does not clearly beat its trivial predictor by what the task asks (\"Did vanilla "
              "learn?\" under each table), keeps its verdict but says **provisional** first. Speeds use a "
              f"timing of the kinds one at a time in one process at the task's shapes (`synthesizer compare --time`), "
              f"with a {SPEED_TOLERANCE:.0%} tolerance (or half the interquartile range of the paired ratios if "
              "larger); the speeds of runs trained side by side are information only. These are small CPU models "
              "trained for minutes: a verdict is about this run, not about the paper's full-size setting. The "
              "diagnostics (diag-*) are not judged: they probe content-based lookup, which no claim is about."),
        ("p", f"**Where attention matters.** A claim is about what attention contributes, so it is judged only on a "
              f"task where vanilla is clearly better than `{NONE_KIND}` (no mixing between tokens; the rule of the "
              f"**{NO_ATTENTION_USE}** flag): elsewhere every check **cannot tell**. Without `{NONE_KIND}` this is not "
              "checked: no check supports (whether no attention passes too is unknown) and the others are "
              "**provisional**. Beside the kept share, each check gives a kind's share "
              f"of vanilla's gain over `{NONE_KIND}` (\"keeps 91% [85%, 97%] of what vanilla's attention adds\"); the "
              "thresholds stay on the kept-share scale. Where an interval straddles its threshold, the check says "
              "about how many seeds would decide it if the mean and spread held."),
    ]
    if notes:
        blocks.append(("list", [f"**{gate.key}**: {attention_note(gate)}" for gate in notes]))
    blocks.append(("table", ["claim", "verdict"],
                   [[f"{v.number}. {v.claim}", verdict_label(v, bold=True)]
                    for v in verdicts]))
    for v in verdicts:
        blocks += [("h3", f"Claim {v.number}: {v.verdict}"), ("p", v.claim), ("p", f"Rule: {v.rule}"),
                   ("list", [f"{c.verdict}: {check_text(c)}" for c in v.checks])]
        if v.readings:
            blocks += [("p", "Reading on the tasks the claim is not about (information, no verdict):"),
                       ("list", [f"{c.verdict}: {check_text(c)}" for c in v.readings])]
    return blocks


def build_report(results: Results, folder: str | Path, analysis: Analysis | None = None) -> tuple[Path, Path]:
    """Draw the plots and write report.md, report.html and results.json into ``folder``; ``analysis``: the
    results' :func:`analyse` (made here where not given)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    analysis = analysis or analyse(results)
    groups = analysis.groups
    blocks = _header(results) + lead_blocks(results, groups, folder, minutes)  # empty unless the preset has a lead
    pretraining = results.pretraining
    for group in analysis.pretraining:  # a pretrained preset's first step
        runs = [r for r in pretraining if group_key(r["task"], r["data"]) == group.key]
        group_blocks = _group_blocks(group, runs, {}, group_label(group, results.labels), folder)
        group_blocks.insert(1, ("p", "Every kind and seed was pretrained once with this objective; each task below "
                                     "fine-tunes the encoder of the run of its own kind and seed. The test loss is "
                                     "per target token on the corpora's test splits. No claim is judged on it."))
        blocks += group_blocks
    for group in groups:
        blocks += _group_blocks(group, results.runs_of(group.key), results.attention.get(group.key, {}),
                                group_label(group, results.labels), folder)
    blocks += sweep_blocks(results.tuning, ("h2", "Learning rates: the sweep on seed 0"),  # [] without a sweep
                           lambda key: folder / f"rates_{slug(key)}.png")
    blocks += hybrid_blocks(groups, results.runs, results.labels)  # [] without a kind per layer
    blocks += _claim_blocks(analysis.verdicts, analysis.notes)
    blocks += [("h2", "Raw data"),
               ("p", "`results.json` holds every run's raw record (config, test and validation metrics, curves, "
                     "mixture weights, parameters, timings) and the attention maps drawn above. Re-render or merge "
                     "reports with `synthesizer compare --render DIR [DIR ...] --out NEW_DIR`.")]
    results.save(folder)
    title = f"Synthesizer comparison: {', '.join(results.presets or ['runs'])}"
    return write_report(blocks, folder, title)
