"""comparison.attention_maps: each layer's map is the attention its forward pass used, with every position
scheme (a relative or ALiBi bias is handed to the layers by their stack), in a decoder and an encoder-decoder."""

import pytest
import torch

from synthesizer.comparison.attention_maps import attention_maps
from synthesizer.models import EncoderDecoder, LanguageModel, ModelConfig, record


@pytest.mark.parametrize("positions", ["learned", "rope", "relative", "alibi"])
@pytest.mark.parametrize("model_class", [LanguageModel, EncoderDecoder], ids=["lm", "encoder-decoder"])
def test_each_map_is_the_attention_the_forward_pass_used(model_class, positions):
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=40, d_model=16, n_heads=2, n_layers=2, max_len=12, dropout=0.0,
                         attention="dense+vanilla", positions=positions)
    model = model_class(config).eval()
    with torch.no_grad():  # a bias far from zero, so that a map read without it differs
        for name, parameter in model.named_parameters():
            if "position_bias" in name:
                parameter.normal_(0.0, 3.0)
    ids = list(range(3, 13))
    maps = attention_maps(model, ids, n=8, digits=6)
    tensor = torch.tensor([ids[:8]])
    with record(model, attentions=True) as seen:
        model(tensor, tensor) if model_class is EncoderDecoder else model(tensor)
    used = [probs for stack, per_layer in seen.attentions.items() if stack != "cross" for probs in per_layer]
    assert len(maps) == len(used) == (4 if model_class is EncoderDecoder else 2)
    for got, want in zip(maps, used):
        torch.testing.assert_close(torch.tensor(got["heads"]), want[0], atol=1e-5, rtol=0)


def test_reading_the_maps_inside_a_recording_leaves_the_recording_as_it_was():
    torch.manual_seed(0)
    model = LanguageModel(ModelConfig(vocab_size=40, d_model=16, n_heads=2, n_layers=2, max_len=12, dropout=0.0,
                                      attention="dense")).eval()
    tensor = torch.tensor([list(range(3, 9))])
    with record(model, attentions=True) as seen:
        model(tensor)
        maps = attention_maps(model, list(range(3, 9)))
        model(tensor)
    assert len(maps) == 2
    assert len(seen.attentions["blocks"]) == 4  # two layers, each in both forward passes
    assert all(block.attn.attention_maps is None for block in model.blocks)
