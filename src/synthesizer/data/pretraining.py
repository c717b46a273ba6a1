"""Pretraining text: every piece of text of one or more corpora, split by split, as one text corpus.

A pretraining corpus is a ``Corpus`` of task ``lm`` (each row one text) whose split s holds the
texts of split s of every source corpus, in the order given: documents of a language-modelling
corpus, both sides of a translation pair (so a bilingual corpus gives both languages), the text
(and text pair) of a classification example, without its label. Splits never mix: pretraining trains
on the train texts only, and its validation loss is measured on the valid texts.
"""

from __future__ import annotations

from .records import SPLITS, Corpus, DataError
from .sources import load_corpus


def text_corpus(corpus: Corpus, name: str | None = None) -> Corpus:
    """``corpus`` as a text corpus: split s holds ``corpus.texts(s)`` (labels dropped)."""
    splits = {split: corpus.texts(split) for split in corpus.splits}
    return Corpus(name or corpus.name, "lm", splits, None, corpus.origin)


def pretraining_corpus(names: list[str], splits: tuple[str, ...] = SPLITS, limit: int | None = None) -> Corpus:
    """The texts of the built-in corpora ``names`` (``limit``: the first rows of each split of each
    corpus, before its texts are taken), named ``"a+b+..."``."""
    if not names:
        raise DataError("a pretraining corpus needs at least one source corpus")
    parts = [text_corpus(load_corpus(n, splits).limit(limit)) for n in names]
    joined = {split: [t for part in parts for t in part.splits[split]] for split in splits}
    origin = "; ".join(f"{p.name}: {p.origin}" for p in parts)
    return Corpus("+".join(names), "lm", joined, None, f"texts of {origin}")
