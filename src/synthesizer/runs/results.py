"""results.json: every raw number of a comparison, so reports can be merged and re-rendered; the one module
that reads and writes it (:class:`Results`), and the types of the run records it holds.

Low in the layers (stdlib only): the experiment runner (tasks/) produces the records, the comparison adds them,
the report and the command line read them.

Layout (``FORMAT = 1``)::

    {"format": 1, "presets": ["lm"], "size": "quick", "commands": ["synthesizer compare ..."],
     "machine": {...}, "wall_time_s": 612.3, "sessions": [{"id", "started", "finished", "wall_time_s", "code"}],
     (a session with "side_by_side": true is the comparison's share of a pool that trained its runs beside
     other comparisons' runs, comparison/side_by_side.py)
     "labels": {"lm-sotu": "language modelling (SOTU)"},
     "runs": [<run record>, ...],
     "pretraining": [<run record of a pretrained preset's pretraining run>, ...],
     "left_out": {"wmt14-ende-base": "why this size leaves the task out"},
     "attention": {"lm-sotu": {"random": [<attention_maps() layer dicts>]}},
     "timings": {"lm-sotu": <comparison/timing.py's record: the kinds timed one at a time>},
     "tuning": <comparison/tuning.py's tuning.json: the sweep's losses and choices (a tuned comparison)>}

A run's answer is one of three types (:func:`outcome` tells them apart): a :class:`RunRecord`,
run_experiment's result dict (with ``test_metrics``) and its ``run_dir``; a :class:`Failure`,
``{"task", "data", "attention", "seed", "error"}``; or :class:`Stopped` (interrupted by a signal: where
to resume, and no record, since the next ``compare`` trains it on). results.json holds the first two.
They stay dicts, as JSON reads them: the types name the keys every reader may count on, and
:meth:`Results.load` checks them, naming the file and the record. Every run of one task and data in one
file trained on the same data and tokenizer (``check_one_corpus``).
"""

from __future__ import annotations

import copy
import json
import math
import os
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypedDict

from ..errors import InputError
from . import schema
from .files import group_key, write_json

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
    """InputError naming ``where`` (the file and the record's place in it) and the key, where ``record``
    is neither a :class:`RunRecord` nor a :class:`Failure`: a report must not fail later on a key that a
    hand edit or another tool left out."""
    if not isinstance(record, dict):
        raise InputError(f"{where}: a run record is a JSON object, not {type(record).__name__}")
    for key, kind in _IDENTITY.items():
        if not isinstance(record.get(key), kind):
            raise InputError(f"{where}: the record has no {key!r} string (every record names its task, data, "
                             "attention and seed)")
    if not isinstance(record.get("seed", 0), int) or isinstance(record.get("seed"), bool):
        raise InputError(f"{where}: 'seed' is {record['seed']!r}, not an integer")
    state = outcome(record)
    if state == FAILED:
        if not isinstance(record["error"], str):
            raise InputError(f"{where}: 'error' is {record['error']!r}, not the failure's message")
        return
    if state == STOPPED:
        raise InputError(f"{where}: the record has neither 'test_metrics' (a finished run) nor 'error' (a failed "
                         "one); a stopped run is not recorded, and the next compare trains it on")
    metrics = record["test_metrics"]
    if not isinstance(metrics, dict) or not all(v is None or isinstance(v, (int, float)) for v in metrics.values()):
        raise InputError(f"{where}: 'test_metrics' is not an object of numbers (null where not finite)")
    if record.get("primary_metric") not in metrics or not isinstance(record.get("higher_is_better"), bool):
        raise InputError(f"{where}: a finished run names its 'primary_metric' (one of its test_metrics: "
                         f"{', '.join(map(str, metrics)) or 'none'}) and 'higher_is_better' (true or false)")


def outcome(record: Record) -> str:
    """What became of a run: FAILED (it records an ``error``), FINISHED (it has test metrics) or STOPPED."""
    if "error" in record:
        return FAILED
    return FINISHED if "test_metrics" in record else STOPPED


