"""The pages that quote results quote the committed files: a stale or hand-edited number fails here.

* docs/results/README.md: its verdicts table is generated from the results.json files (report/index.py) and must
  equal a fresh generation; every quoted figure (a number with a decimal point or a percent sign) in a
  paragraph or bullet must appear in the report.md of a comparison that paragraph links to (each report is
  rendered from its results.json), and a paragraph that quotes figures must link one.
* docs/benchmarks.md: every figure it quotes must appear in the committed benchmark files it is written from
  (the tables, CSV and JSON lines under docs/bench), but for the paper's own figures it quotes by name.
* the demo's accuracies on README.md and docs/demo.md are the table the demo wrote (docs/demo/table.md).
* the scale study's report is what its width folders' results.json render.
"""

import re
from pathlib import Path

import pytest

from synthesizer.report.index import BEGIN, END, with_table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
INDEX = RESULTS / "README.md"
FIGURE = re.compile(r"(?<![\w.])[+-]?\d[\d,]*(?:\.\d+)?%|(?<![\w.])[+-]?\d[\d,]*\.\d+(?![\w.])")
RATIO = re.compile(r"(?<![\w.])\d+\.\d+x\b")
REPORT_LINK = re.compile(r"\(([\w-]+)/report\.md\)")


BENCH = ROOT / "docs" / "bench"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
PAPER_FIGURES = {"60%"}  # "random is 60% faster than dynamic convolution": the paper's claim, quoted as such


def _norm(figure: str) -> str:
    return figure.replace("−", "-").lstrip("+")


def holds(text: str, figure: str) -> bool:
    """Whether ``text`` holds ``figure`` as a whole number (not inside a longer one: 0.94 is not in 10.945)."""
    return re.search(rf"(?<![\d.]){re.escape(figure)}(?![\d])", text) is not None


def blocks(text: str) -> list[str]:
    """Paragraphs and bullets (a bullet with its continuation lines), the generated section left out."""
    head, _, rest = text.partition(BEGIN)
    text = head + rest.partition(END)[2]
    out, current = [], []
    for line in text.splitlines():
        starts = line.startswith(("- ", "* ", "| ", "#")) or not line.strip()
        if starts and current:
            out.append("\n".join(current))
            current = []
        if line.strip():
            current.append(line)
    if current:
        out.append("\n".join(current))
    return out


def test_the_verdicts_table_is_the_generated_one():
    page = INDEX.read_text(encoding="utf-8")
    assert with_table(page, RESULTS) == page, "re-run `synthesizer compare index docs/results`"


def unbacked(page: str, reports: dict[str, str]) -> list[str]:
    """Each paragraph of ``page`` that quotes a figure no report it links holds (``reports``: report.md text by
    folder name), or that quotes figures and links no report."""
    reports = {k: v.replace("−", "-") for k, v in reports.items()}
    wrong = []
    for block in blocks(page):
        figures = [_norm(f) for f in FIGURE.findall(block)]
        if not figures:
            continue
        linked = [reports[name] for name in REPORT_LINK.findall(block) if name in reports]
        if not linked:
            wrong.append(f"quotes {figures[:3]} but links no report: {block[:80]!r}")
            continue
        missing = [f for f in figures if not any(holds(text, f) for text in linked)]
        if missing:
            wrong.append(f"{missing} not in {REPORT_LINK.findall(block)}: {block[:80]!r}")
    return wrong


def test_every_quoted_figure_is_in_a_report_the_paragraph_links():
    reports = {p.parent.name: p.read_text(encoding="utf-8") for p in RESULTS.glob("*/report.md")}
    wrong = unbacked(INDEX.read_text(encoding="utf-8"), reports)
    assert not wrong, "\n".join(wrong)


def test_a_figure_changed_by_hand_is_caught():
    reports = {"lm": "| dense+vanilla | 102.9 ± 3.6 | keeps 94% [92%, 96%] |"}
    assert unbacked("- lm ([report](lm/report.md)): dense+vanilla 102.9, none keeps 94% [92%, 96%]", reports) == []
    (found,) = unbacked("- lm ([report](lm/report.md)): dense+vanilla 102.8, none keeps 94%", reports)
    assert "['102.8']" in found
    (found,) = unbacked("Test perplexity 102.9 on lm.", reports)
    assert "links no report" in found


