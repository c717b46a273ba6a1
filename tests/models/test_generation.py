import pytest
import torch

from synthesizer.models import EncoderDecoder, LanguageModel, ModelConfig
from synthesizer.models.generation import beam_search, filter_logits, generate
from tests.tolerances import MODEL, assert_close_f32


PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12], [13]]
KINDS = ["vanilla", "random", "dense+vanilla"]


def tiny(kind="vanilla", **changes):
    base = dict(vocab_size=50, d_model=32, n_heads=4, n_layers=2, max_len=16, dropout=0.0, attention=kind, eos_id=3)
    return ModelConfig(**{**base, **changes})


def sharpen(model):
    """Random init gives near-uniform logits; scale the head so that choices are clear-cut."""
    with torch.no_grad():
        model.head.weight.mul_(20.0)
    return model


@pytest.fixture(scope="module", params=KINDS)
def kind(request):
    return request.param


@pytest.fixture(scope="module")
def lm(kind):
    torch.manual_seed(0)
    return sharpen(LanguageModel(tiny(kind, tie_embeddings=False))).eval()


@pytest.fixture(scope="module")
def s2s(kind):
    torch.manual_seed(1)
    model = sharpen(EncoderDecoder(tiny(kind, tie_embeddings=False, n_layers=1))).eval()
    src = torch.randint(4, 50, (3, 7))
    mask = torch.zeros(3, 7, dtype=torch.bool)
    mask[0, 5:] = True
    return model, src, mask


def test_lm_cached_equals_uncached(lm):
    cached = generate(lm, PROMPTS, 6, return_logits=True)
    full = generate(lm, PROMPTS, 6, use_cache=False, return_logits=True)
    assert torch.equal(cached.tokens, full.tokens)
    assert_close_f32(cached.logits, full.logits, "cached against uncached logits", MODEL)
    # Prompts are kept, each row gets up to 6 new tokens, rows after EOS are padding.
    for prompt, seq in zip(PROMPTS, cached.sequences()):
        assert seq[: len(prompt)] == prompt and len(seq) <= len(prompt) + 6
        assert 3 not in seq[len(prompt) : -1]


def test_lm_logits_match_the_forward_pass(lm):
    out = generate(lm, [[5, 6, 7, 8]], 5, stop_at_eos=False, return_logits=True)
    assert out.tokens.shape == (1, 9) and out.logits.shape == (1, 5, 50)  # one step per new token
    assert_close_f32(out.logits[0], lm(out.tokens)[0, 3:-1], "step logits against the forward pass", MODEL)
    assert torch.equal(out.tokens[0, 4:], out.logits[0].argmax(-1))


def test_seq2seq_cached_equals_uncached(s2s):
    model, src, mask = s2s
    cached = generate(model, src, 6, src_padding_mask=mask, return_logits=True)
    full = generate(model, src, 6, src_padding_mask=mask, use_cache=False, return_logits=True)
    assert torch.equal(cached.tokens, full.tokens)
    assert_close_f32(cached.logits, full.logits, "cached against uncached logits", MODEL)
    assert (cached.tokens[:, 0] == model.config.bos_id).all()


def test_beam_of_one_is_greedy(lm, s2s):
    greedy = generate(lm, PROMPTS, 6).sequences()
    assert beam_search(lm, PROMPTS, 6, num_beams=1).best() == greedy
    model, src, mask = s2s
    greedy = generate(model, src, 6, src_padding_mask=mask).sequences()
    assert beam_search(model, src, 6, src_padding_mask=mask, num_beams=1, length_penalty=1.0).best() == greedy


def test_beam_search_sorted_and_cache_free_equal(s2s):
    model, src, mask = s2s
    out = beam_search(model, src, 6, src_padding_mask=mask, num_beams=3)
    for hyps, scores in zip(out.sequences, out.scores):
        assert 1 <= len(hyps) <= 3 and scores == sorted(scores, reverse=True)
        assert len({tuple(h) for h in hyps}) == len(hyps)
    assert beam_search(model, src, 6, src_padding_mask=mask, num_beams=3, use_cache=False).sequences == out.sequences


