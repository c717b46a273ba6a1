import gzip
import json
from pathlib import Path

import pytest

from synthesizer.data import records, sources
from synthesizer.data.records import TURN_SEP, Corpus, DataError
from synthesizer.data.sources import (BUILTIN, PACKAGE_CORPORA, dialogue_pairs, load_corpus, load_files,
                                      read_documents, read_jsonl, read_tsv)

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} not present")


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- low-level readers

def test_read_documents_headers_and_blank_lines(tmp_path):
    p = write(tmp_path / "a.txt", "= 1 A =\nline one\nline two\n\n= 2 B =\nsecond\n\nplain para\n")
    assert read_documents(p) == ["line one\nline two", "second", "plain para"]


def test_read_documents_header_without_text(tmp_path):
    p = write(tmp_path / "a.txt", "= 1 A =\ntext\n\n= 2 B =\n\n")
    with pytest.raises(DataError, match=r"a\.txt:4: document '= 2 B =' has no text"):
        read_documents(p)


def test_bad_tsv_row_names_file_and_line(tmp_path):
    p = write(tmp_path / "bad.tsv", "a\tb\nc\td\ne f\n")
    with pytest.raises(DataError, match=r"bad\.tsv:3: expected 2 tab-separated fields, got 1"):
        read_tsv(p)
    p = write(tmp_path / "bad3.tsv", "a\tb\tc\td\n")
    with pytest.raises(DataError, match=r"bad3\.tsv:1: expected 2 or 3 tab-separated fields, got 4"):
        read_tsv(p, (2, 3))


def test_missing_file_and_empty_split(tmp_path):
    with pytest.raises(DataError, match=r"nope\.tsv: no such file"):
        read_tsv(tmp_path / "nope.tsv")
    p = write(tmp_path / "empty.tsv", "\n\n")
    with pytest.raises(DataError, match=r"empty\.tsv: empty split"):
        read_tsv(p)
    with pytest.raises(DataError, match=r"empty\.txt: empty split"):
        read_documents(write(tmp_path / "empty.txt", ""))


def test_bad_jsonl_row(tmp_path):
    p = write(tmp_path / "x.jsonl", '{"a": 1}\n{"a": \n')
    with pytest.raises(DataError, match=r"x\.jsonl:2: invalid JSON"):
        read_jsonl(p)
    p = write(tmp_path / "y.jsonl", '[1, 2]\n')
    with pytest.raises(DataError, match=r"y\.jsonl:1: expected a JSON object, got list"):
        read_jsonl(p)


def test_gzip_tsv(tmp_path):
    p = tmp_path / "t.tsv.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write("hello\tworld\n")
    assert read_tsv(p) == [(1, ["hello", "world"])]


def test_dialogue_pairs_history_window():
    turns = ["a", "b", "c", "d"]
    assert dialogue_pairs(turns, max_history=None)[-1] == {"source": TURN_SEP.join("abc"), "target": "d"}
    assert dialogue_pairs(turns, max_history=2) == [
        {"source": "a", "target": "b"},
        {"source": TURN_SEP.join("ab"), "target": "c"},
        {"source": TURN_SEP.join("bc"), "target": "d"},
    ]
    with pytest.raises(ValueError, match="max_history"):
        dialogue_pairs(turns, max_history=0)


# ----------------------------------------------------------------------------- local files

def test_load_files_classification_jsonl_columns_and_labels(tmp_path):
    tr = write(tmp_path / "train.jsonl", "\n".join(json.dumps(r) for r in [
        {"review": "good", "sent": "pos"}, {"review": "bad", "sent": "neg"}, {"review": "ok", "sent": "pos"}]))
    va = write(tmp_path / "valid.jsonl", json.dumps({"review": "meh", "sent": "neg"}) + "\n")
    c = load_files("classification", tr, va, text_column="review", label_column="sent")
    assert c.label_names == ["neg", "pos"]
    assert c["train"] == [{"text": "good", "label": 1}, {"text": "bad", "label": 0}, {"text": "ok", "label": 1}]
    assert c["valid"] == [{"text": "meh", "label": 0}]
    assert c.name == "train" and c.num_labels == 2


