"""What a comparison prints at its end (the tables, the learning facts, the claims' verdicts), and
``synthesizer compare --render``: a report written from results.json files alone, nothing trained."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..errors import check_out_dir
from ..runs.results import Results
from .analysis import Analysis, analyse
from .claims import attention_note, verdict_label, verdict_reason
from .document import build_report
from .lead import LEAD_FIGURE, LEAD_TABLE, lead_text
from .tables import group_label, table_rows, text_table


def print_tables(results: Results, log: Callable[[str], None] = print, analysis: Analysis | None = None) -> None:
    """Every group's table (pretraining first), whether vanilla learned, and the claims' verdicts: those of
    ``analysis`` (the report's; :func:`analyse` of ``results`` where not given)."""
    analysis = analysis or analyse(results)
    for group in analysis.pretraining + analysis.groups:
        log("")
        log(f"{group_label(group, results.labels)} [{group.key}]")
        log(text_table(*table_rows(group)))
    log("")
    for group in analysis.pretraining + analysis.groups:  # did vanilla learn: the facts the verdicts below rest on
        if group.learning is not None:
            log(group.learning.summary())
    for gate in analysis.notes:  # what the verdicts rest on: does attention matter on each task
        log(f"attention: {gate.key}: {attention_note(gate)}")
    for v in analysis.verdicts:
        log(f"claim {v.number}: {verdict_label(v)}: {verdict_reason(v)}")


def log_lead(results: Results, analysis: Analysis, out: Path, log: Callable[[str], None]) -> None:
    """The reading of a preset with a lead (the demo), then where its picture and table are: the last lines."""
    if results.lead is None:
        return
    log("")
    log(lead_text(results, analysis.groups))
    for path, what in ((out / LEAD_FIGURE, "learned attention"), (out / LEAD_TABLE, "table (markdown)")):
        if path.exists():
            log(f"{what}: {path}")
    log(f"more pictures (curves, every kind's attention): {out}/*.png")


def write_and_print(results: Results, out: Path, log: Callable[[str], None], raw: Path | None = None) -> None:
    """Write the report of ``results`` into ``out`` and print its summary; ``raw``: the results.json to name.
    The results are analysed once: the report and the summary read the same groups and verdicts."""
    analysis = analyse(results)
    md, page = build_report(results, out, analysis)
    print_tables(results, log, analysis)
    log(f"report: {md} and {page}" + (f"; raw numbers: {raw}" if raw is not None else ""))
    log_lead(results, analysis, out, log)


def render(folders: list[str], out: str | Path | None = None, log: Callable[[str], None] = print, command: str = "",
           rendered_by: dict | None = None) -> Results:
    """Merge the results.json of ``folders`` and write the report into ``out`` (default: the first folder);
    ``rendered_by``: the code rendering it (runs.code.code_provenance), named in the header. The command holds
    the lock of ``out`` around it (comparison/main.py)."""
    target = Path(out) if out else Results.folder_of(folders[0])
    check_out_dir("--out", target)
    results = Results.merge([Results.load(f) for f in folders])
    if rendered_by:
        results.set_rendered_by(rendered_by)
    results.add_command(command)
    write_and_print(results, target, log)
    return results
