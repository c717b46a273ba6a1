"""Derived corpora: the Bible translation-pair and the Debian synopsis-pair tasks (balanced, sound negatives,
no leak across splits)."""

import pytest

from synthesizer.data.derived import DERIVED, NEIGHBOURS, synopsis_pairs, translation_pairs
from synthesizer.data.provenance import data_provenance
from synthesizer.data.records import DataError
from synthesizer.data.sources import load_corpus


def rows(targets):
    return [{"source": f"en {i}", "target": t} for i, t in enumerate(targets)]


def test_one_positive_and_one_nearby_negative_per_verse():
    split = rows(["aaaa", "bb", "cccc", "dddddddddddd", "eeee", "ff", "g", "hhhh", "iiii", "jj", "k", "llll", "mmm"])
    out = translation_pairs(split)
    assert len(out) == 2 * len(split)
    assert [r["label"] for r in out] == [1, 0] * len(split)
    for i, (pos, neg) in enumerate(zip(out[::2], out[1::2])):
        assert pos == {"text": f"en {i}", "text_pair": split[i]["target"], "label": 1}
        assert neg["text"] == f"en {i}" and neg["text_pair"] != split[i]["target"]
        j = next(k for k, r in enumerate(split) if r["target"] == neg["text_pair"])
        assert 0 < abs(j - i) <= NEIGHBOURS
    # among the near verses, the closest Spanish length wins, then the nearer verse
    assert out[1]["text_pair"] == "cccc"            # verse 0: "cccc" (2 away) ties "eeee" (4 away) on length
    assert out[7]["text_pair"] == "cccc"            # verse 3: "cccc" and "eeee" tie on length and distance: the earlier


def test_a_repeated_target_is_never_its_own_negative():
    out = translation_pairs(rows(["same", "same", "same", "other"]))
    assert all(r["text_pair"] == "other" for r in out[1::2][:3])
    with pytest.raises(ValueError, match="at least 2 pairs"):
        translation_pairs(rows(["only"]))


def test_bible_pairs_from_the_shared_data():
    try:
        corpus = load_corpus("bible-en-es-pairs")
        source = load_corpus("bible-en-es")
    except DataError as e:
        pytest.skip(f"shared data not available: {e}")
    assert corpus.task == "classification" and corpus.label_names == ["not_translation", "translation"]
    for split in ("train", "valid", "test"):
        rows_ = corpus.splits[split]
        assert len(rows_) == 2 * len(source.splits[split])
        assert sum(r["label"] for r in rows_) * 2 == len(rows_)        # balanced
        spanish = {r["target"] for r in source.splits[split]}
        assert {r["text_pair"] for r in rows_} <= spanish               # negatives from the same split only
    train_es = {r["text_pair"] for r in corpus.splits["train"]}
    assert not train_es & {r["text_pair"] for r in corpus.splits["test"]}
    # recorded like any corpus: content hashes and an origin naming the source
    prov = data_provenance(corpus)
    assert prov["name"] == "bible-en-es-pairs" and prov["origin"].startswith("derived from bible-en-es")
    # a limit derives the pairs from the first verses: the same positives, negatives from inside them
    limited = load_corpus("bible-en-es-pairs", limit=10).splits["valid"]
    assert limited[::2] == corpus.splits["valid"][:10:2]
    assert {r["text_pair"] for r in limited[1::2]} <= {r["text_pair"] for r in limited[::2]}
    assert "bible-en-es-pairs" in DERIVED


def packages(descriptions, synopses):
    return [{"source": d, "target": t} for d, t in zip(descriptions, synopses)]


def test_synopsis_pairs_take_the_negative_half_a_split_away_skipping_look_alikes():
    split = packages([f"description {i}" for i in range(6)], [f"synopsis {i}" for i in range(6)])
    out = synopsis_pairs(split)
    assert [r["label"] for r in out] == [1, 0] * 6
    assert [r["text_pair"] for r in out] == [f"description {i}" for i in range(6) for _ in (0, 1)]
    assert [r["text"] for r in out[::2]] == [f"synopsis {i}" for i in range(6)]
    assert [r["text"] for r in out[1::2]] == [f"synopsis {(i + 3) % 6}" for i in range(6)]  # a bijection here
    # package 3 repeats package 0's description and package 4 its synopsis: 0's negative is package 5
    look_alikes = packages(["d0", "d1", "d2", "d0", "d4", "d5"], ["s0", "s1", "s2", "s3", "s0", "s5"])
    assert synopsis_pairs(look_alikes)[1]["text"] == "s5"
    with pytest.raises(ValueError, match="two packages with different descriptions and synopses"):
        synopsis_pairs(packages(["same", "same"], ["a", "b"]))


def test_debian_synopsis_pairs_from_the_shared_data():
    try:
        corpus = load_corpus("debian-synopsis-pairs", splits=("valid", "test"))
        source = load_corpus("debian-descriptions", splits=("valid", "test"))
    except DataError as e:
        pytest.skip(f"shared data not available: {e}")
    assert corpus.task == "classification" and corpus.label_names == ["other_package", "synopsis"]
    for split in ("valid", "test"):
        rows_ = corpus.splits[split]
        assert len(rows_) == 2 * len(source.splits[split]) and sum(r["label"] for r in rows_) * 2 == len(rows_)
        own = {(r["target"], r["source"]) for r in source.splits[split]}
        assert all(((r["text"], r["text_pair"]) in own) == bool(r["label"]) for r in rows_)
    assert not {r["text_pair"] for r in corpus.splits["valid"]} & {r["text_pair"] for r in corpus.splits["test"]}


def test_a_limited_debian_pair_corpus_keeps_the_synopsis_side_uninformative():
    # the first N pairs of the whole split would take their negatives from its middle, so each class's
    # synopses would come from different packages; a limit derives the pairs from the first N / 2 packages
    try:
        full = load_corpus("debian-synopsis-pairs", splits=("valid",))
        limited = load_corpus("debian-synopsis-pairs", splits=("valid",), limit=400).splits["valid"]
    except DataError as e:
        pytest.skip(f"shared data not available: {e}")
    assert len(limited) == 400 and sum(r["label"] for r in limited) == 200
    assert limited[::2] == full.splits["valid"][:400:2]                      # the same positives
    positives = [r["text"] for r in limited if r["label"]]
    negatives = [r["text"] for r in limited if not r["label"]]
    # near-bijection: almost every synopsis is in both classes (was none of them before the fix)
    assert len(set(positives) & set(negatives)) >= 0.95 * len(set(positives))
    cut_negatives = {r["text"] for r in full.splits["valid"][1:400:2]}        # cutting the derived pairs instead
    assert len(cut_negatives & set(positives)) < 10
