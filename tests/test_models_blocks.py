import pytest
import torch

from synthesizer.attention.cross import CrossAttention, CrossAttentionCache
from synthesizer.models.blocks import sinusoidal_table
from tolerances import LAYER, assert_close_f32



@pytest.mark.parametrize("kind", ["vanilla", "random"])
def test_cross_attention_cache_equals_full_pass_and_reorders(kind):
    torch.manual_seed(0)
    layer = CrossAttention(32, 4, 16, kind).eval()
    x, memory = torch.randn(3, 6, 32), torch.randn(3, 9, 32)
    mask = torch.zeros(3, 9, dtype=torch.bool)
    mask[1, 4:] = True
    full = layer(x, memory, mask)
    cache = CrossAttentionCache()
    steps = [layer(x[:, t : t + 1], memory if t == 0 else None, mask if t == 0 else None, cache=cache, start=t) for t in range(6)]
    assert_close_f32(torch.cat(steps, dim=1), full, f"{kind}: one position at a time", LAYER)
    index = torch.tensor([2, 2, 0])
    cache.reorder(index)
    assert_close_f32(layer(x[index, :1], cache=cache), full[index, :1], f"{kind}: after the reorder", LAYER)


def test_cross_attention_ignores_padded_memory_and_never_gives_nan():
    layer = CrossAttention(32, 4, 16).eval()
    x, memory = torch.randn(2, 3, 32), torch.randn(2, 5, 32)
    mask = torch.tensor([[False, False, True, True, True], [True] * 5])
    other = memory.clone()
    other[0, 2:] = 100.0
    out = layer(x, memory, mask)
    torch.testing.assert_close(out[0], layer(x, other, mask)[0])
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[1], layer.out.bias.expand(3, -1))  # all-padding source: zero attention output


def test_unknown_cross_kind():
    with pytest.raises(ValueError, match="'dense'.*vanilla, random"):
        CrossAttention(32, 4, 16, "dense")


def test_sinusoidal_table():
    table = sinusoidal_table(10, 8)
    assert table.shape == (10, 8)
    torch.testing.assert_close(table[0], torch.tensor([0.0, 1.0] * 4))
    torch.testing.assert_close(table[3, 0], torch.sin(torch.tensor(3.0)))


def test_segment_embeddings_start_at_token_scale():
    from synthesizer.models.blocks import Embeddings
    from synthesizer.models.config import ModelConfig

    emb = Embeddings(ModelConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=1, max_len=16), segments=True)
    assert emb.segment.weight.std().item() < 0.05
