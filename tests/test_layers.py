"""The package's dependency order, read from the source: no import circle, no upward import.

Every ``import`` / ``from ... import`` in ``src/synthesizer`` counts, at module level or inside a
function (a lazy import still ties the two modules together). A module that imports another
package's module also runs that package's ``__init__``: when that ``__init__`` imports anything of
the project, it counts as imported too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "synthesizer"

# The layers, top to bottom, as docs/layout.md states them (test_the_layout_states_these_layers). A module
# may import a module of its own unit (the longest prefix below that names it) or of any unit in a lower
# layer; a sideways import between two units of one layer is as wrong as an upward one. ``synthesizer``
# itself (the package's __init__) is matched exactly, every other name by its longest prefix.
#   - runs.files is the run folder's file names and plain readers/writers, runs.code the code a run is
#     trained with, runs.lock a folder's lock: stdlib and errors only, low enough that
#     the experiment runner (tasks) and the training loop (log.jsonl) write them; the rest of runs/ (the
#     planned run) sits above tasks. runs/__init__ imports nothing, so importing runs.files runs no more.
#   - runs.results is results.json (the one module that reads and writes it, checked by the field rules of
#     runs.schema) and the run record types: below tasks, which produces the records, and above runs.files,
#     whose atomic writer it uses; stdlib and errors only, like the modules under it.
#   - comparison plans and executes the runs (a process pool, or command lines for another scheduler) and
#     then writes the report; report itself is pure (see test_the_report_trains_nothing).
#   - errors (InputError, and one line per user error), extras (missing optional modules) and lazy (the
#     packages' names imported on first use) import nothing above them.
LAYERS: list[tuple[str, ...]] = [
    ("synthesizer.__main__",),  # `python -m synthesizer`
    ("synthesizer", "synthesizer.cli", "synthesizer.demo"),
    ("synthesizer.comparison",),  # plans and trains a comparison's runs, then hands the results to report
    ("synthesizer.report", "synthesizer.bench", "synthesizer.hf"),
    ("synthesizer.runs",),
    ("synthesizer.tasks",),
    ("synthesizer.training", "synthesizer.data"),
    ("synthesizer.models",),
    ("synthesizer.attention",),
    ("synthesizer.runs.results",),  # results.json and the run records: tasks/ makes them, report/ and cli read them
    ("synthesizer.runs.files", "synthesizer.runs.code", "synthesizer.runs.lock", "synthesizer.runs.schema"),
    ("synthesizer.errors",),  # InputError: raised by every layer, runs.files and runs.lock too
    ("synthesizer.extras", "synthesizer.lazy"),
]
LAYOUT = SRC.parent / "docs" / "layout.md"

# Known violations, (importer, imported): none left, keep it so. An
# entry that no longer matches an import fails the test, so the list only shrinks.
ALLOWED: set[tuple[str, str]] = set()


def module_files() -> dict[str, tuple[Path, bool]]:
    """``{dotted module name: (file, is a package __init__)}`` of every module under src/synthesizer."""
    mods = {}
    for path in sorted((SRC / ROOT).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return mods


def _owner(name: str, mods: dict) -> str | None:
    """The module that ``name`` (a module, or a name inside one) resolves to."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def direct_imports(mods: dict) -> dict[str, set[str]]:
    """``{module: project modules it imports}``, relative imports resolved, nested imports included."""
    graph = {}
    for name, (path, is_package) in mods.items():
        package = name if is_package else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {_owner(a.name, mods) for a in node.names if a.name.split(".")[0] == ROOT}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    full = ".".join(base + ([node.module] if node.module else []))
                else:
                    full = node.module or ""
                if full.split(".")[0] != ROOT:
                    continue
                for alias in node.names:  # `from . import cli` names a module; `from .x import f` a name in x
                    sub = f"{full}.{alias.name}"
                    found.add(sub if sub in mods else _owner(full, mods))
        graph[name] = found - {name, None}
    return graph


