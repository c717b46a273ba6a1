"""In-memory record types shared by every data source.

A corpus is a handful of named splits ("train", "valid", "test"); a split is a plain Python list.
What an element of the list is depends only on the task:

| task             | element of a split                                                 |
|------------------|--------------------------------------------------------------------|
| `lm`             | `str`: one document                                                |
| `translation`    | `{"source": str, "target": str}`                                   |
| `summarization`  | `{"source": str, "target": str}` (source = long text)              |
| `dialogue`       | `{"source": str, "target": str}` (source = history, target = reply)|
| `classification` | `{"text": str, "label": int}` or with an extra `"text_pair": str`  |
| `regression`     | `{"text": str, "label": float}` or with an extra `"text_pair": str`|

Classification labels are ints `0..K-1`; `Corpus.label_names[i]` is the name of label `i`.
Plain lists and dicts keep the data layer free of framework types: anything that can make a list
of dicts (a file reader, a hub loader, a test) can feed the rest of the toolkit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError, positive_int

TASKS = ("lm", "translation", "summarization", "dialogue", "classification", "regression")
SEQ2SEQ_TASKS = ("translation", "summarization", "dialogue")
SPLITS = ("train", "valid", "test")

# Dialogue histories are flattened into one source string; turns are joined by this special token,
# which the tokenizer knows (`Tokenizer.sep_token`) and drops again when decoding.
TURN_SEP = " <sep> "

Example = dict[str, Any]
TEXT_KEYS = ("source", "target", "text", "text_pair")  # the text fields of an example


class DataError(InputError):
    """Bad or missing input data; the message names the file (and line, for a bad row)."""


@dataclass
class Corpus:
    """Named splits of one task, plus what is needed to interpret them.

    name: corpus name (built-in name, hub name or a file stem).
    task: one of `TASKS`.
    splits: split name -> list of documents (lm) or list of example dicts (see module docstring).
    label_names: for classification, the name of each int label (sorted label set of train).
    origin: where the data came from (a folder, files or a hub id), for logs and reports.
    """

    name: str
    task: str
    splits: dict[str, list] = field(default_factory=dict)
    label_names: list[str] | None = None
    origin: str = ""

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise InputError(f"unknown task {self.task!r}; allowed: {', '.join(TASKS)}")

    def __getitem__(self, split: str) -> list:
        if split not in self.splits:
            raise KeyError(f"corpus {self.name!r} has no split {split!r}; it has: {', '.join(self.splits)}")
        return self.splits[split]

    @property
    def num_labels(self) -> int | None:
        return None if self.label_names is None else len(self.label_names)

    def texts(self, split: str = "train") -> list[str]:
        """Every piece of text in a split (for training a tokenizer on it)."""
        rows = self[split]
        if self.task == "lm":
            return list(rows)
        out: list[str] = []
        for row in rows:
            for key in TEXT_KEYS:
                if key in row:
                    out.append(row[key])
        return out

    def max_words(self, n: int | None) -> "Corpus":
        """A copy keeping, in every split, the examples whose every text has at most `n` words
        (whitespace-separated): a smaller task of short sentences. lm documents cannot be cut so."""
        if n is None:
            return self
        if self.task == "lm":
            raise InputError("data.max_words keeps the short examples of a corpus of examples (translation, "
                             "summarization, dialogue, classification); an lm corpus is documents, which it would drop "
                             "whole: use batch.block_size for shorter lm context")

        def short(row: Example) -> bool:
            return all(len(row[key].split()) <= n for key in TEXT_KEYS if key in row)

        return Corpus(self.name, self.task, {k: [r for r in v if short(r)] for k, v in self.splits.items()},
                      self.label_names, self.origin)

    def limit(self, n: int | None) -> "Corpus":
        """A copy with at most the first `n` examples of each split (deterministic subsets)."""
        if n is None:
            return self
        positive_int("limit", n)
        return Corpus(self.name, self.task, {k: v[:n] for k, v in self.splits.items()},
                      self.label_names, self.origin)
