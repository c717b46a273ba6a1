import json
import sys
import types

import pytest

from synthesizer.data.hub import HUB, in_heldout, load_hub, map_rows
from synthesizer.data.records import TASKS, TURN_SEP, DataError


def rows(*dicts):
    return [(f"row{i}", d) for i, d in enumerate(dicts)]


def test_every_spec_is_well_formed():
    assert {"wmt14-en-de", "wmt14-en-fr", "lm1b", "cnn-dailymail", "personachat", "glue-cola", "glue-stsb",
            "superglue-boolq", "ag-news", "imdb"} <= set(HUB)
    for name, spec in HUB.items():
        assert spec.task in TASKS, name
        assert set(spec.splits) == {"train", "valid", "test"}, name
        assert (spec.label_names is not None) == (spec.task == "classification"), name


def test_translation_lm_summarization_rows():
    wmt = {"translation": {"de": "Hallo Welt", "en": "Hello world"}}
    assert map_rows("wmt14-en-de", rows(wmt)) == [{"source": "Hello world", "target": "Hallo Welt"}]
    fr = {"translation": {"fr": "Bonjour", "en": "Hello"}}
    assert map_rows("wmt14-en-fr", rows(fr)) == [{"source": "Hello", "target": "Bonjour"}]
    assert map_rows("lm1b", rows({"text": "A sentence ."}, {"text": "  "})) == ["A sentence ."]
    cnn = {"article": "Long story.", "highlights": "Short.", "id": "x"}
    assert map_rows("cnn-dailymail", rows(cnn)) == [{"source": "Long story.", "target": "Short."}]


def test_personachat_row_uses_history_and_gold_candidate():
    row = {"personality": ["I like dogs."], "history": ["a", "b", "c", "d"], "candidates": ["x", "y", "gold"],
           "conv_id": 1, "utterance_idx": 2}
    assert map_rows("personachat", rows(row)) == [{"source": TURN_SEP.join("bcd"), "target": "gold"}]
    assert map_rows("personachat", rows(row), max_history=None)[0]["source"] == TURN_SEP.join("abcd")


def test_glue_superglue_rows():
    assert map_rows("glue-sst2", rows({"sentence": "great", "label": 1, "idx": 0})) == [{"text": "great", "label": 1}]
    mnli = {"premise": "p", "hypothesis": "h", "label": 2, "idx": 0}
    assert map_rows("glue-mnli", rows(mnli, {**mnli, "label": -1})) == [{"text": "p", "text_pair": "h", "label": 2}]
    stsb = {"sentence1": "a", "sentence2": "b", "label": 3.2, "idx": 0}
    assert map_rows("glue-stsb", rows(stsb)) == [{"text": "a", "text_pair": "b", "label": 3.2}]
    wic = {"word": "bank", "sentence1": "river bank", "sentence2": "bank loan", "label": 0}
    assert map_rows("superglue-wic", rows(wic)) == [{"text": "bank: river bank", "text_pair": "bank loan", "label": 0}]
    copa = {"premise": "It rained.", "choice1": "wet", "choice2": "dry", "question": "effect", "label": 0}
    assert map_rows("superglue-copa", rows(copa)) == [
        {"text": "It rained. What was the effect?", "text_pair": f"wet{TURN_SEP}dry", "label": 0}]
    wsc = {"text": "Tom said he left.", "span1_text": "Tom", "span2_text": "he", "label": 1}
    assert map_rows("superglue-wsc", rows(wsc))[0]["text_pair"] == "he refers to Tom"
    assert map_rows("ag-news", rows({"text": "Stocks up", "label": 2})) == [{"text": "Stocks up", "label": 2}]


def test_bad_row_names_where_and_field():
    with pytest.raises(DataError, match=r"row0: missing field 'translation' for wmt14-en-de .*fields present: text"):
        map_rows("wmt14-en-de", rows({"text": "x"}))
    with pytest.raises(DataError, match="unknown hub dataset 'wmt99'; allowed: wmt14-en-de"):
        map_rows("wmt99", [])


