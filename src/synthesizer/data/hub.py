"""The paper's public datasets through Hugging Face `datasets` (optional extra `synthesizer-pytorch[hub]`).

Each dataset has a `HubSpec`: where it lives on the hub, its task, and a row mapper from the
hub's row dict to our records (see `records.py`). The mappers are plain functions on dicts, so the
same code maps rows from the hub and rows from local `.jsonl` files in the hub's format
(`load_hub(name, data_files=...)`, which needs neither `datasets` nor a network).

Splits: the hub's validation/test splits map to ours as listed in each spec. Where the hub has no
validation split, or where its test labels are hidden (GLUE, SuperGLUE), `valid` is carved out of
train by hashing each example (5%, deterministic) and `test` is the hub's validation split, which
is what papers report on for those benchmarks.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable

from .records import TURN_SEP, Corpus, DataError
from .sources import read_jsonl

VALID_PERCENT = 5
CARVE = "train-heldout"  # marker: this split is the hashed 5% of the hub's train split


@dataclass(frozen=True)
class HubSpec:
    path: str
    config: str | None
    task: str
    map_row: Callable[[dict], Any]  # hub row -> record, or None to skip (an unlabeled row)
    splits: dict[str, str]  # our split -> hub split name, or CARVE
    label_names: tuple[str, ...] | None = None


# ----------------------------------------------------------------------------- row mappers

def translation_row(row: dict, src: str, tgt: str) -> dict:
    pair = row["translation"]
    return {"source": pair[src], "target": pair[tgt]}


def lm_row(row: dict) -> str | None:
    text = row["text"].strip()
    return text or None


def summarization_row(row: dict, source: str = "article", target: str = "highlights") -> dict:
    return {"source": row[source], "target": row[target]}


def personachat_row(row: dict, max_history: int | None = 3) -> dict:
    """One PersonaChat utterance: history -> gold reply (the last candidate, by the dataset's convention)."""
    history = [t for t in row["history"] if t.strip()]
    if max_history is not None:
        history = history[-max_history:]
    return {"source": TURN_SEP.join(history), "target": row["candidates"][-1]}


def pair_row(row: dict, text: str, text_pair: str | None = None, regression: bool = False) -> dict | None:
    """A (text[, text_pair], label) row; label -1 means hidden (GLUE test) and the row is skipped."""
    label = row["label"]
    if not regression and label == -1:
        return None
    out = {"text": row[text], "label": float(label) if regression else int(label)}
    if text_pair is not None:
        out["text_pair"] = row[text_pair]
    return out


def wic_row(row: dict) -> dict | None:
    return pair_row({**row, "text": f"{row['word']}: {row['sentence1']}"}, "text", "sentence2")


def wsc_row(row: dict) -> dict | None:
    query = f"{row['span2_text']} refers to {row['span1_text']}"
    return pair_row({**row, "query": query}, "text", "query")


def copa_row(row: dict) -> dict | None:
    # label 0/1 = which choice is the cause/effect of the premise
    text = f"{row['premise']} What was the {row['question']}?"
    return pair_row({**row, "text": text, "choices": f"{row['choice1']}{TURN_SEP}{row['choice2']}"}, "text", "choices")


def multirc_row(row: dict) -> dict | None:
    return pair_row({**row, "qa": f"{row['question']} {row['answer']}"}, "paragraph", "qa")


# ----------------------------------------------------------------------------- registry

_SEQ = {"train": "train", "valid": "validation", "test": "test"}
_BENCH = {"train": "train", "valid": CARVE, "test": "validation"}  # hidden test labels
_NO_VALID = {"train": "train", "valid": CARVE, "test": "test"}


def _glue(config: str, text: str, text_pair: str | None, labels: tuple[str, ...] | None,
          regression: bool = False, test: str = "validation") -> HubSpec:
    return HubSpec("nyu-mll/glue", config, "regression" if regression else "classification",
                   partial(pair_row, text=text, text_pair=text_pair, regression=regression),
                   {**_BENCH, "test": test}, labels)


def _superglue(config: str, mapper: Callable, labels: tuple[str, ...]) -> HubSpec:
    return HubSpec("aps/super_glue", config, "classification", mapper, _BENCH, labels)


_NLI2 = ("entailment", "not_entailment")
_BOOL = ("False", "True")

HUB: dict[str, HubSpec] = {
    "wmt14-en-de": HubSpec("wmt/wmt14", "de-en", "translation", partial(translation_row, src="en", tgt="de"), _SEQ),
    "wmt14-en-fr": HubSpec("wmt/wmt14", "fr-en", "translation", partial(translation_row, src="en", tgt="fr"), _SEQ),
    "lm1b": HubSpec("billion-word-benchmark/lm1b", "plain_text", "lm", lm_row, _NO_VALID),
    "cnn-dailymail": HubSpec("abisee/cnn_dailymail", "3.0.0", "summarization", summarization_row, _SEQ),
    "personachat": HubSpec("bavard/personachat_truecased", "full", "dialogue", personachat_row,
                           {"train": "train", "valid": CARVE, "test": "validation"}),
    "glue-cola": _glue("cola", "sentence", None, ("unacceptable", "acceptable")),
    "glue-sst2": _glue("sst2", "sentence", None, ("negative", "positive")),
    "glue-mrpc": _glue("mrpc", "sentence1", "sentence2", ("not_equivalent", "equivalent")),
    "glue-qqp": _glue("qqp", "question1", "question2", ("not_duplicate", "duplicate")),
    "glue-stsb": _glue("stsb", "sentence1", "sentence2", None, regression=True),
    "glue-mnli": _glue("mnli", "premise", "hypothesis", ("entailment", "neutral", "contradiction"),
                       test="validation_matched"),
    "glue-mnli-mm": _glue("mnli", "premise", "hypothesis", ("entailment", "neutral", "contradiction"),
                          test="validation_mismatched"),
    "glue-qnli": _glue("qnli", "question", "sentence", _NLI2),
    "glue-rte": _glue("rte", "sentence1", "sentence2", _NLI2),
    "glue-wnli": _glue("wnli", "sentence1", "sentence2", ("not_entailment", "entailment")),
    "superglue-boolq": _superglue("boolq", partial(pair_row, text="question", text_pair="passage"), _BOOL),
    "superglue-cb": _superglue("cb", partial(pair_row, text="premise", text_pair="hypothesis"),
                               ("entailment", "contradiction", "neutral")),
    "superglue-copa": _superglue("copa", copa_row, ("choice1", "choice2")),
    "superglue-multirc": _superglue("multirc", multirc_row, _BOOL),
    "superglue-rte": _superglue("rte", partial(pair_row, text="premise", text_pair="hypothesis"), _NLI2),
    "superglue-wic": _superglue("wic", wic_row, _BOOL),
    "superglue-wsc": _superglue("wsc.fixed", wsc_row, _BOOL),
    "ag-news": HubSpec("fancyzhx/ag_news", None, "classification", partial(pair_row, text="text"), _NO_VALID,
                       ("World", "Sports", "Business", "Sci/Tech")),
    "imdb": HubSpec("stanfordnlp/imdb", None, "classification", partial(pair_row, text="text"), _NO_VALID,
                    ("neg", "pos")),
}


# ----------------------------------------------------------------------------- mapping and loading

def in_heldout(record: Any) -> bool:
    """Whether a train record goes to the carved-out `valid` split (md5 bucket < VALID_PERCENT)."""
    key = json.dumps(record, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return int(hashlib.md5(key).hexdigest()[:12], 16) % 100 < VALID_PERCENT


def map_rows(name: str, rows: Iterable[tuple[str, dict]], max_history: int | None = 3) -> list:
    """Map (where, hub row) pairs with dataset `name`'s mapper; `where` names the row in errors."""
    spec = hub_spec(name)
    mapper = partial(personachat_row, max_history=max_history) if spec.map_row is personachat_row else spec.map_row
    out = []
    for where, row in rows:
        try:
            rec = mapper(row)
        except KeyError as e:
            raise DataError(f"{where}: missing field {e.args[0]!r} for {name} ({spec.path}); "
                            f"fields present: {', '.join(row)}") from None
        except (TypeError, ValueError, IndexError) as e:
            raise DataError(f"{where}: cannot read row for {name}: {e}") from None
        if rec is not None:
            out.append(rec)
    return out


def hub_spec(name: str) -> HubSpec:
    if name not in HUB:
        raise DataError(f"unknown hub dataset {name!r}; allowed: {', '.join(HUB)}")
    return HUB[name]


def _datasets():
    try:
        import datasets
    except ImportError:
        raise ImportError("hub datasets need Hugging Face `datasets`: pip install 'synthesizer-pytorch[hub]'") from None
    return datasets


def load_hub(name: str, splits: tuple[str, ...] = ("train", "valid", "test"), *, limit: int | None = None,
             data_files: dict[str, str | os.PathLike] | None = None, path: str | None = None,
             max_history: int | None = 3) -> Corpus:
    """Load public dataset `name` (one of `HUB`) as a `Corpus`.

    data_files: hub split name -> local `.jsonl` file with rows in the hub's format; read directly,
        without `datasets` or a network (tests, offline copies).
    path: override the hub repository id (e.g. a mirror).
    limit: keep at most the first `limit` examples of each split.
    """
    spec = hub_spec(name)
    wanted = {s: spec.splits[s] for s in splits if s in spec.splits}
    hub_splits = sorted({"train" if h == CARVE else h for h in wanted.values()})
    raw: dict[str, list] = {}
    label_names = spec.label_names
    if data_files is not None:
        for h in hub_splits:
            if h not in data_files:
                raise DataError(f"{name}: data_files has no {h!r} split; given: {', '.join(data_files)}")
            file = Path(data_files[h])
            raw[h] = map_rows(name, ((f"{file}:{n}", row) for n, row in read_jsonl(file)), max_history)
        origin = ", ".join(str(data_files[h]) for h in hub_splits)
    else:
        ds = _datasets()
        repo = path or spec.path
        for h in hub_splits:
            try:
                table = ds.load_dataset(repo, spec.config, split=h)
            except Exception as e:  # network, missing config, ...: say which dataset failed
                raise DataError(f"cannot load {repo} ({spec.config}) split {h!r} from the hub: {e}") from e
            feature = table.features.get("label") if hasattr(table, "features") else None
            if getattr(feature, "names", None):
                label_names = tuple(feature.names)
            raw[h] = map_rows(name, ((f"{repo}[{h}][{i}]", row) for i, row in enumerate(table)), max_history)
        origin = f"hub:{repo}" + (f"/{spec.config}" if spec.config else "")
    out: dict[str, list] = {}
    for ours, h in wanted.items():
        if h == CARVE:
            out[ours] = [r for r in raw["train"] if in_heldout(r)]
        elif ours == "train" and CARVE in spec.splits.values():
            out[ours] = [r for r in raw["train"] if not in_heldout(r)]
        else:
            out[ours] = raw[h]
        if not out[ours]:
            raise DataError(f"{name}: empty split {ours!r} (from {origin})")
    corpus = Corpus(name, spec.task, out, list(label_names) if label_names else None, origin)
    return corpus.limit(limit)
