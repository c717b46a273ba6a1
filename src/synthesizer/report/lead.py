"""The opening of a report whose preset names a ``lead`` (the demo): the learned attention of chosen
(task, kind) pairs side by side in one picture, a reading of it from the measured table, and the same
table as a markdown file of its own (``LEAD_TABLE``) for the documentation to show.

The reading only states what the table measured: a kind "learned" a task when it is clearly better than
``none`` (not flagged by the attention-use check), not at chance, and within ``LEARNED_SHARE`` of vanilla's
score; otherwise it "did not". The picture shows what the kinds learned, the reading says how well.
"""

from __future__ import annotations

from pathlib import Path

from ..runs.results import Results
from . import plots
from .claims import NONE_KIND
from .render import Block
from .tables import Group, group_label, table_rows

LEAD_FIGURE = "demo-attention.png"
LEAD_TABLE = "demo-table.md"
LEARNED_SHARE = 0.9  # of vanilla's score (higher-is-better metrics): "learned" needs at least this much


def learned(group: Group, kind: str) -> bool | None:
    """Whether ``kind`` learned the task of ``group`` (see the module docstring); None if it has no score."""
    row, ref = group.row(kind), group.row("vanilla")
    if row is None or row.metric_mean is None:
        return None
    if kind == NONE_KIND:
        return not row.at_chance and ref is not None and ref.metric_mean is not None \
            and row.metric_mean >= LEARNED_SHARE * ref.metric_mean
    if group.judged(kind).ignores_attention or row.at_chance:
        return False
    if ref is None or ref.metric_mean is None or not group.higher_is_better:
        return True
    return row.metric_mean >= LEARNED_SHARE * ref.metric_mean


def reading(groups: list[Group], labels: dict[str, str]) -> list[str]:
    """One line per task: which kinds learned it and which did not, with their scores."""
    lines = []
    for group in groups:
        score = lambda kind: f"{kind} {group.row(kind).metric_mean:.2f}"  # noqa: E731
        yes = [score(r.kind) for r in group.rows if learned(group, r.kind)]
        no = [score(r.kind) for r in group.rows if learned(group, r.kind) is False]
        lines.append(f"**{group_label(group, labels)}** ({group.metric}): learned by {', '.join(yes) or 'no kind'}; "
                     f"not by {', '.join(no) or 'any other'}.")
    return lines


def lead_blocks(results: Results, groups: list[Group], folder: Path, minutes) -> list[Block]:
    """The report's opening section (empty unless a preset of ``results`` names a lead); writes the picture
    ``LEAD_FIGURE`` and the table ``LEAD_TABLE`` into ``folder``. ``minutes``: the wall-time formatter."""
    lead = results.lead  # its (corpus, kind, what it shows) pairs, which the comparison copies from its preset
    if lead is None:
        return []
    labels = results.labels
    by_data = {g.data: g for g in groups}
    panels, said = [], []
    for data, kind, what in lead:
        group = by_data.get(data)
        maps = results.attention.get(group.key, {}).get(kind) if group else None
        if maps:
            panels.append((f"{kind} on {group_label(group, labels)}: {what}", maps))
            said.append(f"`{kind}` on {group_label(group, labels)} ({what})")
    blocks: list[Block] = [("h2", "What the attention learned")]
    if plots.plot_attention_panels(panels, folder / LEAD_FIGURE) is not None:
        blocks.append(("img", LEAD_FIGURE, "Learned attention, per layer and head (query position down, key position "
                                           "across), best checkpoint of seed 0: " + "; ".join(said) + "."))
    shown = [g for g in groups if g.data in {d for d, _, _ in lead}] or groups
    blocks.append(("list", reading(shown, labels)))
    _write_table(results, groups, folder / LEAD_TABLE, minutes)
    return blocks


def _write_table(results: Results, groups: list[Group], path: Path, minutes) -> None:
    """The tables of every task, the command and the wall time, as markdown."""
    labels = results.labels
    lines = [f"Command: `{c}`" for c in results.commands]
    cores = (results.machine or {}).get("cores", "?")
    loads = results.load_averages
    load = f"; 1-minute load average {min(loads):.1f} to {max(loads):.1f} on {cores} cores" if loads else ""
    lines += [f"Wall time: {minutes(results.wall_time_s)} (training, evaluation, pictures{load}).", ""]
    for group in groups:
        header, rows = table_rows(group)
        lines += [f"**{group_label(group, labels)}** (`{group.key}`)", "", "| " + " | ".join(header) + " |",
                  "|" + "---|" * len(header), *("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"
                                                for row in rows), ""]
    lines += [*reading(groups, labels), ""]
    path.write_text("\n".join(lines))


def lead_text(results: Results, groups: list[Group]) -> str:
    """The terminal version of the reading (the tables are printed beside it)."""
    return "\n".join(line.replace("**", "") for line in reading(groups, results.labels))