def test_heldout_is_deterministic_and_about_five_percent():
    recs = [{"text": f"example {i}", "label": i % 2} for i in range(2000)]
    picked = [in_heldout(r) for r in recs]
    assert picked == [in_heldout(r) for r in recs]
    assert 60 < sum(picked) < 140


def write_jsonl(path, items):
    path.write_text("\n".join(json.dumps(x) for x in items) + "\n", encoding="utf-8")
    return path


def test_load_hub_from_local_files_in_hub_format(tmp_path):
    train = [{"text": f"news item number {i}", "label": i % 4} for i in range(200)]
    test = [{"text": "held out", "label": 3}]
    files = {"train": write_jsonl(tmp_path / "train.jsonl", train), "test": write_jsonl(tmp_path / "test.jsonl", test)}
    c = load_hub("ag-news", data_files=files)
    assert c.task == "classification" and c.label_names == ["World", "Sports", "Business", "Sci/Tech"]
    assert len(c["train"]) + len(c["valid"]) == 200 and 0 < len(c["valid"]) < 30
    assert not {r["text"] for r in c["train"]} & {r["text"] for r in c["valid"]}
    assert c["test"] == [{"text": "held out", "label": 3}]
    assert load_hub("ag-news", data_files=files, limit=5)["train"] == c["train"][:5]


def test_load_hub_local_errors(tmp_path):
    bad = write_jsonl(tmp_path / "train.jsonl", [{"translation": {"en": "a", "de": "b"}}, {"oops": 1}])
    with pytest.raises(DataError, match=r"train\.jsonl:2: missing field 'translation'"):
        load_hub("wmt14-en-de", ("train",), data_files={"train": bad})
    with pytest.raises(DataError, match="data_files has no 'validation' split; given: train"):
        load_hub("wmt14-en-de", ("valid",), data_files={"train": bad})
    with pytest.raises(DataError, match=r"missing\.jsonl: no such file"):
        load_hub("lm1b", ("test",), data_files={"test": tmp_path / "missing.jsonl"})


def test_missing_datasets_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ImportError, match=r"pip install 'synthesizer-pytorch\[hub\]'"):
        load_hub("imdb")


def test_load_hub_through_datasets_api(monkeypatch):
    """The hub path, with a stand-in `datasets` module: ids, configs, splits and label names."""
    calls = []

    class Table(list):
        features = {"label": types.SimpleNamespace(names=["bad", "good"])}

    def load_dataset(path, config, split):
        calls.append((path, config, split))
        return Table([{"text": f"{split} {i}", "label": i % 2} for i in range(40)])

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    c = load_hub("imdb")
    assert sorted(calls) == [("stanfordnlp/imdb", None, "test"), ("stanfordnlp/imdb", None, "train")]
    assert c.label_names == ["bad", "good"] and c.origin == "hub:stanfordnlp/imdb"
    assert len(c["test"]) == 40 and len(c["train"]) + len(c["valid"]) == 40

    def failing(path, config, split):
        raise ConnectionError("offline")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=failing))
    with pytest.raises(DataError, match=r"cannot load nyu-mll/glue \(cola\) split 'train' from the hub: offline"):
        load_hub("glue-cola", ("train",))


def test_load_hub_local_file_with_a_byte_order_mark(tmp_path):
    rows = [{"sentence1": "a", "sentence2": "b", "label": 1}, {"sentence1": "c", "sentence2": "d", "label": 0}]
    path = write_jsonl(tmp_path / "validation.jsonl", rows)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # as some editors save UTF-8
    c = load_hub("glue-rte", ("test",), data_files={"validation": path})
    assert c["test"] == [{"text": "a", "text_pair": "b", "label": 1}, {"text": "c", "text_pair": "d", "label": 0}]