def test_every_figure_of_the_benchmarks_page_is_in_a_committed_benchmark_file():
    files = [p for p in BENCH.rglob("*") if p.is_file() and p.suffix in (".md", ".csv", ".jsonl", ".json")]
    committed = "\n".join(p.read_text(encoding="utf-8") for p in files).replace("−", "-")
    page = BENCHMARKS.read_text(encoding="utf-8")
    missing = sorted({_norm(f) for f in FIGURE.findall(page)} - PAPER_FIGURES - {f for f in map(_norm, FIGURE.findall(page))
                                                                                   if holds(committed, f)})
    assert missing == [], f"figures of docs/benchmarks.md found in no file under docs/bench: {missing}"



DEMO_TABLE = ROOT / "docs" / "demo" / "table.md"


def demo_accuracies(text: str) -> dict[str, dict[str, str]]:
    """``{task: {kind: test accuracy}}`` from the demo's markdown tables, each under its bold task title."""
    found, task = {}, None
    for line in text.splitlines():
        title = re.match(r"\*\*([\w-]+)", line)
        if title:
            task = title.group(1)
        elif task and line.startswith("| ") and not line.startswith("| attention"):
            kind, accuracy = [cell.strip() for cell in line.strip("|").split("|")[:2]]
            found.setdefault(task, {})[kind] = accuracy
    return found


def test_the_demo_figures_on_the_readme_and_the_demo_page_are_the_committed_demo_table():
    committed = DEMO_TABLE.read_text(encoding="utf-8")
    tables = demo_accuracies(committed)
    assert set(tables) == {"reversal", "key-value"} and len(tables["reversal"]) == 6
    page = (ROOT / "docs" / "demo.md").read_text(encoding="utf-8")
    for block in committed.split("\n\n"):
        if block.startswith("**") and "\n| " in block:  # a task's title and table, as the demo wrote them
            assert block.strip() in page, f"docs/demo.md differs from docs/demo/table.md in: {block[:60]!r}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([\w+]+)(?: \([^)]*\))? \| ([\d.]+) \| ([\d.]+) \|$", readme, re.MULTILINE)
    assert sorted(kind for kind, _, _ in rows) == sorted(tables["reversal"])
    for kind, reversal, lookup in rows:
        assert (reversal, lookup) == (tables["reversal"][kind], tables["key-value"][kind]), kind


def test_the_committed_scale_report_is_what_its_width_folders_render(tmp_path):
    """The report across widths is rendered from the width folders' results.json alone: a committed report.md
    that an edit of the renderer or of a results.json left behind fails here."""
    from synthesizer.report.scale import width_folders, write_scale_report

    committed = RESULTS / "scale"
    folders = width_folders(committed)
    assert len(folders) >= 2
    for width, folder in folders.items():
        (tmp_path / folder.name).mkdir()
        (tmp_path / folder.name / "results.json").write_bytes((folder / "results.json").read_bytes())
    fresh = write_scale_report(tmp_path).read_text(encoding="utf-8")
    assert fresh == (committed / "report.md").read_text(encoding="utf-8"), \
        "re-render it: synthesizer compare render docs/results/scale"


ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~-])/(?:[\w.+-]+/)+[\w.+-]*")


def test_committed_reports_name_no_path_of_the_machine_they_ran_on():
    """A report's command lines and data origins say what a reader can use: paths relative to the checkout
    (runs/..., ../shared/data/...), not an absolute path on the machine the comparison ran on."""
    wrong = []
    for report in sorted(RESULTS.rglob("report.md")):
        for line in report.read_text(encoding="utf-8").splitlines():
            if line.startswith(("- command:", "- data ")) and ABSOLUTE_PATH.search(line):
                wrong.append(f"{report.relative_to(ROOT)}: {ABSOLUTE_PATH.search(line).group(0)}")
    assert not wrong, wrong
