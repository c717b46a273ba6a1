"""Incremental decoding with an AttentionCache equals the full causal forward pass."""

from __future__ import annotations

import pytest
import torch

from synthesizer.attention import AttentionCache, SynthesizerAttention
from tests.tolerances import LAYER, assert_close_f32

KINDS = ["vanilla", "dense", "random", "fixed_random", "factorized_dense", "factorized_random",
         "random+vanilla", "dense+vanilla", "random+dense", "dense+random+vanilla", "factorized_random+vanilla",
         "random+factorized_random", "fixed_random+dense", "factorized_dense+vanilla"]
L, D, H = 8, 16, 2



def build(kind: str, causal: bool = True, **kw) -> SynthesizerAttention:
    torch.manual_seed(0)
    layer = SynthesizerAttention(D, H, L, kind, causal, **kw).eval()
    if layer.alpha is not None:
        with torch.no_grad():
            layer.alpha.normal_()
    return layer


def decode(layer: SynthesizerAttention, x: torch.Tensor, steps: list[int], pad: torch.Tensor | None = None):
    """Feed x in chunks of the given sizes; returns the concatenated outputs and the cache."""
    cache = layer.new_cache()
    assert isinstance(cache, AttentionCache) and cache.length == 0
    outs, start = [], 0
    for t in steps:
        chunk_pad = None if pad is None else pad[:, start : start + t]
        outs.append(layer(x[:, start : start + t], chunk_pad, cache=cache))
        start += t
        assert cache.length == start
    return torch.cat(outs, dim=1), cache


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("impl", ["auto", "reference"])
def test_one_position_at_a_time_equals_full_forward(kind, impl):
    layer = build(kind, impl=impl)
    x = torch.randn(2, L, D)
    with torch.no_grad():
        full = layer(x)
        steps, _ = decode(layer, x, [1] * L)
    assert_close_f32(steps, full, f"{kind} via {impl}: one position at a time", LAYER)


@pytest.mark.parametrize("kind", KINDS)
def test_several_positions_at_a_time_with_padding(kind):
    layer = build(kind)
    x = torch.randn(3, 7, D)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[1, 5:] = True
    pad[2] = True  # a fully padded example: zeros from the attention, no NaN
    with torch.no_grad():
        full = layer(x, pad)
        steps, _ = decode(layer, x, [3, 1, 2, 1], pad)
    assert torch.isfinite(steps).all()
    assert_close_f32(steps, full, f"{kind}: chunks 3, 1, 2, 1", LAYER)


def test_padding_only_in_later_chunks(any_key_mask):
    """The first chunk without a mask, a later one with padding: the cache fills in the missing mask."""
    layer = build("dense+vanilla")
    x = torch.randn(2, 6, D)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[0, 4:] = True
    cache = layer.new_cache()
    with torch.no_grad():
        first = layer(x[:, :3], cache=cache)
        rest = layer(x[:, 3:], pad[:, 3:], cache=cache)
        full = layer(x, pad)
    assert_close_f32(torch.cat([first, rest], 1), full, "mask in the second chunk only", LAYER)
    # and the other way round: a mask first, none later
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, 1:3] = True
    cache = layer.new_cache()
    with torch.no_grad():
        first = layer(x[:, :3], pad[:, :3], cache=cache)
        rest = layer(x[:, 3:], cache=cache)
        full = layer(x, pad)
    assert_close_f32(torch.cat([first, rest], 1), full, "mask in the first chunk only", LAYER)


@pytest.mark.parametrize("kind", ["dense+random+vanilla", "factorized_dense+factorized_random"])
def test_decoding_with_options(kind):
    """dense_per_head, mix_per_head, fd_split and k in the cached path too."""
    torch.manual_seed(0)
    layer = SynthesizerAttention(D, H, 12, kind, causal=True, dense_per_head=True, mix_per_head=True, fd_split=2, k=3)
    with torch.no_grad():
        layer.alpha.normal_()
        x = torch.randn(2, 11, D)
        steps, _ = decode(layer, x, [4, 1, 6])
        assert_close_f32(steps, layer(x), f"{kind} with options", LAYER)


def test_cache_of_pure_synthesizer_is_half_of_vanilla():
    x = torch.randn(2, 6, D)
    sizes = {}
    for kind in ("vanilla", "random", "dense", "factorized_dense", "factorized_random", "fixed_random", "dense+vanilla"):
        with torch.no_grad():
            _, cache = decode(build(kind), x, [2, 4])
        sizes[kind] = cache.nbytes
    assert sizes["vanilla"] == 2 * 2 * H * 6 * (D // H) * 4  # K and V, float32
    for kind in ("random", "dense", "factorized_dense", "factorized_random", "fixed_random"):
        assert 2 * sizes[kind] == sizes["vanilla"], kind
    assert sizes["dense+vanilla"] == sizes["vanilla"]


def test_reorder_for_beam_search():
    layer = build("random+vanilla")
    x = torch.randn(3, 5, D)
    index = torch.tensor([2, 0, 0])
    with torch.no_grad():
        cache = layer.new_cache()
        head = layer(x[:, :3], cache=cache)
        cache.reorder(index)
        tail = layer(x[index, 3:], cache=cache)
        full = layer(x[index])
    assert_close_f32(head[index], full[:, :3], "reordered prefix", LAYER)
    assert_close_f32(tail, full[:, 3:], "steps after the reorder", LAYER)


def test_new_cache_needs_causal_layer():
    layer = build("random", causal=False)
    with pytest.raises(ValueError, match="causal"):
        layer.new_cache()


def test_decoding_past_max_len_raises():
    layer = build("dense")
    cache = layer.new_cache()
    with torch.no_grad():
        layer(torch.randn(1, L - 1, D), cache=cache)
        layer(torch.randn(1, 1, D), cache=cache)  # exactly max_len is fine
        with pytest.raises(ValueError, match=f"max_len={L}"):
            layer(torch.randn(1, 1, D), cache=cache)
        cache2 = layer.new_cache()
        layer(torch.randn(1, 5, D), cache=cache2)
        with pytest.raises(ValueError, match=f"max_len={L}"):
            layer(torch.randn(1, 4, D), cache=cache2)
