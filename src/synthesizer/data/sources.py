"""Readers for the built-in corpora and for local files; every reader returns a `Corpus`.

File formats (the shared corpora use them, and local files may too; any file may be gzipped, `.gz`):

* `.txt` (language modelling): documents separated by blank lines; a line `= <title> =` starts a new
  document and is dropped (it is metadata, not text).
* `.tsv`: no header, no quoting, tab-separated fields. Translation, summarization and dialogue:
  `source<TAB>target`. Classification/regression: `label<TAB>text`, or `label<TAB>text<TAB>text_pair`
  on every line of every split in a text-pair task (declared by `text_pair_column` or `pair=True`,
  else told by the first line of the train file; see `_check_pair_fields`).
* `.jsonl`: one JSON object per line; the caller names the columns (`text_column`, ...). A dialogue
  file may instead hold whole conversations in a list column (`turns_column`), as chitchat does.

Every file is UTF-8; a byte-order mark at its start is dropped, and invalid UTF-8 is reported with
the file and line.

Built-in corpora are looked up, in order, in `$SYNTHESIZER_DATA`, in `../shared/data` next to the
repository and in `../shared/data` next to the working directory; a corpus found in none of them is an
error naming where it looked (docs/reproduce.md says where the data come from). The small subset shipped
inside the package (`synthesizer/corpora`) is never taken in its place: it has a name of its own
(`sotu-subset`, a `packaged_only` corpus read from the package whatever else exists, so results on it are
the same everywhere).
"""

from __future__ import annotations

import gzip
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError, positive_int
from .derived import DERIVED, PAIRS_PER_ROW, derive_corpus
from .generated import GENERATED, generate_corpus
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
    packaged_only: bool = False  # read only from the package's corpora, never from a data root
    pair: bool = False  # classification/regression: examples are text pairs (3 fields per line)


BUILTIN: dict[str, BuiltinCorpus] = {
    "sotu": BuiltinCorpus("lm/sotu", "lm", ".txt"),
    "bible-en-es": BuiltinCorpus("mt/bible-en-es", "translation", ".tsv"),
    "libreoffice-en-de": BuiltinCorpus("mt/libreoffice-en-de", "translation", ".tsv"),
    "debian-descriptions": BuiltinCorpus("summarization/debian-descriptions", "summarization", ".tsv"),
    "chitchat": BuiltinCorpus("dialogue/chitchat", "dialogue", ".jsonl"),
    "rotten-tomatoes": BuiltinCorpus("classification/rotten-tomatoes", "classification", ".tsv"),
    "spam": BuiltinCorpus("classification/spam", "classification", ".tsv"),
    # the subset of sotu shipped in the package (synthesizer/corpora/README.md): the same on every machine
    "sotu-subset": BuiltinCorpus("lm/sotu", "lm", ".txt", packaged_only=True),
}


# ----------------------------------------------------------------------------- low-level readers

def check_file(path: str | os.PathLike) -> Path:
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path}: a folder, not a file; give the data file itself")
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    return path


def read_lines(path: str | os.PathLike) -> list[str]:
    """Every line of a UTF-8 text file (gzipped or not) without its line break, as `_lines` reads it."""
    return [line for _, line in _lines(check_file(path))]


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, text without its line break) for each line of a UTF-8 file, gzipped or not.

    A UTF-8 byte-order mark at the start of the file is dropped. Line breaks are those of Python's
    text mode (`\\n`, `\\r\\n` or a lone `\\r`). Each line is decoded on its own, so invalid UTF-8 is
    reported with its line.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    lineno = 0
    try:
        with opener(path, "rb") as f:
            for raw in f:
                try:
                    # utf-8-sig drops a byte-order mark, which is only meaningful at the start of the file
                    text = raw.decode("utf-8-sig" if lineno == 0 else "utf-8")
                except UnicodeDecodeError as e:
                    # e.object: the bytes decoded (without a BOM); lone CRs before the bad byte end lines
                    where = lineno + 1 + e.object.count(b"\r", 0, e.start)
                    raise DataError(f"{path}:{where}: not valid UTF-8 ({e.reason} 0x{e.object[e.start:e.end].hex()}); "
                                    "save the file as UTF-8") from None
                if text.endswith("\n"):
                    text = text[:-1]
                if text.endswith("\r"):
                    text = text[:-1]
                for part in text.split("\r"):  # lone CRs are line breaks too, as in text mode
                    lineno += 1
                    yield lineno, part
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
    if max_history is not None:
        positive_int("max_history", max_history)
    pairs = []
    for i in range(1, len(turns)):
        start = 0 if max_history is None else max(0, i - max_history)
        pairs.append({"source": TURN_SEP.join(turns[start:i]), "target": turns[i]})
    return pairs


