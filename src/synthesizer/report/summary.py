"""What a comparison prints at its end (the tables, the learning facts, the claims' verdicts), and
``synthesizer compare --render``: a report written from results.json files alone, nothing trained."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..errors import check_out_dir
from .claims import attention_note, attention_notes, evaluate_claims, verdict_label, verdict_reason
from .document import build_report
from .groups import build_groups
from .lead import LEAD_FIGURE, LEAD_TABLE, lead_preset, lead_text
from .results import load_results, merge_results, results_folder
from .tables import group_label, table_rows, text_table


def print_tables(results: dict, log: Callable[[str], None] = print) -> None:
    """Every group's table (pretraining first), whether vanilla learned, and the claims' verdicts."""
    pretraining = build_groups(results.get("pretraining") or [])
    groups = build_groups(results["runs"], results.get("timings"))
    for group in pretraining + groups:
        log("")
        log(f"{group_label(group, results['labels'])} [{group.key}]")
        log(text_table(*table_rows(group)))
    log("")
    for group in pretraining + groups:  # did vanilla learn: the facts the verdicts below rest on
        if group.learning is not None:
            log(group.learning.summary())
    for gate in attention_notes(groups):  # what the verdicts rest on: does attention matter on each task
        log(f"attention: {gate.key}: {attention_note(gate)}")
    for v in evaluate_claims(groups):
        log(f"claim {v.number}: {verdict_label(v)}: {verdict_reason(v)}")


def log_lead(results: dict, out: Path, log: Callable[[str], None]) -> None:
    """The reading of a preset with a lead (the demo), then where its picture and table are: the last lines."""
    if lead_preset(results) is None:
        return
    log("")
    log(lead_text(results, build_groups(results["runs"])))
    for path, what in ((out / LEAD_FIGURE, "learned attention"), (out / LEAD_TABLE, "table (markdown)")):
        if path.exists():
            log(f"{what}: {path}")
    log(f"more pictures (curves, every kind's attention): {out}/*.png")


def write_and_print(results: dict, out: Path, log: Callable[[str], None], raw: Path | None = None) -> None:
    """Write the report of ``results`` into ``out`` and print its summary; ``raw``: the results.json to name."""
    md, page = build_report(results, out)
    print_tables(results, log)
    log(f"report: {md} and {page}" + (f"; raw numbers: {raw}" if raw is not None else ""))
    log_lead(results, out, log)


def render(folders: list[str], out: str | Path | None = None, log: Callable[[str], None] = print, command: str = "",
           rendered_by: dict | None = None) -> dict:
    """Merge the results.json of ``folders`` and write the report into ``out`` (default: the first folder);
    ``rendered_by``: the code rendering it (runs.code.code_provenance), named in the header. The command holds
    the lock of ``out`` around it (comparison/main.py)."""
    target = Path(out) if out else results_folder(folders[0])
    check_out_dir("--out", target)
    results = merge_results([load_results(f) for f in folders])
    if rendered_by:
        results["rendered_by"] = rendered_by
    if command and command not in results["commands"]:
        results["commands"].append(command)
    write_and_print(results, target, log)
    return results
