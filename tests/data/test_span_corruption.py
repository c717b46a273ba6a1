"""T5-style span corruption: sentinels, noise density, span lengths, exact reconstruction, determinism."""

import random
import statistics

import pytest

from synthesizer.data.span_corruption import (N_SENTINELS, reconstruct, sentinel_tokens, span_corrupt,
                                              span_lengths)
from synthesizer.data.tokenizer import Tokenizer

SENTINELS = list(range(1000, 1000 + N_SENTINELS))  # ids outside the texts' ids


def ids_of(n):
    return list(range(n))


def spans_of(targets):
    """The noise spans listed by a target (between consecutive sentinels)."""
    spans, cur = [], None
    for t in targets:
        if t in SENTINELS:
            if cur is not None:
                spans.append(cur)
            cur = []
        else:
            cur.append(t)
    return spans


@pytest.mark.parametrize("n", [1, 2, 3, 4, 10, 57, 200])
def test_sentinels_in_order_once_each_and_exact_reconstruction(n):
    ids = ids_of(n)
    src, tgt = span_corrupt(ids, SENTINELS, random.Random(n))
    in_src = [t for t in src if t in SENTINELS]
    in_tgt = [t for t in tgt if t in SENTINELS]
    k = len(in_src)
    assert k >= 1
    assert in_src == SENTINELS[:k]                  # <extra_id_0>, <extra_id_1>, ... in order, once each
    assert in_tgt == SENTINELS[: k + 1]             # the target closes with the next sentinel
    assert tgt[0] == SENTINELS[0] and tgt[-1] == SENTINELS[k]
    assert all(spans_of(tgt))                       # every span holds at least one token
    assert reconstruct(src, tgt, SENTINELS) == ids


def test_short_texts():
    assert span_corrupt([7], SENTINELS, random.Random(0)) == ([SENTINELS[0]], [SENTINELS[0], 7, SENTINELS[1]])
    for n in (2, 3):
        for seed in range(20):
            src, tgt = span_corrupt(ids_of(n), SENTINELS, random.Random(seed))
            assert len(spans_of(tgt)) == 1 and len(spans_of(tgt)[0]) == 1  # round(n * 0.15) = 0 -> 1 noise token
            assert src[0] != SENTINELS[0]  # a kept token comes first
            assert reconstruct(src, tgt, SENTINELS) == ids_of(n)


def test_noise_density_within_rounding_on_long_inputs():
    for n in (100, 333, 512, 1000):
        for seed in range(5):
            kept, noise = span_lengths(n, random.Random(seed))
            assert sum(kept) + sum(noise) == n
            assert sum(noise) == round(n * 0.15)
            assert abs(sum(noise) / n - 0.15) <= 0.5 / n
            assert len(noise) == round(round(n * 0.15) / 3)


def test_mean_span_length_is_about_3_over_many_draws():
    rng = random.Random(0)
    lengths = [length for _ in range(2000) for length in span_lengths(rng.randint(20, 300), rng)[1]]
    assert statistics.fmean(lengths) == pytest.approx(3.0, abs=0.1)
    assert min(lengths) >= 1 and max(lengths) > 3  # spans vary in length (random segmentation)


def test_deterministic_given_a_seed():
    ids = ids_of(120)
    a = span_corrupt(ids, SENTINELS, random.Random("seed:3"))
    assert a == span_corrupt(ids, SENTINELS, random.Random("seed:3"))
    assert any(span_corrupt(ids, SENTINELS, random.Random(f"seed:{s}")) != a for s in range(4, 10))


def test_too_many_spans_for_the_sentinels():
    with pytest.raises(ValueError, match="more than the 3 sentinels allow"):
        span_corrupt(ids_of(100), SENTINELS[:3], random.Random(0))


def test_input_and_target_give_back_the_text_exactly():
    text = "In the beginning God created the heaven and the earth.  Y dijo Dios: Sea la luz: y fué la luz."
    tok = Tokenizer.train([text] * 3, vocab_size=400, min_frequency=1, extra_special=sentinel_tokens())
    sentinels = tok.special_ids(sentinel_tokens())
    assert sentinels == list(range(6, 6 + N_SENTINELS))
    ids = tok.encode(text)
    for seed in range(10):
        src, tgt = span_corrupt(ids, sentinels, random.Random(seed))
        assert tok.decode(reconstruct(src, tgt, sentinels)) == text
        assert tok.decode(src) != text  # the sentinels' spans are missing from the input


def test_other_tokenizers_have_no_sentinels():
    tok = Tokenizer.train(["a b c"] * 3, vocab_size=300, min_frequency=1)
    assert tok.special_ids(sentinel_tokens()) == []
    with pytest.raises(ValueError, match=r"vocab_size must be >= 362 \(6 special tokens \+ 100 extra special"):
        Tokenizer.train(["a b c"], vocab_size=300, extra_special=sentinel_tokens())