# ----------------------------------------------------------------------------- rows -> examples

def _split_rows(task: str, path: Path, *, text_column: str = "text", text_pair_column: str | None = None,
                label_column: str = "label", source_column: str = "source", target_column: str = "target",
                turns_column: str | None = None, max_history: int | None = 3, pair: bool | None = None,
                pair_why: str = "") -> list:
    """Read one split file into records; classification labels stay raw (mapped to ints later).

    pair (classification/regression): whether examples are text pairs, `pair_why` says who decided
    it (for errors); None: the first line of this file decides (see `_check_pair_fields`).
    """
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
        table = read_tsv(path, (2, 3))
        if pair is None:
            pair, pair_why = len(table[0][1]) == 3, f"its first line has {len(table[0][1])} fields"
        for n, f in table:
            _check_pair_fields(path, n, len(f), pair, pair_why)
            row = {"label": f[0], "text": f[1]}
            if pair:
                row["text_pair"] = f[2]
            rows.append((n, row))
    else:
        pair_column = text_pair_column if text_pair_column is not None else ("text_pair" if pair else None)
        for n, obj in read_jsonl(path):
            row = {"label": _get(path, n, obj, label_column, (str, int, float)), "text": _get(path, n, obj, text_column)}
            if pair_column is not None:
                row["text_pair"] = _get(path, n, obj, pair_column)
            rows.append((n, row))
    return rows


def _check_pair_fields(path: Path, lineno: int, n_fields: int, pair: bool, why: str) -> None:
    """One rule for classification/regression `.tsv` lines: `label<TAB>text` in a single-text task,
    `label<TAB>text<TAB>text_pair` in a text-pair task, never a mix of the two in a corpus.

    The task is a text-pair task when it says so (`text_pair_column` or `pair=True`; a built-in corpus
    by its `BuiltinCorpus.pair`), else when the first line of the train file has 3 fields.
    """
    if n_fields == 2 and not pair or n_fields == 3 and pair:
        return
    if pair:
        raise DataError(f"{path}:{lineno}: expected 3 tab-separated fields (label, text, text_pair), got {n_fields}; "
                        f"{why}, so this is a text-pair task and every line of every split needs a text pair")
    raise DataError(f"{path}:{lineno}: expected 2 tab-separated fields (label, text), got {n_fields}; {why}, so this "
                    "is a single-text task (is there a tab inside the text?). A text-pair task has 3 fields on every "
                    "line of every split and is declared with data.columns: {text_pair_column: text_pair}")


def _label_key(label: Any) -> tuple:
    # ints sort numerically, strings alphabetically, so "10" does not land before "2"
    return (0, label, "") if isinstance(label, int) else (1, 0, str(label))


def _target(label: Any, path: Path, lineno: int) -> float:
    """A regression label as a finite float; DataError with the file and line otherwise (a NaN or
    infinite target would make every loss and metric NaN)."""
    try:
        value = float(label)
    except (TypeError, ValueError):
        raise DataError(f"{path}:{lineno}: label {label!r} is not a number") from None
    if not math.isfinite(value):
        raise DataError(f"{path}:{lineno}: label {label!r} is not a finite number")
    return value


