"""Readers for the built-in corpora and for local files; every reader returns a `Corpus`.

File formats (the shared corpora use them, and local files may too; any file may be gzipped, `.gz`):

* `.txt` (language modelling): documents separated by blank lines; a line `= <title> =` starts a new
  document and is dropped (it is metadata, not text).
* `.tsv`: no header, no quoting, tab-separated fields. Translation, summarization and dialogue:
  `source<TAB>target`. Classification/regression: `label<TAB>text` or `label<TAB>text<TAB>text_pair`.
* `.jsonl`: one JSON object per line; the caller names the columns (`text_column`, ...). A dialogue
  file may instead hold whole conversations in a list column (`turns_column`), as chitchat does.

Built-in corpora are looked up, in order, in `$SYNTHESIZER_DATA`, in `../shared/data` next to the
repository, in `../shared/data` next to the working directory, and last in the small subset shipped
inside the package (`synthesizer/corpora`, enough for the default job).
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .records import SEQ2SEQ_TASKS, SPLITS, TASKS, TURN_SEP, Corpus, DataError

PACKAGE_CORPORA = Path(__file__).resolve().parents[1] / "corpora"
_REPO_ROOT = Path(__file__).resolve().parents[3]

Row = tuple[int, dict[str, Any]]  # (1-based line number, parsed fields)


@dataclass(frozen=True)
class BuiltinCorpus:
    """Where a built-in corpus lives under a data root and how its files are laid out."""

    folder: str
    task: str
    ext: str  # ".txt", ".tsv" or ".jsonl"


BUILTIN: dict[str, BuiltinCorpus] = {
    "sotu": BuiltinCorpus("lm/sotu", "lm", ".txt"),
    "bible-en-es": BuiltinCorpus("mt/bible-en-es", "translation", ".tsv"),
    "libreoffice-en-de": BuiltinCorpus("mt/libreoffice-en-de", "translation", ".tsv"),
    "debian-descriptions": BuiltinCorpus("summarization/debian-descriptions", "summarization", ".tsv"),
    "chitchat": BuiltinCorpus("dialogue/chitchat", "dialogue", ".jsonl"),
    "rotten-tomatoes": BuiltinCorpus("classification/rotten-tomatoes", "classification", ".tsv"),
    "spam": BuiltinCorpus("classification/spam", "classification", ".tsv"),
}


# ----------------------------------------------------------------------------- low-level readers

def check_file(path: str | os.PathLike) -> Path:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    return path


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                yield lineno, line.rstrip("\n").rstrip("\r")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
    except (OSError, EOFError) as e:  # a truncated or non-gzip .gz file
        raise DataError(f"{path}: cannot read: {e}") from None


def _nonempty(path: Path, rows: list) -> list:
    if not rows:
        raise DataError(f"{path}: empty split (no examples)")
    return rows


def _is_header(line: str) -> bool:
    return line.startswith("= ") and line.endswith(" =") and len(line) >= 4


def read_documents(path: str | os.PathLike) -> list[str]:
    """Documents of an LM `.txt` file (see module docstring); lines of a document joined by `\\n`."""
    path = check_file(path)
    docs: list[str] = []
    cur: list[str] = []
    header: tuple[int, str] | None = None

    def flush() -> None:
        nonlocal cur, header
        if cur:
            docs.append("\n".join(cur))
        elif header is not None:
            raise DataError(f"{path}:{header[0]}: document {header[1]!r} has no text")
        cur, header = [], None

    for lineno, line in _lines(path):
        if not line.strip():
            flush()
        elif _is_header(line):
            flush()
            header = (lineno, line)
        else:
            cur.append(line)
    flush()
    return _nonempty(path, docs)


def read_tsv(path: str | os.PathLike, n_fields: tuple[int, ...] = (2,)) -> list[tuple[int, list[str]]]:
    """(line number, fields) for each non-blank line; every line must have one of `n_fields` fields."""
    path = check_file(path)
    want = " or ".join(str(n) for n in n_fields)
    rows = []
    for lineno, line in _lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) not in n_fields:
            raise DataError(f"{path}:{lineno}: expected {want} tab-separated fields, got {len(fields)}")
        if any(not f.strip() for f in fields):
            raise DataError(f"{path}:{lineno}: empty field")
        rows.append((lineno, fields))
    return _nonempty(path, rows)


def read_jsonl(path: str | os.PathLike) -> list[Row]:
    """(line number, object) for each non-blank line of a JSON-lines file."""
    path = check_file(path)
    rows = []
    for lineno, line in _lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{lineno}: invalid JSON: {e.msg} (column {e.colno})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        rows.append((lineno, obj))
    return _nonempty(path, rows)


def _get(path: Path, lineno: int, obj: dict, column: str, kind: type | tuple = str) -> Any:
    if column not in obj:
        raise DataError(f"{path}:{lineno}: missing field {column!r}; fields present: {', '.join(obj) or 'none'}")
    value = obj[column]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DataError(f"{path}:{lineno}: field {column!r} has type {type(value).__name__}")
    if isinstance(value, str) and not value.strip():
        raise DataError(f"{path}:{lineno}: field {column!r} is empty")
    return value


def dialogue_pairs(turns: list[str], max_history: int | None = 3) -> list[dict[str, str]]:
    """One (history -> response) pair per turn after the first.

    The source is the last `max_history` turns before the response (all of them when None) joined
    by `TURN_SEP`; the target is the response.
    """
    if max_history is not None and max_history < 1:
        raise ValueError(f"max_history must be >= 1 or None, got {max_history}")
    pairs = []
    for i in range(1, len(turns)):
        start = 0 if max_history is None else max(0, i - max_history)
        pairs.append({"source": TURN_SEP.join(turns[start:i]), "target": turns[i]})
    return pairs


# ----------------------------------------------------------------------------- rows -> examples

def _split_rows(task: str, path: Path, *, text_column: str = "text", text_pair_column: str | None = None,
                label_column: str = "label", source_column: str = "source", target_column: str = "target",
                turns_column: str | None = None, max_history: int | None = 3) -> list:
    """Read one split file into records; classification labels stay raw (mapped to ints later)."""
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    ext = Path(name).suffix
    if ext not in (".txt", ".tsv", ".jsonl"):
        raise DataError(f"{path}: unsupported file type {ext or '(none)'!r}; allowed: .txt, .tsv, .jsonl (optionally .gz)")
    if task == "lm":
        if ext == ".txt":
            return read_documents(path)
        if ext == ".jsonl":
            return [_get(path, n, obj, text_column) for n, obj in read_jsonl(path)]
        raise DataError(f"{path}: language modelling reads .txt or .jsonl files, not {ext}")
    if ext == ".txt":
        raise DataError(f"{path}: task {task!r} reads .tsv or .jsonl files, not .txt")

    if task in SEQ2SEQ_TASKS:
        if ext == ".tsv":
            return [{"source": f[0], "target": f[1]} for _, f in read_tsv(path, (2,))]
        if task == "dialogue" and turns_column is not None:
            out = []
            for n, obj in read_jsonl(path):
                turns = _get(path, n, obj, turns_column, list)
                if not all(isinstance(t, str) and t.strip() for t in turns):
                    raise DataError(f"{path}:{n}: field {turns_column!r} must be a list of non-empty strings")
                out.extend(dialogue_pairs(turns, max_history))
            return _nonempty(path, out)
        return [{"source": _get(path, n, obj, source_column), "target": _get(path, n, obj, target_column)}
                for n, obj in read_jsonl(path)]

    # classification / regression: keep the line number so a bad label can be reported precisely
    rows = []
    if ext == ".tsv":
        for n, f in read_tsv(path, (2, 3)):
            row = {"label": f[0], "text": f[1]}
            if len(f) == 3:
                row["text_pair"] = f[2]
            rows.append((n, row))
    else:
        for n, obj in read_jsonl(path):
            row = {"label": _get(path, n, obj, label_column, (str, int, float)), "text": _get(path, n, obj, text_column)}
            if text_pair_column is not None:
                row["text_pair"] = _get(path, n, obj, text_pair_column)
            rows.append((n, row))
    return rows


def _label_key(label: Any) -> tuple:
    # ints sort numerically, strings alphabetically, so "10" does not land before "2"
    return (0, label, "") if isinstance(label, int) else (1, 0, str(label))


def _finish(name: str, task: str, files: dict[str, Path], raw: dict[str, list], origin: str) -> Corpus:
    """Map raw labels to ints (classification) or floats (regression) and build the `Corpus`."""
    if task not in ("classification", "regression"):
        return Corpus(name, task, raw, None, origin)
    splits: dict[str, list] = {}
    if task == "regression":
        for split, rows in raw.items():
            out = []
            for n, row in rows:
                try:
                    out.append({**row, "label": float(row["label"])})
                except ValueError:
                    raise DataError(f"{files[split]}:{n}: label {row['label']!r} is not a number") from None
            splits[split] = out
        return Corpus(name, task, splits, None, origin)
    if "train" not in raw:
        raise DataError(f"corpus {name!r}: classification needs a train split to fix the label set")
    names = sorted({row["label"] for _, row in raw["train"]}, key=_label_key)
    index = {label: i for i, label in enumerate(names)}
    for split, rows in raw.items():
        out = []
        for n, row in rows:
            if row["label"] not in index:
                raise DataError(f"{files[split]}:{n}: label {row['label']!r} is not in the training labels "
                                f"{[str(x) for x in names]}")
            out.append({**row, "label": index[row["label"]]})
        splits[split] = out
    return Corpus(name, task, splits, [str(x) for x in names], origin)


# ----------------------------------------------------------------------------- built-in corpora

def data_roots() -> list[tuple[Path, bool]]:
    """Candidate data folders in lookup order, as (folder, is_packaged_subset)."""
    roots: list[tuple[Path, bool]] = []
    env = os.environ.get("SYNTHESIZER_DATA")
    if env:
        if not Path(env).is_dir():
            raise DataError(f"SYNTHESIZER_DATA={env}: no such folder")
        roots.append((Path(env), False))
    for base in (_REPO_ROOT, Path.cwd()):
        shared = (base / ".." / "shared" / "data").resolve()
        if shared.is_dir() and all(shared != r for r, _ in roots):
            roots.append((shared, False))
    roots.append((PACKAGE_CORPORA, True))
    return roots


def _split_file(folder: Path, split: str, ext: str) -> Path | None:
    for cand in (folder / f"{split}{ext}", folder / f"{split}{ext}.gz"):
        if cand.is_file():
            return cand
    return None


def corpus_dir(name: str) -> tuple[Path, bool]:
    """Folder of built-in corpus `name` (first data root that has it) and whether it is the packaged subset."""
    if name not in BUILTIN:
        raise DataError(f"unknown corpus {name!r}; built-in corpora: {', '.join(BUILTIN)}")
    spec = BUILTIN[name]
    roots = data_roots()
    for root, packaged in roots:
        folder = root / spec.folder
        if _split_file(folder, "train", spec.ext) is not None:
            return folder, packaged
    looked = ", ".join(str(r / spec.folder) for r, _ in roots)
    raise DataError(f"corpus {name!r} not found; looked in: {looked}. Set SYNTHESIZER_DATA to the shared data folder")


def load_corpus(name: str, splits: tuple[str, ...] = SPLITS, *, limit: int | None = None,
                max_history: int | None = 3) -> Corpus:
    """Load built-in corpus `name` (one of `BUILTIN`).

    limit: keep at most the first `limit` examples of each split (quick runs).
    max_history: dialogue only, turns of history per example (see `dialogue_pairs`).
    """
    folder, packaged = corpus_dir(name)
    spec = BUILTIN[name]
    files: dict[str, Path] = {}
    raw: dict[str, list] = {}
    for split in splits:
        path = _split_file(folder, split, spec.ext) or folder / f"{split}{spec.ext}"
        files[split] = path
        # the shared layouts are the default tsv layouts; chitchat holds whole conversations
        turns = "turns" if spec.task == "dialogue" else None
        raw[split] = _split_rows(spec.task, check_file(path), turns_column=turns, max_history=max_history)
    origin = f"{folder} (packaged subset)" if packaged else str(folder)
    return _finish(name, spec.task, files, raw, origin).limit(limit)


# ----------------------------------------------------------------------------- local files

def load_files(task: str, train: str | os.PathLike, valid: str | os.PathLike | None = None,
               test: str | os.PathLike | None = None, *, name: str | None = None, limit: int | None = None,
               text_column: str = "text", text_pair_column: str | None = None, label_column: str = "label",
               source_column: str = "source", target_column: str = "target", turns_column: str | None = None,
               max_history: int | None = 3) -> Corpus:
    """Load a corpus from local `.txt` / `.tsv` / `.jsonl` files (formats in the module docstring).

    Column names apply to `.jsonl` files only; `.tsv` files have a fixed field order.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; allowed: {', '.join(TASKS)}")
    files = {s: check_file(p) for s, p in (("train", train), ("valid", valid), ("test", test)) if p is not None}
    kw = dict(text_column=text_column, text_pair_column=text_pair_column, label_column=label_column,
              source_column=source_column, target_column=target_column, turns_column=turns_column,
              max_history=max_history)
    raw = {split: _split_rows(task, path, **kw) for split, path in files.items()}
    name = name or files["train"].name.split(".")[0]
    origin = ", ".join(str(p) for p in files.values())
    return _finish(name, task, files, raw, origin).limit(limit)
