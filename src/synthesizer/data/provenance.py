"""Where a run's data came from, and content hashes that tell two data sets (or tokenizers) apart.

What is hashed (sha256, hex):

* a split: its examples *as loaded* (after parsing, column mapping and ``limit``), each written as
  canonical JSON (sorted keys, no extra spaces, UTF-8, ``ensure_ascii=False``) followed by a newline,
  in split order. The hash therefore does not depend on how the data was stored (plain or gzip, TSV
  or JSON lines, CRLF or LF line ends) but changes with any text, label, order or count change.
  The label names (classification) are hashed with the train split, since they fix the label ids.
* the tokenizer: the bytes of the file it was saved to (``tokenizer/tokenizer.json``).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .records import SPLITS, Corpus


def split_hash(examples: list, label_names: list[str] | None = None) -> str:
    """sha256 of ``examples`` (documents or example dicts) in canonical JSON, one per line."""
    h = hashlib.sha256()
    if label_names is not None:
        h.update(_canonical({"label_names": list(label_names)}))
    for example in examples:
        h.update(_canonical(example))
    return h.hexdigest()


def file_hash(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def data_provenance(corpus: Corpus) -> dict:
    """``{"name", "origin", "task", "splits": {split: {"examples": n, "sha256": hex}}}`` of a loaded corpus."""
    splits = {}
    for split in SPLITS:
        if split in corpus.splits:
            rows = corpus.splits[split]
            labels = corpus.label_names if split == "train" else None
            splits[split] = {"examples": len(rows), "sha256": split_hash(rows, labels)}
    return {"name": corpus.name, "origin": corpus.origin, "task": corpus.task, "splits": splits}


def tokenizer_provenance(path: str | os.PathLike) -> dict:
    """``{"file", "sha256"}`` of a saved tokenizer file."""
    return {"file": Path(path).name, "sha256": file_hash(path)}


def data_differences(saved: dict, now: dict) -> list[str]:
    """What differs between two :func:`data_provenance` dicts, as short phrases ("the train split ...")."""
    out = []
    if saved.get("name") != now.get("name"):
        out.append(f"the corpus ({saved.get('name')!r} before, {now.get('name')!r} now)")
    before, after = saved.get("splits", {}), now.get("splits", {})
    for split in SPLITS:
        a, b = before.get(split), after.get(split)
        if a is None and b is None:
            continue
        if a is None or b is None or a.get("sha256") != b.get("sha256"):
            count = "" if a is None or b is None else f", {a.get('examples')} examples before, {b.get('examples')} now"
            out.append(f"the {split} split (content hash{count})")
    return out


def _canonical(value) -> bytes:
    return (json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
