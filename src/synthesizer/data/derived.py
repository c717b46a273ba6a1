"""Derived corpora: built on load, deterministically, from a built-in corpus (no seed, no extra files).

Like the generated corpora (``generated.py``), each is a built-in corpus name that ``load_corpus``
builds instead of reading: every machine gets the same examples, the config schema is unchanged, and
data.json records the derived rows' content hashes and an origin naming the source corpus and its
folder, like any other corpus.

**bible-en-es-pairs** (text-pair classification, labels ``not_translation`` / ``translation``): a
cross-lingual paraphrase-detection task in the style of MRPC and QQP (GLUE's sentence-pair tasks),
built from the verse-aligned Bible (``bible-en-es``, KJV and Reina-Valera 1909). For every verse i of
a split, in file order, two examples: ``(english_i, spanish_i, translation)`` and
``(english_i, spanish_j, not_translation)``, where j is another verse of the same split among the
``NEIGHBOURS`` verses on either side whose Spanish length (in characters) is closest to
``spanish_i``'s (ties: the nearer verse, then the earlier; a verse whose Spanish equals
``spanish_i`` is never taken).

Why it is sound:

* balanced by construction: one positive and one negative per English verse, side by side; the
  majority class scores 50%;
* the negative comes from a nearby verse: same book and chapter, so the same names, places and
  style, and a length close to the true translation's. Topic words, names and length, which would
  give a random negative away, are weak cues; a model has to match the content of the two sides;
* each split is built from that split alone (the source splits are separate books), so no verse,
  English or Spanish, crosses from train into valid or test;
* every English verse appears once with its translation and once without it, so the English side
  alone says nothing about the label.

**debian-synopsis-pairs** (text-pair classification, labels ``other_package`` / ``synopsis``): does
this one-line synopsis describe the package of this description? Built from ``debian-descriptions``
(description -> synopsis). For every package i of a split, in file order, two examples:
``(synopsis_i, description_i, synopsis)`` and ``(synopsis_j, description_i, other_package)``, where j
is the first package from ``i + n // 2`` on (cyclically, n the split's size) whose synopsis and
description both differ from i's. The synopsis comes first, so a description too long for the model
loses its tail, not the synopsis.

Why it is sound, and how it differs from the Bible task:

* balanced, and neither side alone tells the label: every description appears once with its own
  synopsis and once with another, and the shift by half a split makes j a near-bijection, so almost
  every synopsis also appears once in each class;
* the negative is far away in file order: the files are sorted by package name, and packages next
  to each other often share a description almost word for word (``libfoo1``, ``libfoo-dev``), so a
  nearby negative could describe the package as well as its own synopsis. Half a split away, it is
  another package, whatever its topic. The cue is the words the synopsis shares with the
  description (as in GLUE's MRPC and QQP, where lexical overlap is strong): a model has to relate
  the tokens of one segment to those of the other, which a model without token mixing cannot;
* each split is built from that split alone, so no package crosses splits.

``data.limit`` (``load_corpus(limit=N)``) derives the pairs from the first ``N / 2`` rows of each source
split, so the negatives come from inside the kept rows and both properties above hold for a limited
corpus too. Cutting the derived pairs instead would break them for the synopsis pairs: the first
packages' negatives come from the middle of the split, outside the cut, so the synopses of the two
classes would come from different packages (alphabetically apart: ``lib*`` against ``python3-*``),
and a model trained on them learns the synopsis, not the match (measured: training loss 0.55 against
a validation loss that rose to 0.76 while accuracy stayed near 0.59).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import InputError
from .records import Corpus

NEIGHBOURS = 5  # verses on each side a negative may come from
PAIRS_PER_ROW = 2  # each source row gives one positive and one negative example
PAIR_LABELS = ("not_translation", "translation")


def translation_pairs(rows: list[dict], neighbours: int = NEIGHBOURS) -> list[dict]:
    """Balanced ``{"text", "text_pair", "label"}`` rows (label 1: ``target`` translates ``source``)
    from one split of translation rows ``{"source", "target"}``, in their order (module docstring)."""
    if len(rows) < 2:
        raise InputError(f"a translation split needs at least 2 pairs to draw negatives from, got {len(rows)}")
    out = []
    for i, row in enumerate(rows):
        j = _negative(rows, i, neighbours)
        out.append({"text": row["source"], "text_pair": row["target"], "label": 1})
        out.append({"text": row["source"], "text_pair": rows[j]["target"], "label": 0})
    return out


def _negative(rows: list[dict], i: int, neighbours: int) -> int:
    """The verse near ``i`` whose target is another text of the closest length (see the module docstring)."""
    target = rows[i]["target"]
    for reach in (neighbours, len(rows)):  # a split of repeated texts: look further
        near = [j for d in range(1, reach + 1) for j in (i - d, i + d)
                if 0 <= j < len(rows) and rows[j]["target"] != target]
        if near:
            return min(near, key=lambda j: (abs(len(rows[j]["target"]) - len(target)), abs(j - i), j))
    raise InputError(f"translation split has no target other than {target[:40]!r}: cannot draw a negative")


SYNOPSIS_LABELS = ("other_package", "synopsis")


def synopsis_pairs(rows: list[dict]) -> list[dict]:
    """Balanced ``{"text": synopsis, "text_pair": description, "label"}`` rows (label 1: the synopsis is the
    description's own) from one split of ``{"source": description, "target": synopsis}`` rows (module docstring)."""
    n = len(rows)
    out = []
    for i, row in enumerate(rows):
        j = next((j % n for j in range(i + n // 2, i + n // 2 + n)
                  if rows[j % n]["target"] != row["target"] and rows[j % n]["source"] != row["source"]), None)
        if j is None:
            raise InputError(f"a summarization split needs two packages with different descriptions and synopses to "
                             f"draw a negative from; every other one repeats {row['target'][:40]!r}")
        out.append({"text": row["target"], "text_pair": row["source"], "label": 1})
        out.append({"text": rows[j]["target"], "text_pair": row["source"], "label": 0})
    return out


@dataclass(frozen=True)
class DerivedCorpus:
    """A built-in corpus made on load from ``source`` (a built-in corpus) by ``build`` per split."""

    source: str
    task: str
    build: Callable[[list], list]
    label_names: tuple[str, ...] | None
    how: str  # for the origin line in data.json


DERIVED: dict[str, DerivedCorpus] = {
    "bible-en-es-pairs": DerivedCorpus("bible-en-es", "classification", translation_pairs, PAIR_LABELS,
                                       f"verse pairs, negatives from the {NEIGHBOURS} nearest verses"),
    "debian-synopsis-pairs": DerivedCorpus("debian-descriptions", "classification", synopsis_pairs, SYNOPSIS_LABELS,
                                           "synopsis-description pairs, negatives half a split away"),
}


def derive_corpus(name: str, source: Corpus) -> Corpus:
    """The derived corpus ``name`` (one of ``DERIVED``) built from its loaded ``source`` corpus, split by split."""
    spec = DERIVED[name]
    splits = {split: spec.build(rows) for split, rows in source.splits.items()}
    labels = list(spec.label_names) if spec.label_names is not None else None
    return Corpus(name, spec.task, splits, labels, f"derived from {spec.source} ({spec.how}): {source.origin}")