def test_int_labels_sort_numerically(tmp_path):
    rows = [{"text": str(i), "label": lab} for i, lab in enumerate([10, 2, 1])]
    tr = write(tmp_path / "t.jsonl", "\n".join(json.dumps(r) for r in rows))
    c = load_files("classification", tr)
    assert c.label_names == ["1", "2", "10"]
    assert [r["label"] for r in c["train"]] == [2, 1, 0]


def test_unseen_label_names_file_and_line(tmp_path):
    tr = write(tmp_path / "train.tsv", "pos\tgood\nneg\tbad\n")
    te = write(tmp_path / "test.tsv", "pos\tfine\nmaybe\twhat\n")
    with pytest.raises(DataError, match=r"test\.tsv:2: label 'maybe' is not in the training labels"):
        load_files("classification", tr, test=te)


def test_labels_are_stripped_and_labels_equal_but_for_case_are_refused_naming_both(tmp_path):
    tr = write(tmp_path / "train.tsv", "pos\tgood\nneg \tbad\n pos\tfine\nneg\tworse\n")
    c = load_files("classification", tr)
    assert c.label_names == ["neg", "pos"] and [r["label"] for r in c["train"]] == [1, 0, 1, 0]
    bad = write(tmp_path / "bad.tsv", "pos\tgood\nneg\tbad\nPos \tfine\n")
    with pytest.raises(DataError, match=r"bad\.tsv:3: label 'Pos' differs from 'pos' \(.*bad\.tsv:1\) only by case"):
        load_files("classification", bad)
    te = write(tmp_path / "test.tsv", "NEG\tbad\n")  # across splits too: one label set
    with pytest.raises(DataError, match=r"test\.tsv:1: label 'NEG' differs from 'neg' \(.*train\.tsv:2\) only by case"):
        load_files("classification", tr, test=te)


def test_regression_labels_must_be_finite(tmp_path):
    for i, value in enumerate(("nan", "inf", "-Infinity")):
        bad = write(tmp_path / f"b{i}.tsv", f"0.5\ta\n{value}\tb\n")
        with pytest.raises(DataError, match=rf"b{i}\.tsv:2: label '{value}' is not a finite number"):
            load_files("regression", bad)
    bad = write(tmp_path / "b.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": NaN}\n')
    with pytest.raises(DataError, match=r"b\.jsonl:2: label nan is not a finite number"):
        load_files("regression", bad)


def test_a_data_path_that_is_a_folder_says_so(tmp_path):
    (tmp_path / "train.tsv").mkdir()
    with pytest.raises(DataError, match=r"train\.tsv: a folder, not a file"):
        load_files("classification", tmp_path / "train.tsv")


def test_missing_jsonl_column(tmp_path):
    tr = write(tmp_path / "t.jsonl", json.dumps({"en": "a", "de": "b"}) + "\n" + json.dumps({"en": "c"}) + "\n")
    with pytest.raises(DataError, match=r"t\.jsonl:2: missing field 'de'; fields present: en"):
        load_files("translation", tr, source_column="en", target_column="de")


def test_regression_and_text_pair_tsv(tmp_path):
    tr = write(tmp_path / "t.tsv", "0.5\ta\tb\n3\tc\td\n")
    c = load_files("regression", tr)
    assert c["train"] == [{"label": 0.5, "text": "a", "text_pair": "b"}, {"label": 3.0, "text": "c", "text_pair": "d"}]
    bad = write(tmp_path / "b.tsv", "x\ta\n")
    with pytest.raises(DataError, match=r"b\.tsv:1: label 'x' is not a number"):
        load_files("regression", bad)


def test_dialogue_turns_column_and_wrong_extension(tmp_path):
    tr = write(tmp_path / "c.jsonl", json.dumps({"turns": ["hi", "hello", "bye"]}) + "\n")
    c = load_files("dialogue", tr, turns_column="turns", max_history=None)
    assert c["train"] == [{"source": "hi", "target": "hello"}, {"source": f"hi{TURN_SEP}hello", "target": "bye"}]
    with pytest.raises(DataError, match=r"c\.tsv: language modelling reads .txt or .jsonl files, not .tsv"):
        load_files("lm", write(tmp_path / "c.tsv", "a\tb\n"))
    with pytest.raises(DataError, match=r"unsupported file type '.csv'"):
        load_files("translation", write(tmp_path / "x.csv", "a,b\n"))


