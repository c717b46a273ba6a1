"""Limits on the source, read with ``ast`` (nothing is imported):

- no function longer than ``MAX_LINES`` lines or with more than ``MAX_POSITIONAL`` positional
  parameters (``self``/``cls``/``ctx`` not counted; keyword-only parameters are free). Exempt: the
  ``forward``/``backward`` of a ``torch.autograd.Function`` and ``@triton.jit`` kernels, whose
  signatures are fixed by the framework (one argument per tensor, stride and constant);
- no measured speed ratio (a number followed by ``x``/``×`` in a sentence about timing) in a comment or
  docstring: measured figures live in docs/bench/, a comment may point there;
- each run-folder file name is a string literal in one module only, ``runs/files.py``, which names
  them; everyone else uses its constants.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "synthesizer"
FILES_MODULE = "synthesizer/runs/files.py"

MAX_LINES = 60
MAX_POSITIONAL = 8

# Known violations, (file, function), to be split later; an entry that no longer matches fails the test.
ALLOWED_FUNCTIONS: set[tuple[str, str]] = set()


def _sources() -> dict[str, str]:
    return {path.relative_to(SRC).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(PACKAGE.rglob("*.py"))}


def _is_triton_kernel(node: ast.FunctionDef) -> bool:
    return any("jit" in ast.unparse(d) for d in node.decorator_list)


def _is_autograd_method(node: ast.FunctionDef, parent: ast.AST | None) -> bool:
    return (isinstance(parent, ast.ClassDef) and node.name in ("forward", "backward")
            and any(ast.unparse(b).endswith("Function") for b in parent.bases))


def _functions(tree: ast.AST):
    """(function node, its enclosing class or None) for every function of the module, nested ones too."""
    stack = [(tree, None)]
    while stack:
        node, parent = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield child, node if isinstance(node, ast.ClassDef) else None
            stack.append((child, node))


def _positional(node: ast.FunctionDef) -> int:
    params = [a.arg for a in node.args.posonlyargs + node.args.args]
    return len(params) - (1 if params and params[0] in ("self", "cls", "ctx") else 0)


def function_violations() -> set[tuple[str, str]]:
    found = {}
    for name, text in _sources().items():
        for node, parent in _functions(ast.parse(text)):
            if _is_triton_kernel(node) or _is_autograd_method(node, parent):
                continue
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_LINES or _positional(node) > MAX_POSITIONAL:
                found[(name, node.name)] = f"{name}:{node.lineno} {node.name}: {lines} lines, {_positional(node)} positional"
    return found


def test_functions_are_short_with_few_positional_parameters():
    found = function_violations()
    new = sorted(v for k, v in found.items() if k not in ALLOWED_FUNCTIONS)
    assert not new, "split these functions or make their options keyword-only:\n" + "\n".join(new)
    stale = ALLOWED_FUNCTIONS - set(found)
    assert not stale, f"fixed, remove from ALLOWED_FUNCTIONS: {sorted(stale)}"


# A ratio: "1.4x", "2-3x", "0.56×" (not "64x64", "2 x the", "0x1f"); a timing word in the same sentence.
RATIO = re.compile(r"(?<![\w.])\d+(\.\d+)?(-\d+(\.\d+)?)?(x|\s?×)(?!\w)")
TIMING = re.compile(r"faster|slower|speed|\btim(e|es|ed|ing)\b|\bran\b|\bruns?\b|throughput|measur", re.I)
SENTENCE_END = re.compile(r"(?<=[.;:!?])\s+(?=[A-Z(])|\n\s*\n")


def _prose(text: str) -> list[str]:
    """The comments (consecutive comment lines joined) and docstrings of a module."""
    blocks, current, last_row = [], [], -2
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            if tok.start[0] != last_row + 1 and current:
                blocks.append(" ".join(current))
                current = []
            current.append(tok.string.lstrip("#").strip())
            last_row = tok.start[0]
    if current:
        blocks.append(" ".join(current))
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                blocks.append(doc)
    return blocks


def speed_ratios(text: str) -> list[str]:
    """The sentences of ``text``'s comments and docstrings with a ratio and a timing word."""
    hits = []
    for block in _prose(text):
        for sentence in SENTENCE_END.split(" ".join(block.split("\n")) if "\n\n" not in block else block):
            if RATIO.search(sentence) and TIMING.search(sentence):
                hits.append(" ".join(sentence.split())[:160])
    return hits


def test_speed_ratio_pattern():
    assert speed_ratios("# ran 1.4-2.1x slower at seq 512\n")
    assert speed_ratios('"""Blocks of 128 rows: 0.42x the time of whole products."""\n')
    assert speed_ratios("# Measured there (batch 8, ratio to sdpa): random 1.43x / 1.42x with 2M / 4M\n")
    assert not speed_ratios("# 64x64 tiles are fast on CUDA\n")
    assert not speed_ratios("# 2 x the multiply-adds of its matrix products; time is not measured here\n")
    assert not speed_ratios("# faster: see docs/bench/ops.md\n")


def test_no_measured_speed_ratios_in_source():
    found = {name: hits for name, text in _sources().items() if (hits := speed_ratios(text))}
    assert not found, "move measured figures to docs/bench/ and leave a pointer:\n" + "\n".join(
        f"{name}: {hit}" for name, hits in found.items() for hit in hits)


# The run folder's names (runs/files.py). A name with a dot counts wherever it is a string literal; a
# folder name ("tokenizer", "last", ...) is also a config key or a choice, so it counts where it builds a
# path: an operand of ``/``, or an argument of Path(), os.path.join(), joinpath() or with_name().
RUN_FILE_NAMES = {"experiment.json", "data.json", "labels.json", "result.json", "log.jsonl",
                  "config.json", "model.safetensors", "trainer_state.pt"}
RUN_FOLDER_NAMES = {"tokenizer", "last", "best", "previous"}
PATH_CALLS = {"Path", "join", "joinpath", "with_name"}


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def run_file_literals(text: str) -> list[str]:
    tree = ast.parse(text)
    docs = _docstring_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in RUN_FILE_NAMES and id(node) not in docs:
            found.append(f"{node.lineno}: {node.value!r}")
        path_parts = []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            path_parts = [node.left, node.right]
        elif isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if func in PATH_CALLS:
                path_parts = node.args
        for part in path_parts:
            if isinstance(part, ast.Constant) and part.value in RUN_FOLDER_NAMES:
                found.append(f"{part.lineno}: {part.value!r} in a path")
    return found


def test_run_file_names_live_in_runs_files():
    found = {name: hits for name, text in _sources().items()
             if name != FILES_MODULE and (hits := run_file_literals(text))}
    assert not found, "use the constants of runs/files.py:\n" + "\n".join(
        f"{name}:{hit}" for name, hits in found.items() for hit in hits)
    owned = run_file_literals((SRC / FILES_MODULE).read_text(encoding="utf-8"))
    names = {hit.split("'")[1] for hit in owned}
    assert RUN_FILE_NAMES <= names, f"runs/files.py should name {sorted(RUN_FILE_NAMES - names)}"


def test_the_experiment_runner_stays_a_recipe():
    """tasks/experiment.py wires the steps of a run; the steps live in their own modules (data, run
    folder, pretrained start, result), so the recipe reads in one sitting."""
    lines = (PACKAGE / "tasks" / "experiment.py").read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"tasks/experiment.py has {lines} lines; move a step into its own module"
