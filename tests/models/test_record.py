"""models.record: hidden states and attention maps of the project's own models, on request; and the
decoding caches cut back (crop), which speculative decoding needs."""

import pytest
import torch

from synthesizer.models import Classifier, EncoderDecoder, LanguageModel, ModelConfig, record


def config(kind: str = "random", **fields) -> ModelConfig:
    return ModelConfig(vocab_size=40, d_model=16, n_heads=2, n_layers=2, max_len=12, dropout=0.0, attention=kind,
                       **fields)


@pytest.mark.parametrize("kind", ["random", "dense+vanilla"])
def test_record_gives_each_blocks_input_the_final_states_and_the_maps_it_used(kind):
    torch.manual_seed(0)
    model = LanguageModel(config(kind)).eval()
    ids = torch.randint(3, 40, (2, 7))
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[1, 5:] = True
    plain = model(ids, pad)
    with record(model, hidden_states=True, attentions=True) as seen:
        logits = model(ids, pad)
    torch.testing.assert_close(logits, plain)
    states, maps = seen.hidden_states["blocks"], seen.attentions["blocks"]
    assert len(states) == 3 and len(maps) == 2
    torch.testing.assert_close(states[-1], model.hidden_states(ids, pad))
    for block, state, probs in zip(model.blocks, states, maps):
        torch.testing.assert_close(probs, block.attn.attention_weights(block.ln_attn(state), pad))
    assert all(block.attn.attention_maps is None for block in model.blocks)  # nothing recorded afterwards


def test_record_covers_the_encoder_decoder_and_refuses_a_mixer_without_a_matrix():
    torch.manual_seed(0)
    model = EncoderDecoder(config()).eval()
    src, tgt = torch.randint(3, 40, (2, 6)), torch.randint(3, 40, (2, 4))
    with record(model, hidden_states=True, attentions=True) as seen:
        model(src, tgt)
    assert [len(seen.hidden_states[s]) for s in ("encoder", "decoder")] == [3, 3]
    assert seen.attentions["cross"][0].shape == (2, 2, 4, 6)
    assert torch.allclose(seen.attentions["cross"][0].sum(-1), torch.ones(2, 2, 4))
    with pytest.raises(ValueError, match=r"attention 'lightconv' \(LightweightConv\) has no attention matrix"):
        with record(Classifier(config("lightconv")), attentions=True):
            pass


@pytest.mark.parametrize("kind", ["random", "dense+vanilla", "none"])
def test_a_cache_cut_back_decodes_as_one_that_never_held_the_positions(kind):
    torch.manual_seed(0)
    model = LanguageModel(config(kind)).eval()
    ids = torch.randint(3, 40, (2, 8))
    caches, fresh = model.new_caches(), model.new_caches()
    model(ids, caches=caches)
    model(ids[:, :5], caches=fresh)
    for cache in caches:
        cache.crop(5)
    assert [c.length for c in caches] == [5, 5]
    torch.testing.assert_close(model(ids[:, 5:], caches=caches), model(ids[:, 5:], caches=fresh))
    with pytest.raises(ValueError, match=r"crop length must be an int in \[0, 8\]"):  # 5 kept + 3 decoded
        caches[0].crop(9)