def test_unknown_task_and_limit(tmp_path):
    tr = write(tmp_path / "t.txt", "a\n\nb\n\nc\n")
    with pytest.raises(ValueError, match="unknown task 'qa'; allowed: lm, translation"):
        load_files("qa", tr)
    c = load_files("lm", tr, limit=2)
    assert c["train"] == ["a", "b"] and c.texts() == ["a", "b"]


# ----------------------------------------------------------------------------- built-in corpora

def test_unknown_corpus_lists_names():
    with pytest.raises(DataError, match="unknown corpus 'wiki'; built-in corpora: sotu, bible-en-es"):
        load_corpus("wiki")


def test_env_var_root_wins_and_missing_env_folder(tmp_path, monkeypatch):
    d = tmp_path / "lm" / "sotu"
    d.mkdir(parents=True)
    write(d / "train.txt", "= 1 A =\nalpha\n")
    write(d / "valid.txt", "= 2 B =\nbeta\n")
    monkeypatch.setenv("SYNTHESIZER_DATA", str(tmp_path))
    c = load_corpus("sotu", ("train", "valid"))
    assert c["train"] == ["alpha"] and c["valid"] == ["beta"] and c.origin == f"{d} (from $SYNTHESIZER_DATA)"
    with pytest.raises(DataError, match=r"test\.txt: no such file"):
        load_corpus("sotu")
    monkeypatch.setenv("SYNTHESIZER_DATA", str(tmp_path / "missing"))
    with pytest.raises(DataError, match="SYNTHESIZER_DATA=.*missing: no such folder"):
        load_corpus("sotu")


def test_packaged_subset_is_never_taken_silently(monkeypatch, tmp_path):
    # without the shared data a named corpus is an error naming where it looked and the subset's own name;
    # the subset is read only when asked for by that name
    monkeypatch.delenv("SYNTHESIZER_DATA", raising=False)
    monkeypatch.setattr(sources, "_REPO_ROOT", tmp_path / "a" / "b")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match=r"corpus 'sotu' not found; looked in: nowhere .*data\.corpus=sotu-subset"):
        load_corpus("sotu")
    c = load_corpus("sotu-subset")
    assert "packaged subset" in c.origin
    assert [len(c[s]) for s in ("train", "valid", "test")] == [84, 10, 10]
    assert c["test"][0].startswith("Mr. Speaker")
    with pytest.raises(DataError, match="corpus 'spam' not found; looked in: .*SYNTHESIZER_DATA"):
        load_corpus("spam")


def test_packaged_corpora_are_small():
    total = sum(p.stat().st_size for p in PACKAGE_CORPORA.rglob("*") if p.is_file())
    assert total < 4_000_000
    assert (PACKAGE_CORPORA / "README.md").is_file()


@needs_shared
@pytest.mark.parametrize("name,task,sizes,first_valid", [
    ("sotu", "lm", (213, 10, 10), None),
    ("bible-en-es", "translation", (28135, 1138, 1667), None),
    ("libreoffice-en-de", "translation", (32492, 1385, 1146), None),
    ("debian-descriptions", "summarization", (42539, 1359, 1342), None),
    ("rotten-tomatoes", "classification", (10273, 1253, 1226), None),
    ("spam", "classification", (4771, 538, 587), None),
])
def test_shared_corpora_sizes(name, task, sizes, first_valid, monkeypatch):
    monkeypatch.setenv("SYNTHESIZER_DATA", str(SHARED))
    c = load_corpus(name)
    assert c.task == task
    assert tuple(len(c[s]) for s in ("train", "valid", "test")) == sizes
    if task == "classification":
        labels = {"rotten-tomatoes": ["negative", "positive"], "spam": ["ham", "spam"]}[name]
        assert c.label_names == labels
        assert {r["label"] for r in c["train"]} == {0, 1}