def failed(record: Record) -> bool:
    return outcome(record) == FAILED


def finite_number(value) -> bool:
    """Whether a value read from a record is a finite int or float (not None, NaN, infinite or a string)."""
    return isinstance(value, (int, float)) and math.isfinite(value)


def lowest_valid_loss(record: Record) -> float | None:
    """The lowest validation loss a finished run reached, the number every "lowest validation loss" choice
    reads (a learning rate, a position scheme, a placement); None where the run failed, diverged or has none.

    Read from the run's curve of evaluations where it has one, not from ``valid_metrics``: those are measured
    at the checkpoint the task keeps, and a task that keeps the checkpoint of best accuracy (recall,
    classification) can keep one whose loss is far from the run's lowest. A recall run on its plateau keeps
    the chance peak of accuracy at its first evaluation (loss 5.33, where the run went down to 4.08), which
    would rank rates by where that peak fell. Where the checkpoint is kept by loss the two are the same
    number."""
    if failed(record) or record.get("diverged"):
        return None
    reached = [float(p["valid_loss"]) for p in record.get("curve") or () if finite_number(p.get("valid_loss"))]
    if reached:
        return min(reached)
    kept = (record.get("valid_metrics") or {}).get("loss")
    return float(kept) if finite_number(kept) else None


def run_key(run: dict) -> tuple:
    return run["task"], run["data"], run["attention"], int(run.get("seed", 0))


def data_fingerprint(run: dict) -> tuple[dict, str | None] | None:
    """``({split: sha256}, tokenizer sha256 or None)`` of a run's recorded data, None where it records none."""
    provenance = run.get("provenance") or {}
    splits = (provenance.get("data") or {}).get("splits") or {}
    if not splits:
        return None
    return {k: v.get("sha256") for k, v in splits.items()}, (provenance.get("tokenizer") or {}).get("sha256")