def unit_of(name: str) -> tuple[int, str]:
    """(layer index, unit) of a module; fails for a module the layer map does not place."""
    if name == ROOT:
        return next(i for i, layer in enumerate(LAYERS) if ROOT in layer), ROOT
    best = None
    for index, layer in enumerate(LAYERS):
        for unit in layer:
            if unit != ROOT and (name == unit or name.startswith(unit + ".")):
                if best is None or len(unit) > len(best[1]):
                    best = (index, unit)
    assert best is not None, f"{name} is in no layer: add it to LAYERS in tests/test_layers.py"
    return best


def import_graph() -> dict[str, set[str]]:
    """The direct imports plus, for an import across units, each package __init__ on the way that itself
    imports something of the project (Python runs it first)."""
    mods = module_files()
    direct = direct_imports(mods)
    graph = {name: set(targets) for name, targets in direct.items()}
    for name, targets in direct.items():
        for target in targets:
            if unit_of(target)[1] == unit_of(name)[1]:
                continue
            package = target.rpartition(".")[0]
            while package and package != ROOT:
                if mods.get(package, (None, False))[1] and direct[package] and package != name:
                    graph[name].add(package)
                package = package.rpartition(".")[0]
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def documented_layers(text: str) -> list[tuple[str, ...]]:
    """The layers of the layout's order line (``__main__ → synthesizer, cli, demo → ...``), as module names."""
    (line,) = [line for line in text.splitlines() if line.startswith("__main__ →")]
    return [tuple(ROOT if name.strip() == ROOT else f"{ROOT}.{name.strip()}" for name in layer.split(","))
            for layer in line.split("→")]


def test_the_layout_states_these_layers():
    """docs/layout.md states the order this test holds the code to, layer by layer."""
    assert documented_layers(LAYOUT.read_text(encoding="utf-8")) == LAYERS


def test_the_layout_reader_sees_each_layer():
    text = "intro\n__main__ → synthesizer, cli → runs.files, errors\n"
    assert documented_layers(text) == [("synthesizer.__main__",), ("synthesizer", "synthesizer.cli"),
                                       ("synthesizer.runs.files", "synthesizer.errors")]


def test_every_allowed_violation_is_still_an_import():
    graph = import_graph()
    stale = sorted(edge for edge in ALLOWED if edge[1] not in graph.get(edge[0], ()))
    assert not stale, f"fixed: remove these from ALLOWED in tests/test_layers.py: {stale}"


def test_no_import_circle():
    graph = {name: targets - {t for s, t in ALLOWED if s == name} for name, targets in import_graph().items()}
    assert circles(graph) == []


def test_no_upward_or_sideways_import():
    wrong = []
    for name, targets in import_graph().items():
        layer, unit = unit_of(name)
        for target in targets:
            target_layer, target_unit = unit_of(target)
            if target_unit != unit and target_layer <= layer and (name, target) not in ALLOWED:
                wrong.append(f"{name} -> {target}")
    assert sorted(wrong) == []