def _normalise_labels(raw: dict[str, list], files: dict[str, Path]) -> dict[str, list]:
    """Classification labels without surrounding whitespace (``pos `` is ``pos``). Labels that differ
    only by case are refused, naming both spellings and where each first appears: they would be
    two classes, most likely by mistake. Train is read first, then the other splits."""
    first: dict[str, tuple[str, str]] = {}  # case-folded label -> (the spelling seen, where)
    out: dict[str, list] = {}
    for split in sorted(raw, key=lambda s: s != "train"):
        rows = []
        for n, row in raw[split]:
            label = row["label"]
            if isinstance(label, str):
                label = label.strip()  # never empty: the readers refuse a blank field
                seen, where = first.setdefault(label.casefold(), (label, f"{files[split]}:{n}"))
                if seen != label:
                    raise DataError(f"{files[split]}:{n}: label {label!r} differs from {seen!r} ({where}) only by "
                                    "case; write one spelling (labels are compared as written)")
                row = {**row, "label": label}
            rows.append((n, row))
        out[split] = rows
    return {split: out[split] for split in raw}


def _finish(name: str, task: str, files: dict[str, Path], raw: dict[str, list], origin: str) -> Corpus:
    """Map raw labels to ints (classification) or floats (regression) and build the `Corpus`."""
    if task not in ("classification", "regression"):
        return Corpus(name, task, raw, None, origin)
    splits: dict[str, list] = {}
    if task == "regression":
        for split, rows in raw.items():
            out = []
            for n, row in rows:
                out.append({**row, "label": _target(row["label"], files[split], n)})
            splits[split] = out
        return Corpus(name, task, splits, None, origin)
    if "train" not in raw:
        raise DataError(f"corpus {name!r}: classification needs a train split to fix the label set")
    raw = _normalise_labels(raw, files)
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
    """Candidate data folders in lookup order, as (folder, is_packaged_subset); never the package's own
    corpora, which only a ``packaged_only`` corpus reads."""
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
    return roots


def _split_file(folder: Path, split: str, ext: str) -> Path | None:
    for cand in (folder / f"{split}{ext}", folder / f"{split}{ext}.gz"):
        if cand.is_file():
            return cand
    return None


def corpus_dir(name: str) -> tuple[Path, bool]:
    """Folder of built-in corpus `name` (first data root that has it) and whether it is the packaged subset."""
    if name not in BUILTIN:
        raise DataError(f"unknown corpus {name!r}; built-in corpora: {', '.join([*BUILTIN, *GENERATED, *DERIVED])}")
    spec = BUILTIN[name]
    roots = [(PACKAGE_CORPORA, True)] if spec.packaged_only else data_roots()
    for root, packaged in roots:
        folder = root / spec.folder
        if _split_file(folder, "train", spec.ext) is not None:
            return folder, packaged
    looked = ", ".join(str(r / spec.folder) for r, _ in roots) or "nowhere (no SYNTHESIZER_DATA, no ../shared/data)"
    subset = [n for n, s in BUILTIN.items() if s.packaged_only and s.folder == spec.folder and n != name]
    instead = f"; the package ships a subset of it under another name: data.corpus={subset[0]}" if subset else ""
    raise DataError(f"corpus {name!r} not found; looked in: {looked}. Set SYNTHESIZER_DATA to the shared data "
                    f"folder (docs/reproduce.md){instead}")


