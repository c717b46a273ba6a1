"""What every field of a results.json holds, checked whole when the file is read (:func:`.results.validate`).

A report must not fail halfway (after some pictures are written) on a field that a hand edit or another tool
changed, nor read a string as a list of letters: each field outside the run records is checked against its rule
here, every number anywhere must be finite (results.json stores a number that is not finite as null), and the
error is one line naming the file and the field, e.g. ``lm/results.json: commands is 'synthesizer compare ...',
not a list of strings``. The run records themselves are checked by ``results.check_record``, whose rules this
module extends with the types of their other fields. A field left out is fine (older files lack some); a key
no rule names is kept as it is.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ..errors import InputError

Rule = Callable[[Any, str], None]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _simple(what: str, test: Callable[[Any], bool]) -> Rule:
    def check(value: Any, where: str) -> None:
        if not test(value):
            raise InputError(f"{where} is {_shown(value)}, not {what}")
    check.what = what
    return check


STR = _simple("a string", lambda v: isinstance(v, str))
NUMBER = _simple("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
INT = _simple("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool))
BOOL = _simple("true or false", lambda v: isinstance(v, bool))
OBJECT = _simple("an object", lambda v: isinstance(v, dict))


def optional(rule: Rule) -> Rule:
    def check(value: Any, where: str) -> None:
        if value is None:
            return
        try:
            rule(value, where)
        except ValueError as e:
            if not str(e).startswith(f"{where} is "):  # a part of the value, named by its own place
                raise
            raise InputError(f"{where} is {_shown(value)}, not {check.what}") from None
    check.what = f"{rule.what} or null"
    return check


def list_of(rule: Rule) -> Rule:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, list):
            raise InputError(f"{where} is {_shown(value)}, not {check.what}")
        for i, item in enumerate(value):
            rule(item, f"{where}[{i}]")
    check.what = f"a list of {_plural(rule.what)}"
    return check


def map_of(rule: Rule) -> Rule:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise InputError(f"{where} is {_shown(value)}, not {check.what}")
        for key, item in value.items():
            rule(item, f"{where}.{key}")
    check.what = f"an object of {_plural(rule.what)}"
    return check


def fields(**rules: Rule) -> Rule:
    """An object whose keys named here follow their rules (any of them may be left out, others are free)."""
    def check(value: Any, where: str) -> None:
        OBJECT(value, where)
        for key, rule in rules.items():
            if key in value:
                rule(value[key], f"{where}.{key}")
    check.what = "an object"
    return check


def _plural(what: str) -> str:
    for article in ("a ", "an "):
        if what.startswith(article):
            what = what[len(article):]
    return {"true or false": "true or false values", "number or null": "numbers or nulls",
            "object": "objects", "string": "strings", "number": "numbers", "integer": "integers"}.get(what, what)


NUMBERS = map_of(optional(NUMBER))  # metrics, baselines, curve points: null where not finite
LAYER_MAP = fields(layer=STR, stack=STR, index=INT, kind=STR, source=STR, heads=list_of(list_of(list_of(NUMBER))))
TIMING = fields(kinds=map_of(fields(step_s=list_of(NUMBER), median_s=NUMBER, steps_per_sample=INT)),
                params=map_of(OBJECT), seq=INT, batch=INT, d_model=INT, n_heads=INT, max_len=INT)
LEAD_ITEM = _simple("a [corpus, kind, what it shows] list of strings",
                    lambda v: isinstance(v, list) and len(v) == 3 and all(isinstance(s, str) for s in v))

# results.json's fields outside the run records (results.py's docstring shows the layout)
TOP = {"presets": list_of(STR), "size": optional(STR), "commands": list_of(STR), "machine": OBJECT,
       "wall_time_s": NUMBER, "sessions": list_of(fields(id=STR, started=STR, finished=STR, wall_time_s=NUMBER,
                                                           code=optional(OBJECT), side_by_side=BOOL)),
       "labels": map_of(STR), "left_out": map_of(STR), "attention": map_of(map_of(list_of(LAYER_MAP))),
       "timings": map_of(TIMING), "lead": list_of(LEAD_ITEM), "rendered_by": optional(OBJECT),
       "other_machines": list_of(OBJECT), "runs": list_of(OBJECT), "pretraining": list_of(OBJECT),
       "tuning": OBJECT}

# a run record's fields beyond those results.check_record names (tasks/result.py writes them)
RECORD = {"config": OBJECT, "valid_metrics": NUMBERS, "baselines": NUMBERS, "curve": list_of(NUMBERS),
          "mixture_weights": list_of(OBJECT), "components": list_of(STR),
          "params": fields(total=INT, attention_logits=INT, by_component=map_of(INT)),
          "train_time_s": optional(NUMBER), "train_tokens_per_s": optional(NUMBER),
          "train_tokens_per_s_median": optional(NUMBER), "steps": optional(INT), "diverged": BOOL,
          "diverged_step": optional(INT), "load_average_1min": optional(NUMBER), "provenance": OBJECT,
          "run_dir": optional(STR), "per_example": optional(OBJECT)}


def not_finite(value: Any, where: str) -> str | None:
    """The place of the first number in ``value`` that is not finite (NaN, Infinity), None where there is none."""
    if isinstance(value, float) and not math.isfinite(value):
        return where
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = not_finite(item, f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}")
        if found is not None:
            return found
    return None


def check_finite(data: dict, prefix: str) -> None:
    """InputError naming the first number of ``data`` that is not finite; ``prefix``: where ``data`` is
    ("lm/results.json: ")."""
    for key, value in data.items():
        found = not_finite(value, f"{prefix}{key}")
        if found is not None:
            raise InputError(f"{found} is not a finite number (NaN or Infinity); results.json stores a number that "
                             "is not finite as null")


def check_fields(data: dict, rules: dict[str, Rule], prefix: str) -> None:
    """Each field of ``data`` that ``rules`` names follows its rule; ``prefix``: where ``data`` is
    ("lm/results.json: " or "lm/results.json: runs[3].")."""
    for key, rule in rules.items():
        if key in data:
            rule(data[key], f"{prefix}{key}")
