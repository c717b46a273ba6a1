import json

import pytest

from synthesizer.data.records import TURN_SEP, DataError
from synthesizer.data.tokenizer import SPECIAL_TOKENS, Tokenizer

TEXTS = [
    "The state of the Union is strong.",
    "Fellow citizens, the economy grows and the people prosper.",
    "Ünïcode — café, naïve, 你好; tabs\tand  double  spaces.",
    "We will not tire, we will not falter, and we will not fail.",
] * 20


@pytest.fixture(scope="module")
def tok():
    return Tokenizer.train(TEXTS, vocab_size=400)


def test_special_ids_and_vocab(tok):
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id, tok.sep_id, tok.cls_id) == (0, 1, 2, 3, 4, 5)
    assert [tok.token(i) for i in range(6)] == list(SPECIAL_TOKENS)
    assert 262 < tok.vocab_size <= 400 and len(tok) == tok.vocab_size


@pytest.mark.parametrize("text", TEXTS[:4] + ["unseen wörds ∑ 🙂 and\nnewlines", "  leading space", ""])
def test_round_trip_is_exact(tok, text):
    ids = tok.encode(text)
    assert tok.unk_id not in ids
    assert tok.decode(ids) == text


def test_bos_eos_and_special_tokens_dropped_on_decode(tok):
    ids = tok.encode("the people", add_bos=True, add_eos=True)
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    assert tok.decode(ids + [tok.pad_id, tok.pad_id]) == "the people"
    hist = tok.encode(f"hi{TURN_SEP}there")
    assert tok.sep_id in hist  # the turn separator is one special token
    assert tok.decode(hist) == "hi  there"


def test_merges_compress(tok):
    text = "the people of the Union"
    assert len(tok.encode(text)) < len(text.encode("utf-8"))


def test_batch_matches_single(tok):
    texts = ["a b c", "the Union", "café"]
    assert tok.encode_batch(texts, add_eos=True) == [tok.encode(t, add_eos=True) for t in texts]
    assert tok.decode_batch(tok.encode_batch(texts)) == texts


def test_deterministic_training(tok):
    again = Tokenizer.train(TEXTS, vocab_size=400)
    assert again._tok.to_str() == tok._tok.to_str()


def test_save_load(tok, tmp_path):
    path = tok.save(tmp_path / "ckpt")
    assert path.name == "tokenizer.json" and json.loads(path.read_text())["model"]["type"] == "BPE"
    loaded = Tokenizer.load(tmp_path / "ckpt")
    for text in TEXTS[:4]:
        assert loaded.encode(text) == tok.encode(text)
    assert (loaded.vocab_size, loaded.eos_id) == (tok.vocab_size, tok.eos_id)
    with pytest.raises(DataError, match="nowhere.*no such file"):
        Tokenizer.load(tmp_path / "nowhere")


def test_bad_arguments():
    with pytest.raises(ValueError, match="vocab_size must be >= 262"):
        Tokenizer.train(TEXTS, vocab_size=100)
    with pytest.raises(DataError, match="empty training split"):
        Tokenizer.train([], vocab_size=300)