@needs_shared
def test_shared_sotu_and_chitchat_content(monkeypatch):
    monkeypatch.setenv("SYNTHESIZER_DATA", str(SHARED))
    sotu = load_corpus("sotu")
    assert sotu["train"][0].startswith("Fellow-Citizens of the Senate")
    assert not any(d.startswith("= ") for d in sotu["train"])
    chat = load_corpus("chitchat", ("valid",), max_history=None)
    turns = [json.loads(line)["turns"] for line in (SHARED / "dialogue/chitchat/valid.jsonl").open(encoding="utf-8")]
    assert len(chat["valid"]) == sum(len(t) - 1 for t in turns) == 5922
    assert chat["valid"][0] == {"source": "Hey whats up?", "target": "Hello! how are you?"}
    assert chat["valid"][2]["source"] == TURN_SEP.join(turns[0][:3])


def test_corpus_rejects_unknown_task_and_split():
    with pytest.raises(ValueError, match="unknown task 'x'"):
        Corpus("n", "x")
    c = Corpus("n", "translation", {"train": [{"source": "a", "target": "b"}]})
    assert c.texts() == ["a", "b"]
    with pytest.raises(KeyError, match="no split 'test'; it has: train"):
        c["test"]
    assert records.SPLITS == ("train", "valid", "test") and set(BUILTIN) >= {"sotu", "chitchat"}


# ----------------------------------------------------------------------------- byte-order marks, UTF-8, field counts

BOM = "\ufeff"


def write_maybe_gz(path: Path, text: str, gz: bool) -> Path:
    """Write UTF-8 `text` to `path` (`path` + ".gz", gzipped, when `gz`)."""
    if not gz:
        return write(path, text)
    path = path.with_name(path.name + ".gz")
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(text)
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_bom_in_classification_tsv_is_not_part_of_the_label(tmp_path, gz):
    rows = "negative\tdull\npositive\tgreat\nnegative\tslow\n"
    tr = write_maybe_gz(tmp_path / "train.tsv", BOM + rows, gz)
    va = write_maybe_gz(tmp_path / "valid.tsv", rows, gz)
    c = load_files("classification", tr, va)  # a BOM in train only: no phantom class "\ufeffnegative"
    assert c.label_names == ["negative", "positive"]
    assert [r["label"] for r in c["train"]] == [r["label"] for r in c["valid"]] == [0, 1, 0]
    splits = [write_maybe_gz(tmp_path / f"{s}2.tsv", BOM + rows, gz) for s in ("train", "valid", "test")]
    c = load_files("classification", *splits)  # a BOM in every split: valid data, not a label error
    assert c.label_names == ["negative", "positive"]
    assert [r["label"] for r in c["test"]] == [0, 1, 0] and c["train"][0]["text"] == "dull"


@pytest.mark.parametrize("gz", [False, True])
def test_bom_in_txt_and_jsonl(tmp_path, gz):
    docs = read_documents(write_maybe_gz(tmp_path / "a.txt", BOM + "= 1 A =\nfirst\n\nsecond\n", gz))
    assert docs == ["first", "second"]
    docs = read_documents(write_maybe_gz(tmp_path / "b.txt", BOM + "plain first line\n", gz))
    assert docs == ["plain first line"]
    p = write_maybe_gz(tmp_path / "c.jsonl", BOM + json.dumps({"text": "x", "label": "y"}) + "\n", gz)
    assert read_jsonl(p) == [(1, {"text": "x", "label": "y"})]


@pytest.mark.parametrize("gz", [False, True])
def test_invalid_utf8_names_file_and_line(tmp_path, gz):
    good = b"= 1 A =\r\nfine\rstill fine\n" + "caf\u00e9 ok\n".encode("utf-8")
    p = tmp_path / ("x.txt.gz" if gz else "x.txt")
    data = good + b"bad \xff byte\n"
    p.write_bytes(gzip.compress(data) if gz else data)
    # CRLF, a lone CR and LF each end a line, as in text mode: the bad byte is on line 5
    with pytest.raises(DataError, match=r"x\.txt(\.gz)?:5: not valid UTF-8 \(invalid start byte 0xff\)"):
        read_documents(p)
    p.write_bytes(gzip.compress(good) if gz else good)
    assert read_documents(p) == ["fine\nstill fine\ncaf\u00e9 ok"]


