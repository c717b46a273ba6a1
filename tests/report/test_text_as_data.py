"""The report carries data and writes words once: read from the source with ``ast`` (nothing is imported).

- No module under report/ parses text that it or another module wrote: no ``split``, ``removeprefix``,
  ``startswith`` (and kin), regex or slice on a verdict's, check's or row's text. "Text" is an attribute named like
  one (``check.text``, ``row.status``, ``verdict.label`` ...), the result of a call that writes words
  (``check_text(...)``, ``verdict_label(...)``, ``x.text()`` ...), or a name bound to either in the same function.
- No claim is special-cased by its number or its task's name in the judging (report/claims/): a claim's special
  cases are fields of its row in ``CLAIMS``.

Each rule is also run on the violations it was written against, so it cannot pass by seeing nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPORT = Path(__file__).resolve().parents[2] / "src" / "synthesizer" / "report"
JUDGING = REPORT / "claims"

# attributes that hold words a module wrote (a check's text, a row's status, a verdict's label ...)
TEXT_ATTRIBUTES = {"text", "brief", "what", "status", "verdict", "label", "reason", "note", "notes", "need", "how",
                   "why", "unchecked", "learning", "provisional", "rule", "claim", "attention_note"}
# calls that write words: the wording module's functions and the records' own text methods
TEXT_CALLS = {"text", "summary", "curve_text", "check_text", "check_brief", "verdict_label", "verdict_reason",
              "label_note", "attention_note", "attention_notes", "finding_text", "gate_text", "gate_why", "floor_text",
              "need_text", "status_text", "trivial_text", "how_text", "gap_note", "loss_brief", "speed_note",
              "learning_words", "seeds_text", "contribution_text", "show", "loss_text"}
PARSING_METHODS = {"split", "rsplit", "removeprefix", "removesuffix", "startswith", "endswith", "partition",
                   "rpartition", "find", "rfind", "index", "rindex"}
REGEX = {"match", "fullmatch", "search", "sub", "subn", "split", "findall", "finditer"}


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _is_text(node: ast.AST, bound: set[str]) -> bool:
    """Does ``node`` evaluate to words a module wrote (see the module docstring)?"""
    if isinstance(node, ast.Attribute):
        return node.attr in TEXT_ATTRIBUTES
    if isinstance(node, ast.Call):  # a call that writes words, or a string method on words (still words)
        return _called_name(node) in TEXT_CALLS or (isinstance(node.func, ast.Attribute)
                                                    and _is_text(node.func.value, bound))
    if isinstance(node, ast.BoolOp):  # ``check.brief or check.text``
        return any(_is_text(v, bound) for v in node.values)
    if isinstance(node, ast.Name):
        return node.id in bound
    if isinstance(node, ast.Subscript):  # an item of a list of notes, say
        return _is_text(node.value, bound)
    return False


def _bound_to_text(scope: ast.AST) -> set[str]:
    """Names that ``scope`` binds to text: assigned from it, or iterating over it (to a fixed point)."""
    bound: set[str] = set()
    while True:
        found = set(bound)
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and _is_text(node.value, bound):
                found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, (ast.For, ast.comprehension)) and _is_text(node.iter, bound):
                found |= {t.id for t in ast.walk(node.target) if isinstance(t, ast.Name)}
        if found == bound:
            return bound
        bound = found


def text_parsing(source: str) -> list[str]:
    """Every place in ``source`` that parses text a module wrote, as its code."""
    tree = ast.parse(source)
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))] + [tree]
    found = []
    for scope in scopes:
        bound = _bound_to_text(scope)
        for node in ast.walk(scope):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                receiver = node.func.value
                if node.func.attr in PARSING_METHODS and _is_text(receiver, bound):
                    found.append(ast.unparse(node))
                elif (isinstance(receiver, ast.Name) and receiver.id == "re" and node.func.attr in REGEX
                      and any(_is_text(a, bound) for a in node.args)):
                    found.append(ast.unparse(node))
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and _is_text(node.value, bound):
                found.append(ast.unparse(node))
    return sorted(set(found))


def special_cases(source: str) -> list[str]:
    """Comparisons of a ``.number`` or a ``.task`` against a literal or a constant (an UPPER_CASE name)."""
    def fixed(node: ast.AST) -> bool:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return bool(node.elts) and all(fixed(e) for e in node.elts)
        return isinstance(node, ast.Constant) or (isinstance(node, ast.Name) and node.id.isupper())

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            keyed = any(isinstance(s, ast.Attribute) and s.attr in ("number", "task") for s in sides)
            if keyed and any(fixed(s) for s in sides):
                found.append(ast.unparse(node))
    return found


def test_no_module_of_the_report_parses_text_it_or_another_wrote():
    sources = {path.relative_to(REPORT).as_posix(): path.read_text(encoding="utf-8")
               for path in sorted(REPORT.rglob("*.py"))}
    assert len(sources) > 20 and "claims/wording.py" in sources
    found = {name: hits for name, source in sources.items() if (hits := text_parsing(source))}
    assert not found, found


def test_the_parsing_rule_catches_what_it_was_written_against():
    """The parsing the report did before its checks became records, each caught."""
    old = {
        "need = what.split(' (')[0]": False,  # a parameter: only its callers know it is text
        "rest = check.text.removeprefix(f'{group.key}: ')": True,
        "why = deciding[0].learning.removeprefix('provisional: ')": True,
        "x = gap.text.split(': ', 1)[-1]": True,
        "rest = check.text.removeprefix(key)\nfirst = rest.removeprefix('provisional: ')": True,
        "brief = (check.brief or check.text).removeprefix(key)": True,
        "items = [f'**{n.split(chr(58), 1)[0]}**' for n in attention_notes(groups)]": True,
        "cell = verdict_label(v)[len(str(v.verdict)):]": True,
        "curve = self.curve_text().split(' (')[0]": True,
        "def f(row):\n    words = row.status\n    return words.startswith('ok')": True,
        "import re\nok = re.match('ok', check_text(c))": True,
        "head, rest = page.split(BEGIN, 1)": False,  # a committed page read from disk, not a module's words
    }
    for code, caught in old.items():
        assert bool(text_parsing(code)) == caught, code


def test_no_claim_is_special_cased_by_its_number_or_task():
    sources = {path.name: path.read_text(encoding="utf-8") for path in sorted(JUDGING.glob("*.py"))}
    assert {"rules.py", "table.py", "gate.py"} <= set(sources)
    found = {name: hits for name, source in sources.items() if (hits := special_cases(source))}
    assert not found, found
    for code in ("claim.number == 7 and not chosen", "group.task == GLUE_TASK", "g.task in ('classification',)",
                 "7 == claim.number"):
        assert special_cases(code), code
    for code in ("group.task in claim.untimed", "not self.tasks or group.task in self.tasks", "v.number == n"):
        assert not special_cases(code), code
