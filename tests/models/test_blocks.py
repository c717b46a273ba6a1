import pytest
import torch

from synthesizer.attention.cross import CrossAttention, CrossAttentionCache
from synthesizer.models.blocks import sinusoidal_table
from tests.tolerances import LAYER, assert_close_f32



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


def test_segment_embeddings_start_small():
    from synthesizer.models.blocks import Embeddings
    from synthesizer.models.config import ModelConfig

    emb = Embeddings(ModelConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=1, max_len=16), segments=True)
    assert emb.segment.weight.std().item() < 0.05


@pytest.mark.parametrize("d_model", [64, 256])
def test_token_identity_enters_the_residual_stream_above_what_a_block_adds(d_model):
    """With N(0, 0.02) tokens and no scale, the first block's output (std ~0.25) was ten times a token's
    embedding, and a 2-layer vanilla model never learned associative recall; scaled tokens are at unit
    scale, above what a block adds, and the tied head still starts with logits of order 1."""
    from synthesizer.models.config import ModelConfig
    from synthesizer.models.lm import LanguageModel

    torch.manual_seed(0)
    model = LanguageModel(ModelConfig(vocab_size=200, d_model=d_model, n_heads=4, n_layers=2, max_len=32, dropout=0.0))
    ids = torch.randint(0, 200, (8, 32))
    with torch.no_grad():
        tokens = model.embed.token(ids) * model.embed.token_scale
        x = model.embed(ids)
        added = model.blocks[0](x) - x
        logits = model(ids)
    assert 0.8 < tokens.std().item() < 1.25
    assert tokens.std().item() > 2 * added.std().item()
    assert logits.std().item() < 3.0
    assert model.head.weight is model.embed.token.weight  # tied: the head sees the unscaled weights


def test_embeddings_reset_parameters_restores_the_initial_scales():
    from synthesizer.models.blocks import Embeddings
    from synthesizer.models.config import ModelConfig

    emb = Embeddings(ModelConfig(vocab_size=500, d_model=64, n_heads=4, n_layers=1, max_len=64))
    with torch.no_grad():
        emb.token.weight.fill_(3.0)
        emb.position.weight.fill_(3.0)
    emb.reset_parameters()
    assert abs(emb.token.weight.std().item() - 64 ** -0.5) < 0.01
    assert abs(emb.position.weight.std().item() - 0.02) < 0.005
