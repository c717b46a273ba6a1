"""The results index (docs/results/README.md): its verdicts table, written from the committed results.json files.

The page keeps its prose by hand; the table between the markers below is generated (``synthesizer compare
--index DIR`` rewrites it) and a test regenerates it, so a verdict edited by hand, or a report re-rendered
without its index, fails the suite.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..runs.results import FILENAME, Results
from .analysis import analyse
from .claims import CLAIMS, verdict_label

BEGIN = "<!-- verdicts: generated from each folder's results.json by `synthesizer compare --index`; do not edit -->"
END = "<!-- end of the generated verdicts -->"
JUDGED_SIZE = "standard"
# diagnostics: built to probe content-based lookup, which no claim is about; hybrid: 4-layer stacks with a kind
# per layer and rotary positions, each at its own learning rate, asking which layers need dot-product attention
# (its report reads the 2025 finding; the presets' verdicts are the table's)
NOT_JUDGED = ("diagnostics", "hybrid")
ORDER = ("lm", "mt", "summarization", "dialogue", "classification", "listops", "glue")


def judged_folders(root: Path) -> list[Path]:
    """The comparison folders under ``root`` judged in the table: ``standard`` size, not the diagnostics; in
    ``ORDER``, then any others by name."""
    found = [p.parent for p in sorted(root.glob(f"*/{FILENAME}")) if p.parent.name not in NOT_JUDGED]
    found = [f for f in found if Results.load(f).size == JUDGED_SIZE]
    return sorted(found, key=lambda f: (ORDER.index(f.name) if f.name in ORDER else len(ORDER), f.name))


def verdict_table(root: Path) -> str:
    """The markdown table of every claim's verdict label on every judged folder under ``root``."""
    columns, cells = [], []
    for folder in judged_folders(root):
        results = Results.load(folder)
        columns.append(f"[{folder.name}]({folder.name}/report.md), {len(results.seeds)} seeds")
        cells.append({v.number: verdict_label(v) for v in analyse(results).verdicts})
    lines = ["| claim of the paper | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for claim in CLAIMS:
        lines.append(f"| {claim.number}. {claim.short} | " + " | ".join(c[claim.number] for c in cells) + " |")
    return "\n".join(lines)


def with_table(page: str, root: Path) -> str:
    """``page`` with the text between ``BEGIN`` and ``END`` replaced by :func:`verdict_table`; ValueError
    where the markers are missing."""
    if BEGIN not in page or END not in page:
        raise InputError(f"the results index has no generated section: put {BEGIN!r} and {END!r} where it goes")
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{verdict_table(root)}\n{END}{tail}"


def write_index(root: str | Path, page: str = "README.md") -> Path:
    """Rewrite the generated verdicts of ``root/page`` (the results index) from the folders under ``root``."""
    root = Path(root)
    path = root / page
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start}); the results index is markdown in UTF-8") from None
    path.write_text(with_table(text, root), encoding="utf-8")
    return path