def test_beam_scores_are_length_normalised_log_probs():
    torch.manual_seed(2)
    lm = sharpen(LanguageModel(tiny())).eval()
    out = beam_search(lm, [[5, 6]], 4, num_beams=2, length_penalty=0.6)
    seq, score = out.sequences[0][0], out.scores[0][0]
    with torch.no_grad():
        logp = torch.log_softmax(lm(torch.tensor([seq]))[0, :-1], dim=-1)
    total = sum(float(logp[i - 1, seq[i]]) for i in range(2, len(seq)))
    assert score == pytest.approx(total / ((5 + len(seq) - 2) / 6) ** 0.6, rel=MODEL.rtol)
    assert score >= max(out.scores[0])


def test_sampling_is_seeded_and_respects_top_k():
    torch.manual_seed(0)
    lm = LanguageModel(tiny()).eval()
    draw = lambda seed, **kw: generate(lm, PROMPTS, 6, do_sample=True, generator=torch.Generator().manual_seed(seed), **kw).tokens  # noqa: E731
    assert torch.equal(draw(0, temperature=0.7, top_p=0.9), draw(0, temperature=0.7, top_p=0.9))
    assert not torch.equal(draw(0), draw(1))
    assert torch.equal(draw(0, top_k=1), generate(lm, PROMPTS, 6).tokens)


def test_filter_logits():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.isfinite(filter_logits(logits, top_k=2)).tolist() == [[True, True, False, False]]
    assert torch.isfinite(filter_logits(logits, top_p=0.7)).tolist() == [[True, True, False, False]]
    assert torch.isfinite(filter_logits(logits, top_p=0.1)).tolist() == [[True, False, False, False]]


def test_too_long_generation():
    lm = LanguageModel(tiny())
    with pytest.raises(ValueError, match="prompt \\+ max_new_tokens = 21 positions exceeds max_len=16"):
        generate(lm, PROMPTS, 16)
    with pytest.raises(ValueError, match="prompt length 17 exceeds max_len=16"):
        generate(lm, [[5] * 17], 1)
    lm = LanguageModel(tiny(on_too_long="truncate"))
    with pytest.warns(UserWarning, match="max_len=16"):
        out = generate(lm, PROMPTS, 16, stop_at_eos=False)
    assert out.tokens.shape[1] == 16
    assert lm.training  # generation restores the caller's mode


@pytest.mark.parametrize("changes", [{"positions": "sinusoidal", "attention": "factorized_random"},
                                     {"cross_attention": "random", "attention": "factorized_dense"}])
def test_other_set_ups_cached_equals_uncached(changes):
    torch.manual_seed(3)
    model = sharpen(EncoderDecoder(tiny(tie_embeddings=False, n_layers=1, **changes))).eval()
    src = torch.randint(4, 50, (2, 9))
    cached = generate(model, src, 8, return_logits=True, stop_at_eos=False)
    full = generate(model, src, 8, return_logits=True, stop_at_eos=False, use_cache=False)
    assert torch.equal(cached.tokens, full.tokens)
    assert_close_f32(cached.logits, full.logits, "cached against uncached logits", MODEL)


@pytest.mark.parametrize("search", [generate, beam_search])
def test_an_empty_source_is_a_clear_value_error(s2s, search):
    model, src, _ = s2s
    with pytest.raises(ValueError, match=r"source ids of shape \(1, 0\) hold no token"):
        search(model, src[:1, :0], 4, src_padding_mask=torch.zeros(1, 0, dtype=torch.bool))
    mask = torch.zeros_like(src, dtype=torch.bool)
    mask[1] = True  # the second source is all padding
    with pytest.raises(ValueError, match=r"source row\(s\) 1 are all padding"):
        search(model, src, 4, src_padding_mask=mask)
    with pytest.raises(ValueError, match="does not match"):
        search(model, src, 4, src_padding_mask=mask[:, :3])


def test_an_empty_lm_prompt_is_a_clear_value_error(lm):
    with pytest.raises(ValueError, match="every prompt needs at least one token.*EOS"):
        generate(lm, [[5, 6], []], 4)
