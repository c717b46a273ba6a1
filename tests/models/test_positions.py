"""Models with each position scheme (ModelConfig.positions): decoding equals the full forward, the
state_dict round-trips, the shared bias is one table per stack, and a scheme reaches only the
dot-product component."""

from __future__ import annotations

import pytest
import torch

from synthesizer.models import Classifier, EncoderDecoder, LanguageModel, ModelConfig
from synthesizer.models.generation import generate
from tests.tolerances import MODEL, assert_close_f32

SCHEMES = ["learned", "sinusoidal", "rope", "relative", "alibi", "none"]


def tiny(**changes):
    base = dict(vocab_size=50, d_model=32, n_heads=4, n_layers=2, max_len=16, dropout=0.0, eos_id=3,
                tie_embeddings=False)
    return ModelConfig(**{**base, **changes})


def sharpen(model):
    with torch.no_grad():
        model.head.weight.mul_(20.0)
    return model


@pytest.mark.parametrize("kind", ["vanilla", "random+vanilla", "dense"])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_lm_cached_generation_equals_the_full_forward(scheme, kind):
    torch.manual_seed(0)
    lm = sharpen(LanguageModel(tiny(positions=scheme, attention=kind))).eval()
    cached = generate(lm, [[5, 6, 7], [8, 9]], 8, return_logits=True, stop_at_eos=False)
    full = generate(lm, [[5, 6, 7], [8, 9]], 8, return_logits=True, stop_at_eos=False, use_cache=False)
    assert torch.equal(cached.tokens, full.tokens)
    assert_close_f32(cached.logits, full.logits, f"{scheme} {kind}: cached against full", MODEL)


@pytest.mark.parametrize("scheme", ["rope", "relative", "alibi"])
def test_seq2seq_cached_generation_equals_the_full_forward(scheme):
    torch.manual_seed(1)
    model = sharpen(EncoderDecoder(tiny(positions=scheme, attention="dense+vanilla", n_layers=1))).eval()
    src = torch.randint(4, 50, (2, 9))
    cached = generate(model, src, 8, return_logits=True, stop_at_eos=False)
    full = generate(model, src, 8, return_logits=True, stop_at_eos=False, use_cache=False)
    assert torch.equal(cached.tokens, full.tokens)
    assert_close_f32(cached.logits, full.logits, f"{scheme}: cached against full", MODEL)


def test_the_relative_bias_is_one_table_per_stack_shared_by_its_layers():
    lm = LanguageModel(tiny(positions="relative", n_layers=3))
    assert lm.position_bias.causal and lm.position_bias.table.weight.shape == (32, 4)
    assert lm.param_counts()["position_bias"] == 32 * 4
    s2s = EncoderDecoder(tiny(positions="relative"))
    assert not s2s.encoder_position_bias.causal and s2s.decoder_position_bias.causal
    assert s2s.param_counts()["position_bias"] == 2 * 32 * 4
    assert LanguageModel(tiny(positions="alibi")).param_counts().get("position_bias", 0) == 0
    # every layer's logits move when the one table changes
    x = torch.randint(4, 50, (1, 10))
    before = lm(x)
    with torch.no_grad():
        lm.position_bias.table.weight.add_(1.0 * torch.arange(32)[:, None])
    assert not torch.allclose(before, lm(x))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_state_dict_round_trips(scheme):
    torch.manual_seed(0)
    a = LanguageModel(tiny(positions=scheme, attention="random+vanilla")).eval()
    b = LanguageModel(tiny(positions=scheme, attention="random+vanilla")).eval()
    b.load_state_dict(a.state_dict())
    x = torch.randint(4, 50, (2, 12))
    assert torch.equal(a(x), b(x))


def test_absolute_embeddings_only_for_absolute_schemes():
    for scheme in SCHEMES:
        embed = LanguageModel(tiny(positions=scheme)).embed
        assert (embed.position is not None) == (scheme == "learned")
        assert (embed.sinusoid is not None) == (scheme == "sinusoidal")


def test_a_scheme_reaches_the_dot_product_component_only():
    # a pure synthesizer or a baseline takes no scheme: with rope the model has no positions but its own
    for kind in ("random", "dense", "none"):
        lm = LanguageModel(tiny(positions="rope", attention=kind))
        assert lm.position_bias is None
        assert getattr(lm.blocks[0].attn, "positions", "none") == "none"
    assert LanguageModel(tiny(positions="relative", attention="random")).position_bias is None
    assert LanguageModel(tiny(positions="rope", attention="random+vanilla")).blocks[1].attn.positions == "rope"


def test_a_classifier_with_relative_positions_takes_the_pretrained_encoders_bias():
    torch.manual_seed(0)
    source = EncoderDecoder(tiny(positions="relative"))
    clf = Classifier(tiny(positions="relative"))
    clf.load_encoder(source)
    assert torch.equal(clf.position_bias.table.weight, source.encoder_position_bias.table.weight)
    with pytest.raises(ValueError, match="different position schemes"):
        Classifier(tiny(positions="alibi")).load_encoder(source)


def test_unknown_positions_lists_the_allowed_ones():
    with pytest.raises(ValueError, match="learned, sinusoidal, rope, relative, alibi, none"):
        tiny(positions="rotary")


@pytest.mark.parametrize("kind", ["vanilla", "random", "dense+vanilla", "none"])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_left_padded_prompt_with_its_positions_decodes_as_the_prompt_alone(scheme, kind):
    torch.manual_seed(0)
    lm = LanguageModel(tiny(positions=scheme, attention=kind)).eval()
    ids = torch.randint(4, 50, (1, 6))
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), ids], 1)
    mask = torch.tensor([[True] * 3 + [False] * 6])
    positions = torch.tensor([[0, 0, 0, *range(6)]])
    with torch.no_grad():
        alone = lm(ids)
        assert_close_f32(lm(padded, mask, positions=positions)[:, 3:], alone, f"{scheme} {kind}: left-padded", MODEL)
        caches = lm.new_caches()
        steps = [lm(padded[:, :5], mask[:, :5], caches, positions=positions[:, :5])]
        steps += [lm(padded[:, t : t + 1], None, caches) for t in range(5, 9)]  # on from each row's last position
    assert_close_f32(torch.cat(steps, 1)[:, 3:], alone, f"{scheme} {kind}: decoding after left padding", MODEL)


def test_a_mixer_without_per_token_positions_says_so():
    lm = LanguageModel(tiny(attention="lightconv", positions="learned"))
    with pytest.raises(ValueError, match="LightweightConv mixer takes no per-token positions"):
        lm(torch.randint(4, 50, (1, 4)), positions=torch.tensor([[0, 1, 2, 3]]))
