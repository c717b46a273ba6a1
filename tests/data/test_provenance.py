import gzip

from synthesizer.data.provenance import data_differences, data_provenance, file_hash, split_hash
from synthesizer.data.records import Corpus
from synthesizer.data.sources import load_files


def write(folder, name, text, zipped=False):
    path = folder / (name + (".gz" if zipped else ""))
    if zipped:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def test_split_hash_is_of_the_parsed_data_not_the_file(tmp_path):
    rows = "a b c\tc b a\nd e\te d\n"
    paths = {}
    for zipped in (False, True):
        folder = tmp_path / ("gz" if zipped else "plain")
        folder.mkdir()
        paths[zipped] = [write(folder, f"{s}.tsv", rows, zipped) for s in ("train", "valid", "test")]
    plain = data_provenance(load_files("translation", *paths[False], name="toy"))
    zipped = data_provenance(load_files("translation", *paths[True], name="toy"))
    assert plain["splits"] == zipped["splits"] and plain["name"] == "toy" and plain["origin"]
    assert plain["splits"]["train"]["examples"] == 2 and len(plain["splits"]["train"]["sha256"]) == 64
    assert data_differences(plain, zipped) == []


def test_any_change_of_text_order_or_labels_changes_the_hash():
    base = [{"source": "a", "target": "b"}, {"source": "c", "target": "d"}]
    h = split_hash(base)
    assert split_hash([dict(reversed(list(r.items()))) for r in base]) == h  # key order is not content
    assert split_hash(base[::-1]) != h and split_hash(base[:1]) != h
    assert split_hash([{"source": "a", "target": "B"}, base[1]]) != h
    assert split_hash(["x"], ["no", "yes"]) != split_hash(["x"], ["yes", "no"])
    one = data_provenance(Corpus("c", "translation", {"train": base, "valid": base, "test": base}))
    two = data_provenance(Corpus("c", "translation", {"train": base[:1], "valid": base, "test": base}))
    assert data_differences(one, two) == ["the train split (content hash, 2 examples before, 1 now)"]


def test_file_hash_is_the_sha256_of_the_bytes(tmp_path):
    import hashlib

    (tmp_path / "f").write_bytes(b"tokenizer")
    assert file_hash(tmp_path / "f") == hashlib.sha256(b"tokenizer").hexdigest()