def test_three_fields_in_a_single_text_task_is_an_error(tmp_path):
    tr = write(tmp_path / "train.tsv", "pos\tgood\nneg\tbad\tworse\n")
    with pytest.raises(DataError, match=r"train\.tsv:2: expected 2 tab-separated fields \(label, text\), got 3; "
                                        r"its first line has 2 fields, so this is a single-text task.*"
                                        r"declared with data\.columns: \{text_pair_column: text_pair\}"):
        load_files("classification", tr)
    tr = write(tmp_path / "train.tsv", "pos\tgood\nneg\tbad\n")
    va = write(tmp_path / "valid.tsv", "pos\tfine\tdandy\n")  # every line of valid has 3: still not a pair task
    with pytest.raises(DataError, match=r"valid\.tsv:1: expected 2 .* got 3; the train split \(.*train\.tsv\) "
                                        r"holds single texts"):
        load_files("classification", tr, va)
    with pytest.raises(DataError, match=r"train\.tsv:1: expected 3 tab-separated fields \(label, text, text_pair\), "
                                        r"got 2; pair=True was given"):
        load_files("classification", tr, pair=True)


def test_builtin_single_text_corpus_rejects_three_fields(tmp_path, monkeypatch):
    d = tmp_path / "classification" / "spam"
    d.mkdir(parents=True)
    for split in ("train", "valid", "test"):  # consistent 3-field lines: still an error, spam is single-text
        write(d / f"{split}.tsv", "ham\thello\tthere\n")
    monkeypatch.setenv("SYNTHESIZER_DATA", str(tmp_path))
    with pytest.raises(DataError, match=r"spam/train\.tsv:1: expected 2 .* got 3; corpus 'spam' holds single texts"):
        load_corpus("spam")


def test_text_pair_task_needs_three_fields_on_every_line(tmp_path):
    tr = write(tmp_path / "train.tsv", "yes\ta\tb\nno\tc\n")
    with pytest.raises(DataError, match=r"train\.tsv:2: expected 3 tab-separated fields \(label, text, text_pair\), "
                                        r"got 2; its first line has 3 fields, so this is a text-pair task"):
        load_files("classification", tr)
    two = write(tmp_path / "two.tsv", "yes\ta\n")
    with pytest.raises(DataError, match=r"two\.tsv:1: expected 3 .* got 2; text_pair_column='q' is set"):
        load_files("classification", two, text_pair_column="q")
    pairs = write(tmp_path / "pairs.tsv", "yes\ta\tb\nno\tc\td\n")
    c = load_files("classification", pairs, write(tmp_path / "v.tsv", "no\te\tf\n"), text_pair_column="q")
    assert c["valid"] == [{"label": 0, "text": "e", "text_pair": "f"}]
    js = write(tmp_path / "p.jsonl", json.dumps({"text": "a", "text_pair": "b", "label": 1}) + "\n")
    assert load_files("classification", js, pair=True)["train"] == [{"text": "a", "text_pair": "b", "label": 0}]
    with pytest.raises(ValueError, match="pair=False contradicts text_pair_column='q'"):
        load_files("classification", pairs, pair=False, text_pair_column="q")


@pytest.mark.parametrize("via", ["env", "next_to_repo"])
def test_sotu_subset_reads_the_package_whatever_other_copy_exists(tmp_path, monkeypatch, via):
    shared = tmp_path / "shared" / "data"
    d = shared / "lm" / "sotu"
    d.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        write(d / f"{split}.txt", f"= 1790 Someone =\nanother copy, {split}\n")
    monkeypatch.delenv("SYNTHESIZER_DATA", raising=False)
    if via == "env":
        monkeypatch.setenv("SYNTHESIZER_DATA", str(shared))
    else:
        monkeypatch.setattr(sources, "_REPO_ROOT", tmp_path / "repo")  # ../shared/data next to the repository
    other, shipped = load_corpus("sotu"), load_corpus("sotu-subset")
    assert other["train"] == ["another copy, train"]
    assert other.origin == f"{d} " + ("(from $SYNTHESIZER_DATA)" if via == "env" else "(shared data folder)")
    assert shipped["train"][0] == read_documents(PACKAGE_CORPORA / "lm" / "sotu" / "train.txt")[0]
    assert len(shipped["train"]) == 84
    assert shipped.origin == f"{PACKAGE_CORPORA / 'lm' / 'sotu'} (packaged subset shipped with synthesizer)"
