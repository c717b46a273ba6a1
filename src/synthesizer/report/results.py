"""results.json: every raw number of a comparison, so reports can be merged and re-rendered.

Layout (``FORMAT = 1``)::

    {"format": 1, "presets": ["lm"], "size": "quick", "commands": ["synthesizer compare ..."],
     "machine": {...}, "wall_time_s": 612.3, "sessions": [{"id", "started", "finished", "wall_time_s", "code"}],
     "labels": {"lm-sotu": "language modelling (SOTU)"},
     "runs": [<run record>, ...],
     "pretraining": [<run record of a pretrained preset's pretraining run>, ...],
     "left_out": {"wmt14-ende-base": "why this size leaves the task out"},
     "attention": {"lm-sotu": {"random": [<attention_maps() layer dicts>]}},
     "timings": {"lm-sotu": <comparison/timing.py's record: the kinds timed one at a time>}}

A run's answer is one of three types (:func:`outcome` tells them apart): a :class:`RunRecord`,
run_experiment's result dict (with ``test_metrics``) and its ``run_dir``; a :class:`Failure`,
``{"task", "data", "attention", "seed", "error"}``; or :class:`Stopped` (interrupted by a signal: where
to resume, and no record, since the next ``compare`` trains it on). results.json holds the first two.
They stay dicts, as JSON reads them: the types name the keys every reader may count on, and
:func:`load_results` checks them, naming the file and the record. Every run of one task and data in one
file trained on the same data and tokenizer (``check_one_corpus``).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, TypedDict

from ..runs.files import write_json
from . import schema

FORMAT = 1
FILENAME = "results.json"


FINISHED, FAILED, STOPPED = "finished", "failed", "stopped"


class _Named(TypedDict):
    task: str
    data: str
    attention: str


class RunIdentity(_Named, total=False):
    """What names a run in a comparison (:func:`run_key`); ``seed`` is 0 where a record has none."""
    seed: int


class Failure(RunIdentity):
    """A run that raised, or whose process died: the report lists its error and the comparison goes on."""
    error: str


class Stopped(TypedDict):
    """A run interrupted by a signal (SIGINT, SIGTERM): its last checkpoint, from which it resumes."""
    stopped: str
    steps: int
    checkpoint: str


class _Scored(RunIdentity):
    test_metrics: dict[str, float | None]
    primary_metric: str
    higher_is_better: bool


class RunRecord(_Scored, total=False):
    """A finished run: its test metrics (a metric that was not finite is null) and how to read them; the
    rest (curve, params, timings, provenance, ...) is what tasks.result.summarize records. An average over
    runs (the GLUE-style one) has no ``run_dir``."""
    run_dir: str


Record = RunRecord | Failure | Stopped

_IDENTITY = {"task": str, "data": str, "attention": str}


def check_record(record: Any, where: str) -> None:
    """ValueError naming ``where`` (the file and the record's place in it) and the key, where ``record``
    is neither a :class:`RunRecord` nor a :class:`Failure`: a report must not fail later on a key that a
    hand edit or another tool left out."""
    if not isinstance(record, dict):
        raise ValueError(f"{where}: a run record is a JSON object, not {type(record).__name__}")
    for key, kind in _IDENTITY.items():
        if not isinstance(record.get(key), kind):
            raise ValueError(f"{where}: the record has no {key!r} string (every record names its task, data, "
                             "attention and seed)")
    if not isinstance(record.get("seed", 0), int) or isinstance(record.get("seed"), bool):
        raise ValueError(f"{where}: 'seed' is {record['seed']!r}, not an integer")
    state = outcome(record)
    if state == FAILED:
        if not isinstance(record["error"], str):
            raise ValueError(f"{where}: 'error' is {record['error']!r}, not the failure's message")
        return
    if state == STOPPED:
        raise ValueError(f"{where}: the record has neither 'test_metrics' (a finished run) nor 'error' (a failed "
                         "one); a stopped run is not recorded, and the next compare trains it on")
    metrics = record["test_metrics"]
    if not isinstance(metrics, dict) or not all(v is None or isinstance(v, (int, float)) for v in metrics.values()):
        raise ValueError(f"{where}: 'test_metrics' is not an object of numbers (null where not finite)")
    if record.get("primary_metric") not in metrics or not isinstance(record.get("higher_is_better"), bool):
        raise ValueError(f"{where}: a finished run names its 'primary_metric' (one of its test_metrics: "
                         f"{', '.join(map(str, metrics)) or 'none'}) and 'higher_is_better' (true or false)")


def outcome(record: Record) -> str:
    """What became of a run: FAILED (it records an ``error``), FINISHED (it has test metrics) or STOPPED."""
    if "error" in record:
        return FAILED
    return FINISHED if "test_metrics" in record else STOPPED


def failed(record: Record) -> bool:
    return outcome(record) == FAILED


def empty_results(machine: dict | None = None) -> dict:
    """A results dict with no run; ``machine``: what the comparison runs on (comparison.machine.machine_info)."""
    return {"format": FORMAT, "presets": [], "size": None, "commands": [], "machine": dict(machine or {}),
            "wall_time_s": 0.0, "sessions": [], "labels": {}, "runs": [], "attention": {}}


def load_or_empty_results(folder: Path, machine: dict | None = None) -> dict:
    """The results.json in ``folder`` (a comparison's --out), or a new, empty one (on ``machine``) where there is
    none yet."""
    return load_results(folder) if (folder / FILENAME).exists() else empty_results(machine)


def run_key(run: dict) -> tuple:
    return run["task"], run["data"], run["attention"], int(run.get("seed", 0))


def put_run(results: dict, run: dict, field: str = "runs") -> None:
    """Add ``run`` to ``results[field]`` ("runs", or a pretrained preset's "pretraining"), replacing an
    earlier record of the same (task, data, attention, seed); ValueError where it trained on other data or
    another tokenizer than the runs of its task already there (:func:`check_one_corpus`)."""
    key = run_key(run)
    check_one_corpus(results.get(field, []), run)
    results[field] = [r for r in results.get(field, []) if run_key(r) != key] + [run]


def data_fingerprint(run: dict) -> tuple[dict, str | None] | None:
    """``({split: sha256}, tokenizer sha256 or None)`` of a run's recorded data, None where it records none."""
    provenance = run.get("provenance") or {}
    splits = (provenance.get("data") or {}).get("splits") or {}
    if not splits:
        return None
    return {k: v.get("sha256") for k, v in splits.items()}, (provenance.get("tokenizer") or {}).get("sha256")


def check_one_corpus(runs: list[dict], run: dict) -> None:
    """ValueError naming both runs and their data's origins where ``run`` trained on other data (a split's
    content hash) or with another tokenizer than a run of the same task and data in ``runs``: one comparison
    holds one corpus per task, or its table would compare two data sets as one."""
    mine = data_fingerprint(run)
    if mine is None:
        return
    for other in runs:
        theirs = data_fingerprint(other)
        if theirs is None or (other["task"], other["data"]) != (run["task"], run["data"]) or run_key(other) == run_key(run):
            continue
        differ = [f"the {split} split" for split in sorted(set(mine[0]) & set(theirs[0])) if mine[0][split] != theirs[0][split]]
        if mine[1] and theirs[1] and mine[1] != theirs[1]:
            differ.append("the tokenizer")
        if differ:
            raise ValueError(f"{_named(run)} and {_named(other)} differ in {', '.join(differ)} (content hashes): "
                             f"{_origin(run)} vs {_origin(other)}; one comparison holds one corpus per task, so "
                             "this run is not added: train it into another --out folder, or check the data against "
                             "the hashes the reports record (docs/reproduce.md)")


def _named(run: dict) -> str:
    return f"{run['task']}-{run['data']} {run['attention']} seed {int(run.get('seed', 0))}"


def _origin(run: dict) -> str:
    return ((run.get("provenance") or {}).get("data") or {}).get("origin") or "origin not recorded"




def save_results(results: dict, folder: str | os.PathLike) -> Path:
    """Write ``folder/results.json`` atomically."""
    path = Path(folder) / FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, results, compact=True)
    return path


def load_results(path: str | os.PathLike) -> dict:
    """Read a results.json (or the one inside a report folder); ValueError naming the file and the field where
    it is not one: every field's type and every number (finite) is checked here, once (:mod:`.schema`)."""
    path = Path(path)
    if path.is_dir():
        path = path / FILENAME
    if not path.is_file():
        raise ValueError(f"{path}: no such file; give a comparison folder (the --out of `synthesizer compare`) "
                         f"or its {FILENAME}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte {e.start}); a results.json is JSON in UTF-8") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("runs"), list):
        raise ValueError(f"{path}: not a comparison results file (format {FORMAT} with a 'runs' list)")
    schema.check_finite(data, f"{path}: ")
    schema.check_fields(data, schema.TOP, f"{path}: ")
    for field in ("runs", "pretraining"):
        for i, record in enumerate(data.get(field, [])):
            check_record(record, f"{path}: {field}[{i}]")
            schema.check_fields(record, schema.RECORD, f"{path}: {field}[{i}].")
    return data


def results_folder(path: str | os.PathLike) -> Path:
    """The comparison folder of ``path``: the folder itself, or the one holding it where it is a results.json."""
    path = Path(path)
    return path.parent if path.name == FILENAME and path.is_file() else path


# results.json's fields that merge_results combines; any other key is copied, a later part's winning
MERGED = ("format", "presets", "size", "commands", "machine", "wall_time_s", "sessions", "labels", "left_out",
          "runs", "pretraining", "attention", "timings", "other_machines")


def merge_results(parts: list[dict]) -> dict:
    """One results dict from several (later parts win for the same run, and for a key it does not combine).

    Idempotent: a run, a session or a command is counted once, so merging a folder with itself, or with a
    continuation of it (a copy of its results.json that a later compare extended), adds nothing twice. The wall
    time adds up over the sessions: a part adds its wall time less that of its sessions already counted."""
    merged = empty_results()
    merged["machine"] = parts[0]["machine"] if parts else merged["machine"]
    seen: dict[tuple, float] = {}  # (started, finished) of each session counted -> its wall time
    for part in parts:
        for key, value in part.items():
            if key not in MERGED:
                merged[key] = copy.deepcopy(value)
        for name in part.get("presets", []):
            if name not in merged["presets"]:
                merged["presets"].append(name)
        sizes = {*(merged["size"] or "").split("/"), part.get("size")} - {None, ""}
        merged["size"] = "/".join(sorted(sizes)) if sizes else None
        merged["commands"] += [c for c in part.get("commands", []) if c not in merged["commands"]]
        merged["wall_time_s"] += _new_wall_time(part, seen)
        merged["labels"].update(part.get("labels", {}))
        if part.get("left_out"):
            merged.setdefault("left_out", {}).update(part["left_out"])
        for machine in [part.get("machine"), *part.get("other_machines", [])]:
            if machine and machine != merged["machine"] and machine not in merged.get("other_machines", []):
                merged.setdefault("other_machines", []).append(machine)
        for run in part["runs"]:
            put_run(merged, run)
        for run in part.get("pretraining", []):  # a pretrained preset's pretraining runs: later parts win too
            put_run(merged, run, "pretraining")
        for group, maps in part.get("attention", {}).items():
            merged["attention"].setdefault(group, {}).update(maps)
        if part.get("timings"):  # later parts win: the newest timing of a group
            merged.setdefault("timings", {}).update(part["timings"])
    merged["sessions"] = [session for _, session in seen.values()]
    return merged


def _new_wall_time(part: dict, seen: dict) -> float:
    """The wall time ``part`` adds to a merge: all of it, less the wall time of its sessions counted already
    (``seen``, which takes its new sessions); none where every session of it was counted."""
    wall = float(part.get("wall_time_s") or 0.0)
    sessions = part.get("sessions", [])
    counted = [s for s in sessions if _session_key(s) in seen]
    for session in sessions:
        seen.setdefault(_session_key(session), (float(session.get("wall_time_s") or 0.0), session))
    if sessions and len(counted) == len(sessions):
        return 0.0
    return max(0.0, wall - sum(float(s.get("wall_time_s") or 0.0) for s in counted))


def _session_key(session: dict) -> tuple:
    """What tells sessions apart: the id each has had since ids were recorded, else its times."""
    return (session["id"],) if session.get("id") else (session.get("started"), session.get("finished"),
                                                       session.get("wall_time_s"))


def describe_code(code: dict | None) -> str:
    """``"0.3.0.dev0 at 7c7f068 (modified)"``; "not recorded" for runs made before the code was recorded
    (runs.code.code_provenance records it)."""
    if not code:
        return "not recorded"
    text = str(code.get("version") or "unknown version")
    if code.get("commit"):
        text += f" at {code['commit'][:7]}{' (modified)' if code.get('modified') else ''}"
    else:
        text += " (not a git checkout)"
    return text