def test_the_reader_sees_nested_and_relative_imports(tmp_path, monkeypatch):
    """The graph reader itself: a lazy import inside a function, ``from . import x`` and ``from ..x import f``."""
    package = tmp_path / ROOT
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("")
    (package / "low" / "base.py").write_text("def f():\n    from ..top import g\n")
    (package / "low" / "other.py").write_text("from . import base\n")
    (package / "top.py").write_text("from .low.base import f\n\ndef g():\n    pass\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    graph = direct_imports(module_files())
    assert graph["synthesizer.low.base"] == {"synthesizer.top"}
    assert graph["synthesizer.low.other"] == {"synthesizer.low.base"}
    assert circles(graph) == [["synthesizer.low.base", "synthesizer.top"]]


# The run folder's file names: each a string literal in one module only (the one that owns the folder).
RUN_FILES = {"experiment.json", "data.json", "labels.json", "result.json", "log.jsonl"}
RUN_FILES_OWNER = "synthesizer.runs.files"


def string_literals(path: Path) -> set[str]:
    """Every string constant of a module that is a whole literal (docstrings and messages that mention a
    name inside a sentence are not one)."""
    return {node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_each_run_file_name_is_spelled_in_one_module():
    spelled: dict[str, list[str]] = {name: [] for name in RUN_FILES}
    for module, (path, _) in module_files().items():
        for name in RUN_FILES & string_literals(path):
            spelled[name].append(module)
    assert spelled == {name: [RUN_FILES_OWNER] for name in RUN_FILES}


def test_results_json_is_named_in_one_module():
    """results.json is read and written by runs.results alone (Results): any other module asks it for the fields,
    so only that module spells the file's name."""
    spelled = [module for module, (path, _) in module_files().items() if "results.json" in string_literals(path)]
    assert spelled == ["synthesizer.runs.results"]


@pytest.mark.parametrize("name", ["synthesizer.attention.ops.fused", "synthesizer.runs.files", "synthesizer"])
def test_every_module_has_one_place_in_the_layers(name):
    assert unit_of(name)[1] == {"synthesizer.attention.ops.fused": "synthesizer.attention",
                                "synthesizer.runs.files": "synthesizer.runs.files", "synthesizer": ROOT}[name]


# What report/ may not import, at any depth: it turns results into documents and trains nothing.
NOT_IN_REPORT = ("multiprocessing", "subprocess", "signal")
NOT_IN_REPORT_PROJECT = ("synthesizer.tasks.experiment", "synthesizer.comparison")


def _imported_names(path: Path) -> set[str]:
    """The absolute names of every import statement of a module (relative ones left out)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
    return names


def test_the_report_trains_nothing():
    """report/ (records -> groups -> claims -> document) starts no process, handles no signal and does not
    reach the experiment runner or the comparison's planning, directly or through the modules it imports."""
    mods, graph = module_files(), import_graph()
    report = [name for name in mods if name == "synthesizer.report" or name.startswith("synthesizer.report.")]
    wrong = [f"{name} imports {imported}" for name in report for imported in _imported_names(mods[name][0])
             if imported.split(".")[0] in NOT_IN_REPORT]
    reached, todo = set(), list(report)
    while todo:
        for target in graph[todo.pop()] - reached:
            reached.add(target)
            todo.append(target)
    wrong += sorted(name for name in reached if name.startswith(NOT_IN_REPORT_PROJECT))
    assert wrong == []


# What report/ may import of the project's model side: the kinds' names (no torch), nothing that builds a
# layer (presets, attention maps read from checkpoints and the machine's description live in comparison/).
# tests/report/test_without_torch.py renders a report where importing torch fails.
REPORT_MAY_IMPORT_OF_ATTENTION = ("synthesizer.attention.names",)
NOT_IN_REPORT_MODEL_SIDE = ("torch", "synthesizer.models", "synthesizer.attention")


def test_the_report_imports_no_torch_no_models_and_of_attention_only_the_names():
    mods = module_files()
    report = [name for name in mods if name == "synthesizer.report" or name.startswith("synthesizer.report.")]
    wrong = []
    for name in report:
        package = name if mods[name][1] else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(mods[name][0].read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                targets = [".".join(base + ([node.module] if node.module else []))]
            else:
                continue
            wrong += [f"{name} imports {t}" for t in targets
                      if t.startswith(NOT_IN_REPORT_MODEL_SIDE) and t not in REPORT_MAY_IMPORT_OF_ATTENTION]
    assert wrong == []



def test_the_presets_live_in_comparison_and_the_report_reads_none():
    """A preset is what to train (comparison/presets.py); the report renders whatever results.json holds."""
    mods = module_files()
    assert "synthesizer.comparison.presets" in mods
    report = [name for name in mods if name.startswith("synthesizer.report")]
    defining = [name for name in report if "PRESETS" in mods[name][0].read_text(encoding="utf-8")]
    importing = [name for name in report if "synthesizer.comparison.presets" in import_graph().get(name, set())]
    assert defining == [] and importing == []