def check_one_corpus(runs: list[dict], run: dict) -> None:
    """InputError naming both runs and their data's origins where ``run`` trained on other data (a split's
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
            raise InputError(f"{_named(run)} and {_named(other)} differ in {', '.join(differ)} (content hashes): "
                             f"{_origin(run)} vs {_origin(other)}; one comparison holds one corpus per task, so "
                             "this run is not added: train it into another --out folder, or check the data against "
                             "the hashes the reports record (docs/reproduce.md)")


def _named(run: dict) -> str:
    return f"{run['task']}-{run['data']} {run['attention']} seed {int(run.get('seed', 0))}"


def _origin(run: dict) -> str:
    return ((run.get("provenance") or {}).get("data") or {}).get("origin") or "origin not recorded"




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


def session_record(started: datetime, wall_time_s: float, code: dict | None, **extra: Any) -> dict:
    """One invocation's entry of ``sessions`` (for :meth:`Results.add_session`): a new id, its start, its end
    (now), its wall time and code, and ``extra`` (``side_by_side=True``)."""
    return {"id": uuid.uuid4().hex, "started": started.isoformat(timespec="seconds"),
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), "wall_time_s": wall_time_s,
            "code": code, **extra}


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


# results.json's fields that Results.merge combines; any other key is copied, a later part's winning
MERGED = ("format", "presets", "size", "commands", "machine", "wall_time_s", "sessions", "labels", "left_out",
          "runs", "pretraining", "attention", "timings", "other_machines")


class Results:
    """One comparison's results.json: read and checked whole (:meth:`load`), merged (:meth:`merge`), added to
    (the comparison's ``put_run`` and the other setters) and written back (:meth:`save`). The only reader and
    writer of the file: everything else asks it for the fields it needs (:attr:`runs`, :attr:`labels`,
    :attr:`timings`, ...), so a field's default (what an older file lacks) is decided here once.

    It keeps the file's dict, keys in the order they were first set, so a file read and saved again is the same
    bytes; the lists and dicts it hands out are its own (a caller that changes one changes the results)."""

    def __init__(self, data: dict):
        self._data = data

    @classmethod
    def empty(cls, machine: dict | None = None) -> "Results":
        """Results with no run; ``machine``: what the comparison runs on (comparison.machine.machine_info)."""
        return cls({"format": FORMAT, "presets": [], "size": None, "commands": [], "machine": dict(machine or {}),
                    "wall_time_s": 0.0, "sessions": [], "labels": {}, "runs": [], "attention": {}})

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Results":
        """Read a results.json (or the one inside a comparison folder); InputError naming the file and the field
        where it is not one: every field's type and every number (finite) is checked here, once (:mod:`.schema`)."""
        path = Path(path)
        if path.is_dir():
            path = path / FILENAME
        if not path.is_file():
            raise InputError(f"{path}: no such file; give a comparison folder (the --out of `synthesizer compare`) "
                             f"or its {FILENAME}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
        except UnicodeDecodeError as e:
            raise InputError(f"{path}: not UTF-8 text (byte {e.start}); a results.json is JSON in UTF-8") from None
        validate(data, path)
        return cls(data)

    @classmethod
    def load_or_empty(cls, folder: str | os.PathLike, machine: dict | None = None) -> "Results":
        """The results.json in ``folder`` (a comparison's --out), or new, empty results (on ``machine``) where
        there is none yet."""
        return cls.load(folder) if cls.exists(folder) else cls.empty(machine)

    @staticmethod
    def exists(folder: str | os.PathLike) -> bool:
        """Whether ``folder`` holds a results.json (is a comparison folder)."""
        return (Path(folder) / FILENAME).is_file()

    @staticmethod
    def folder_of(path: str | os.PathLike) -> Path:
        """The comparison folder of ``path``: the folder itself, or the one holding it where it is a results.json."""
        path = Path(path)
        return path.parent if path.name == FILENAME and path.is_file() else path

    def save(self, folder: str | os.PathLike) -> Path:
        """Write ``folder/results.json`` atomically."""
        path = Path(folder) / FILENAME
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, self._data, compact=True)
        return path

    def to_dict(self) -> dict:
        """A copy of the file's content, as JSON holds it."""
        return copy.deepcopy(self._data)

    @classmethod
    def merge(cls, parts: list["Results"]) -> "Results":
        """One :class:`Results` from several (later parts win for the same run, and for a key it does not
        combine). Idempotent: a run, a session or a command is counted once, so merging a folder with itself, or
        with a continuation of it (a copy of its results.json that a later compare extended), adds nothing twice.
        The wall time adds up over the sessions: a part adds its wall time less that of its sessions counted."""
        merged = cls.empty(parts[0].machine if parts else None)
        data = merged._data
        seen: dict[tuple, float] = {}  # (started, finished) of each session counted -> its wall time
        for part in (p._data for p in parts):
            data.update({key: copy.deepcopy(value) for key, value in part.items() if key not in MERGED})
            data["presets"] += [name for name in part.get("presets", []) if name not in data["presets"]]
            sizes = {*(data["size"] or "").split("/"), part.get("size")} - {None, ""}
            data["size"] = "/".join(sorted(sizes)) if sizes else None
            data["commands"] += [c for c in part.get("commands", []) if c not in data["commands"]]
            data["wall_time_s"] += _new_wall_time(part, seen)
            data["labels"].update(part.get("labels", {}))
            if part.get("left_out"):
                data.setdefault("left_out", {}).update(part["left_out"])
            for machine in [part.get("machine"), *part.get("other_machines", [])]:
                if machine and machine != data["machine"] and machine not in data.get("other_machines", []):
                    data.setdefault("other_machines", []).append(machine)
            for run in part["runs"]:
                merged.put_run(run)
            for run in part.get("pretraining", []):  # a pretrained preset's pretraining runs: later parts win too
                merged.put_run(run, "pretraining")
            for group, maps in part.get("attention", {}).items():
                data["attention"].setdefault(group, {}).update(maps)
            if part.get("timings"):  # later parts win: the newest timing of a group
                data.setdefault("timings", {}).update(part["timings"])
        data["sessions"] = [session for _, session in seen.values()]
        return merged

    # what the file holds, with the default of a field an older file lacks

    @property
    def runs(self) -> list[dict]:
        """Every run record, finished or failed (:func:`outcome`)."""
        return self._data["runs"]

    @property
    def pretraining(self) -> list[dict]:
        """A pretrained preset's pretraining runs (not among :attr:`runs`: no task of the report); [] without."""
        return self._data.get("pretraining") or []

    @property
    def labels(self) -> dict[str, str]:
        """``{group key: the task's name in the report}``."""
        return self._data.get("labels", {})

    @property
    def timings(self) -> dict | None:
        """``{group key: the one-at-a-time timing of its kinds}`` (comparison/timing.py); None where not timed."""
        return self._data.get("timings")

    @property
    def tuning(self) -> dict:
        """The learning-rate sweep whose choices these runs trained at (comparison/tuning.py's tuning.json:
        every kind's validation loss at every rate, and the rate it took); {} for a comparison without one."""
        return self._data.get("tuning") or {}

    @property
    def machine(self) -> dict:
        return self._data.get("machine", {})

    @property
    def other_machines(self) -> list[dict]:
        """The machines of merged parts other than :attr:`machine`."""
        return self._data.get("other_machines", [])

    @property
    def commands(self) -> list[str]:
        return self._data.get("commands", [])

    @property
    def presets(self) -> list[str]:
        return self._data.get("presets") or []

    @property
    def size(self) -> str | None:
        return self._data.get("size")

    @property
    def wall_time_s(self) -> float:
        return self._data.get("wall_time_s", 0.0)

    @property
    def side_by_side_s(self) -> float:
        """The part of :attr:`wall_time_s` that is this comparison's share of pools that trained its runs beside
        other comparisons' runs (0.0 where it trained its own)."""
        return sum(float(s.get("wall_time_s") or 0.0) for s in self.sessions if s.get("side_by_side"))

    @property
    def sessions(self) -> list[dict]:
        return self._data.get("sessions") or []

    @property
    def left_out(self) -> dict[str, str]:
        """``{config: why this size leaves it out}``."""
        return self._data.get("left_out") or {}

    @property
    def attention(self) -> dict[str, dict[str, list]]:
        """``{group key: {kind: the attention maps of its first seed}}``."""
        return self._data.get("attention") or {}

    @property
    def lead(self) -> list[tuple[str, str, str]] | None:
        """The (corpus, kind, what it shows) pairs a preset with a lead names (report/lead.py); None without."""
        lead = self._data.get("lead")
        return [tuple(item) for item in lead] if lead else None

    @property
    def rendered_by(self) -> dict | None:
        """The code that rendered the report (runs.code.code_provenance), where it was recorded."""
        return self._data.get("rendered_by")

    @property
    def seeds(self) -> list[int]:
        """The seeds of the runs, sorted."""
        return sorted({int(r.get("seed", 0)) for r in self.runs})

    @property
    def provenance(self) -> list[dict]:
        """The runs that record their provenance (data, tokenizer, code): those trained since it is recorded."""
        return [r for r in self.runs if r.get("provenance")]

    @property
    def code(self) -> list[str]:
        """The code every run was trained with (:func:`describe_code`), each once, sorted."""
        return sorted({describe_code(r["provenance"]["code"]) for r in self.provenance if r["provenance"].get("code")})

    @property
    def load_averages(self) -> list[float]:
        """The machine's 1-minute load average at the end of each run that recorded it."""
        return [r["load_average_1min"] for r in self.runs if r.get("load_average_1min") is not None]

    def runs_of(self, key: str) -> list[dict]:
        """The run records of the group ``key`` (``runs.files.group_key``), failed ones included."""
        return [r for r in self.runs if group_key(r["task"], r["data"]) == key]

    # what a comparison adds while it trains, and what a render or a timing records

    def put_run(self, run: dict, field: str = "runs") -> None:
        """Add ``run`` to :attr:`runs` (``field`` "runs", or a pretrained preset's "pretraining"), replacing an
        earlier record of the same (task, data, attention, seed); InputError where it trained on other data or
        another tokenizer than the runs of its task already there (:func:`check_one_corpus`)."""
        key = run_key(run)
        check_one_corpus(self._data.get(field, []), run)
        self._data[field] = [r for r in self._data.get(field, []) if run_key(r) != key] + [run]

    def set_pretraining(self, runs: list[dict]) -> None:
        """The pretraining runs' records, as they are now (a comparison keeps them by kind and seed)."""
        self._data["pretraining"] = runs

    def add_preset(self, name: str) -> None:
        if name not in self._data["presets"]:
            self._data["presets"].append(name)

    def add_command(self, command: str) -> None:
        """Record ``command`` (the command line that made or rendered these results), once."""
        if command and command not in self._data["commands"]:
            self._data["commands"].append(command)

    def set_size(self, size: str | None) -> None:
        self._data["size"] = size

    def set_lead(self, lead: list[tuple[str, str, str]]) -> None:
        self._data["lead"] = [list(item) for item in lead]

    def add_left_out(self, left_out: dict[str, str]) -> None:
        self._data.setdefault("left_out", {}).update(left_out)

    def set_label(self, key: str, label: str) -> None:
        self._data["labels"][key] = label

    def set_machine(self, **fields: Any) -> None:
        """Add ``fields`` (how the runs were trained: ``parallel_runs``, ``torch_threads``) to :attr:`machine`."""
        self._data["machine"].update(fields)

    def set_rendered_by(self, code: dict | None) -> None:
        self._data["rendered_by"] = code

    def add_session(self, session: dict) -> None:
        """One invocation of the comparison: its id, start, end, wall time and code; its wall time adds up."""
        self._data["wall_time_s"] = float(self._data.get("wall_time_s") or 0.0) + session["wall_time_s"]
        self._data["sessions"].append({**session, "wall_time_s": round(session["wall_time_s"], 1)})

    def maps_of(self, key: str) -> dict[str, list]:
        """``{kind: attention maps}`` of the group ``key``, to add to (a new, empty one where it has none)."""
        return self._data["attention"].setdefault(key, {})

    def set_timing(self, key: str, timing: dict) -> None:
        """The one-at-a-time timing of the kinds of group ``key`` (comparison/timing.py)."""
        self._data.setdefault("timings", {})[key] = timing

    def set_tuning(self, tuning: dict) -> None:
        """The learning-rate sweep these runs' rates were chosen by (:attr:`tuning`)."""
        self._data["tuning"] = tuning

    def start_timings(self) -> None:
        """Record that the kinds were timed, whether or not a group had kinds to time (an empty ``timings``)."""
        self._data.setdefault("timings", {})


def validate(data: Any, path: Path) -> None:
    """InputError naming the file ``path`` and the field where ``data`` (as JSON read it) is not a comparison's
    results: the format, every run record (:func:`check_record`), every field's type and every number (finite)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("runs"), list):
        raise InputError(f"{path}: not a comparison results file (format {FORMAT} with a 'runs' list)")
    schema.check_finite(data, f"{path}: ")
    schema.check_fields(data, schema.TOP, f"{path}: ")
    for field in ("runs", "pretraining"):
        for i, record in enumerate(data.get(field, [])):
            check_record(record, f"{path}: {field}[{i}]")
            schema.check_fields(record, schema.RECORD, f"{path}: {field}[{i}].")