def load_corpus(name: str, splits: tuple[str, ...] = SPLITS, *, limit: int | None = None,
                max_history: int | None = 3) -> Corpus:
    """Load built-in corpus `name` (one of `BUILTIN`).

    limit: keep at most the first `limit` examples of each split (quick runs); a derived corpus keeps the
        examples built from the first `limit / 2` rows of its source's splits.
    max_history: dialogue only, turns of history per example (see `dialogue_pairs`).
    A name in `GENERATED` (ListOps, diagnostics) is generated from its fixed seed instead of read; a
    name in `DERIVED` is built from its source corpus (see `derived.py`).
    """
    if name in DERIVED:
        # `limit` keeps the pairs built from the first rows of the source, so every negative is drawn from
        # inside the kept rows: the first pairs of the whole split would pair the first descriptions with
        # synopses from its second half only, and the synopsis alone would tell the label
        source_limit = None if limit is None else -(-limit // PAIRS_PER_ROW)
        return derive_corpus(name, load_corpus(DERIVED[name].source, splits, limit=source_limit)).limit(limit)
    if name in GENERATED:
        corpus = generate_corpus(name)
        return Corpus(name, corpus.task, {s: corpus.splits[s] for s in splits}, corpus.label_names,
                      corpus.origin).limit(limit)
    folder, packaged = corpus_dir(name)
    spec = BUILTIN[name]
    pair_why = f"corpus {name!r} holds {'text pairs' if spec.pair else 'single texts'}"
    files: dict[str, Path] = {}
    raw: dict[str, list] = {}
    for split in splits:
        path = _split_file(folder, split, spec.ext) or folder / f"{split}{spec.ext}"
        files[split] = path
        # the shared layouts are the default tsv layouts; chitchat holds whole conversations
        turns = "turns" if spec.task == "dialogue" else None
        raw[split] = _split_rows(spec.task, check_file(path), turns_column=turns, max_history=max_history,
                                 pair=spec.pair, pair_why=pair_why)
    return _finish(name, spec.task, files, raw, _origin(folder, packaged)).limit(limit)


def _origin(folder: Path, packaged: bool) -> str:
    """Which copy of a built-in corpus was read: the folder, and the data root it was found under."""
    if packaged:
        return f"{folder} (packaged subset shipped with synthesizer)"
    env = os.environ.get("SYNTHESIZER_DATA")
    if env and folder.is_relative_to(Path(env)):
        return f"{folder} (from $SYNTHESIZER_DATA)"
    return f"{folder} (shared data folder)"


# ----------------------------------------------------------------------------- local files

def load_files(task: str, train: str | os.PathLike, valid: str | os.PathLike | None = None,
               test: str | os.PathLike | None = None, *, name: str | None = None, limit: int | None = None,
               text_column: str = "text", text_pair_column: str | None = None, label_column: str = "label",
               source_column: str = "source", target_column: str = "target", turns_column: str | None = None,
               max_history: int | None = 3, pair: bool | None = None) -> Corpus:
    """Load a corpus from local `.txt` / `.tsv` / `.jsonl` files (formats in the module docstring).

    Column names apply to `.jsonl` files only (`.tsv` files have a fixed field order), except that
    `text_pair_column` also declares a text-pair task for `.tsv` files.
    pair (classification/regression): whether examples are text pairs (a `.jsonl` file then reads
    `text_pair_column`, default "text_pair"). None: yes when `text_pair_column` is given, else the
    first example of the train file decides, and every other line and split must agree with it.
    """
    if task not in TASKS:
        raise InputError(f"unknown task {task!r}; allowed: {', '.join(TASKS)}")
    if pair is False and text_pair_column is not None:
        raise InputError(f"pair=False contradicts text_pair_column={text_pair_column!r} (which declares text pairs)")
    files = {s: check_file(p) for s, p in (("train", train), ("valid", valid), ("test", test)) if p is not None}
    kw = dict(text_column=text_column, text_pair_column=text_pair_column, label_column=label_column,
              source_column=source_column, target_column=target_column, turns_column=turns_column,
              max_history=max_history)
    if pair is None and text_pair_column is not None:
        pair, why = True, f"text_pair_column={text_pair_column!r} is set"
    else:
        why = f"pair={pair} was given"
    raw: dict[str, list] = {}
    for split, path in files.items():
        raw[split] = _split_rows(task, path, pair=pair, pair_why=why, **kw)
        if pair is None and task in ("classification", "regression"):  # train decides for the other splits
            pair = "text_pair" in raw[split][0][1]
            why = f"the train split ({path}) holds {'text pairs' if pair else 'single texts'}"
    name = name or files["train"].name.split(".")[0]
    origin = ", ".join(str(p) for p in files.values())
    return _finish(name, task, files, raw, origin).limit(limit)
