"""Position schemes of the dot-product component (attention/positions.py): each against a plain
reference written from its formula, on every path that runs it, forward and gradients, causal and
bidirectional, with key padding and step-by-step decoding."""

from __future__ import annotations

import math

import pytest
import torch

from synthesizer.attention import SynthesizerAttention
from synthesizer.attention.masks import combined_mask, masked_softmax
from synthesizer.attention.positions import ALiBi, RelativePositionBias, alibi_slopes, relative_buckets, rotate
from tests.tolerances import LAYER, assert_close_f32

D, H, L = 16, 4, 16
KINDS = ["vanilla", "random+vanilla", "dense+vanilla"]


def bias_module(scheme: str, causal: bool):
    torch.manual_seed(5)
    return RelativePositionBias(H, causal, d_model=D) if scheme == "relative" else ALiBi(H, causal)


def plain_vanilla(layer: SynthesizerAttention, x, pad, scheme: str, bias):
    """The pure vanilla layer's output written out: Q, K (rotated by hand for rope), logits plus the
    bias, mask, softmax, P V, output projection."""
    v = layer.logit_modules["vanilla"]
    b, n, _ = x.shape
    q = v.query(x).view(b, n, H, D // H).transpose(1, 2)
    k = v.key(x).view(b, n, H, D // H).transpose(1, 2)
    if scheme == "rope":
        half = D // H // 2
        inv = 10000.0 ** (-torch.arange(half, dtype=torch.float32) * 2 / (D // H))
        ang = torch.arange(n, dtype=torch.float32)[:, None] * inv  # (n, half)
        cos, sin = ang.cos(), ang.sin()

        def rot(t):
            a, c = t[..., :half], t[..., half:]
            return torch.cat([a * cos - c * sin, a * sin + c * cos], -1)
        q, k = rot(q), rot(k)
    logits = q @ k.transpose(-1, -2) / math.sqrt(D // H)
    if bias is not None:
        logits = logits + bias
    probs = masked_softmax(logits, combined_mask(n, n, layer.causal, pad, x.device))
    vals = layer.value(x).view(b, n, H, D // H).transpose(1, 2)
    return layer.out((probs @ vals).transpose(1, 2).reshape(b, n, D))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("scheme", ["rope", "relative", "alibi"])
def test_vanilla_with_each_scheme_equals_its_formula(scheme, causal):
    torch.manual_seed(0)
    layer = SynthesizerAttention(D, H, L, "vanilla", causal=causal, positions=scheme).eval()
    x = torch.randn(3, 11, D)
    pad = torch.zeros(3, 11, dtype=torch.bool)
    pad[1, 8:] = True
    bias = None if scheme == "rope" else bias_module(scheme, causal)(0, 11, 11)
    assert_close_f32(layer(x, pad, position_bias=bias), plain_vanilla(layer, x, pad, scheme, bias),
                     f"{scheme}: the layer against its formula", LAYER)


def test_rope_logits_depend_on_the_offset_only():
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)
    dots = [(rotate(q, i) @ rotate(k, j).transpose(-1, -2)).item() for i, j in [(3, 1), (7, 5), (12, 10)]]
    assert max(dots) - min(dots) < 1e-5
    assert abs((rotate(q, 3) @ rotate(k, 0).transpose(-1, -2)).item() - dots[0]) > 1e-3


def test_alibi_slopes_follow_the_published_rule():
    assert torch.allclose(alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)]))
    assert torch.allclose(alibi_slopes(4), torch.tensor([2.0 ** -(2 * (i + 1)) for i in range(4)]))
    # 6 heads: the 4 slopes of H=4, then the odd-numbered ones of H=8 (2^-1, 2^-3)
    assert torch.allclose(alibi_slopes(6), torch.tensor([2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]))
    bias = ALiBi(2)(0, 3, 3)
    assert torch.allclose(bias[0], -0.0625 * torch.tensor([[0.0, 1, 2], [1, 0, 1], [2, 1, 0]]))


def test_relative_buckets():
    off = torch.arange(-10, 11)
    # bidirectional, 32 buckets: 16 per direction, offsets 0..7 exact, keys after the query from 16
    got = relative_buckets(off, True, 32, 128).tolist()
    assert got[10] == 0 and got[9] == 1 and got[3] == 7 and got[11] == 17 and got[17] == 23
    assert got[0] == got[1] == got[2] == 8  # distances 8..10 share the first logarithmic bucket
    # causal: keys after the query fall in bucket 0, the past gets all 32 buckets
    causal = relative_buckets(off, False, 32, 128).tolist()
    assert causal[11:] == [0] * 10 and causal[:11] == list(range(10, -1, -1))
    assert relative_buckets(torch.tensor([-15, -16]), False, 32, 128).tolist() == [15, 16]
    # beyond max_distance, the last bucket; monotone in the distance
    far = relative_buckets(-torch.arange(0, 400), False, 32, 128)
    assert far[-1] == 31 and far[100] == 30 and bool((far[1:] >= far[:-1]).all())


def test_the_relative_bias_rows_of_a_decoding_step_are_those_of_the_full_pass():
    bias = bias_module("relative", True)
    full = bias(0, 9, 9)
    assert torch.equal(bias(4, 3, 7), full[:, 4:7, :7])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("scheme", ["rope", "relative", "alibi"])
def test_fast_paths_equal_the_reference_forward_and_gradients(kind, scheme, causal):
    torch.manual_seed(1)
    fast = SynthesizerAttention(D, H, L, kind, causal=causal, positions=scheme)
    ref = SynthesizerAttention(D, H, L, kind, causal=causal, positions=scheme, impl="reference")
    ref.load_state_dict(fast.state_dict())
    assert fast.path != "reference"
    if fast.alpha is not None:
        with torch.no_grad():
            fast.alpha.normal_()
            ref.alpha.copy_(fast.alpha)
    bias = None if scheme == "rope" else bias_module(scheme, causal)
    x = torch.randn(3, 13, D, requires_grad=True)
    pad = torch.zeros(3, 13, dtype=torch.bool)
    pad[2, 9:] = True
    grads = []
    for layer in (fast, ref):
        out = layer(x, pad, position_bias=None if bias is None else bias(0, 13, 13))
        extra = list(bias.parameters()) if bias is not None else []
        grads.append((out, torch.autograd.grad(out.square().sum(), [x, *layer.parameters(), *extra])))
    (out_f, g_f), (out_r, g_r) = grads
    assert_close_f32(out_f, out_r, f"{kind} {scheme} on {fast.path}", LAYER)
    for a, b in zip(g_f, g_r):
        assert_close_f32(a, b, f"{kind} {scheme}: gradient on {fast.path}", LAYER)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scheme", ["rope", "relative", "alibi"])
def test_decoding_step_by_step_equals_the_full_forward(kind, scheme):
    torch.manual_seed(2)
    layer = SynthesizerAttention(D, H, L, kind, causal=True, positions=scheme).eval()
    bias = None if scheme == "rope" else bias_module(scheme, True)
    x = torch.randn(2, 10, D)
    with torch.no_grad():
        full = layer(x, position_bias=None if bias is None else bias(0, 10, 10))
        cache, outs, start = layer.new_cache(), [], 0
        for t in (1, 3, 1, 1, 4):
            step_bias = None if bias is None else bias(start, t, start + t)
            outs.append(layer(x[:, start : start + t], cache=cache, position_bias=step_bias))
            start += t
    assert_close_f32(torch.cat(outs, 1), full, f"{kind} {scheme}: decoding", LAYER)


def test_clear_errors():
    with pytest.raises(ValueError, match="positions must be one of none, rope, relative, alibi"):
        SynthesizerAttention(D, H, L, "vanilla", positions="learned")
    with pytest.raises(ValueError, match="applies to the dot-product component.*'random'"):
        SynthesizerAttention(D, H, L, "random", positions="rope")
    layer = SynthesizerAttention(D, H, L, "vanilla", positions="alibi")
    with pytest.raises(ValueError, match=r"needs position_bias of shape \(heads, rows, keys\) = \(4, 5, 5\), got none"):
        layer(torch.randn(1, 5, D))
    with pytest.raises(ValueError, match="only 'relative' and 'alibi' layers take one"):
        SynthesizerAttention(D, H, L, "vanilla")(torch.randn(1, 5, D), position_bias=torch.zeros(H, 5, 5))
    with pytest.raises(ValueError, match="even head size"):
        SynthesizerAttention(12, 4, L, "vanilla", positions="rope")


# ----------------------------------------------------------------------------- per-token positions
ALL_KINDS = ["vanilla", "random", "fixed_random", "dense", "factorized_random", "factorized_dense",
             "random+vanilla", "dense+vanilla", "factorized_dense+vanilla"]


def _left_padded(x, pad_len):
    """x (1, n, d) behind pad_len padding tokens, with the padding mask and per-token positions."""
    b, n, d = x.shape
    padded = torch.cat([torch.randn(b, pad_len, d), x], 1)
    mask = torch.tensor([[True] * pad_len + [False] * n])
    positions = torch.tensor([[0] * pad_len + list(range(n))])
    return padded, mask, positions


@pytest.mark.parametrize("kind, scheme", [(k, s) for k in ALL_KINDS for s in ("none", "rope", "relative", "alibi")
                                          if s == "none" or "vanilla" in k])  # a scheme needs a dot product
def test_a_left_padded_row_with_its_positions_gives_what_the_row_gives_alone(kind, scheme):
    torch.manual_seed(3)
    layer = SynthesizerAttention(D, H, L, kind, causal=True, positions=scheme).eval()
    if layer.alpha is not None:
        with torch.no_grad():
            layer.alpha.normal_()
    bias = None if scheme in ("none", "rope") else bias_module(scheme, True)
    x = torch.randn(1, 7, D, requires_grad=True)
    alone = layer(x, position_bias=None if bias is None else bias(0, 7, 7))
    padded, mask, pos = _left_padded(x, 3)
    left = layer(padded, mask, positions=pos, position_bias=None if bias is None else bias(pos, pos))
    assert_close_f32(left[:, 3:], alone, f"{kind} {scheme}: left-padded", LAYER)
    g_alone = torch.autograd.grad(alone.square().sum(), x)[0]
    g_left = torch.autograd.grad(left[:, 3:].square().sum(), x)[0]
    assert_close_f32(g_left, g_alone, f"{kind} {scheme}: gradient, left-padded", LAYER)
    # decoding: the prompt with its positions, then tokens given none continue each row
    with torch.no_grad():
        cache = layer.new_cache()
        outs = [layer(padded[:, :5], mask[:, :5], cache=cache, positions=pos[:, :5],
                      position_bias=None if bias is None else bias(pos[:, :5], pos[:, :5]))]
        for t in range(5, 10):
            rows = cache.positions[:, -1:] + 1
            keys = torch.cat([cache.positions, rows], 1)
            outs.append(layer(padded[:, t : t + 1], cache=cache,
                              position_bias=None if bias is None else bias(rows, keys)))
        assert cache.positions.tolist() == pos.tolist()
    assert_close_f32(torch.cat(outs, 1)[:, 3:], alone.detach(), f"{kind} {scheme}: decoding, left-padded", LAYER)


def test_random_reads_r_at_each_rows_own_positions():
    layer = SynthesizerAttention(D, H, L, "random")
    rows, keys = torch.tensor([[2, 0, 5]]), torch.tensor([[1, 4, 3]])
    got = layer.logit_modules["random"].logits_at(torch.zeros(1, 3, D), rows, keys)
    r = layer.logit_modules["random"].r
    assert got.shape == (1, H, 3, 3) and torch.equal(got[0, :, 2, 1], r[:, 5, 4])


def test_positions_are_checked():
    layer = SynthesizerAttention(D, H, L, "random")
    x = torch.randn(1, 4, D)
    with pytest.raises(ValueError, match=r"positions must lie in \[0, max_len=16\), got 0..16"):
        layer(x, positions=torch.tensor([[0, 1, 2, 16]]))
    with pytest.raises(ValueError, match="positions must be an integer tensor"):
        layer(x, positions=torch.zeros(1, 4))
    with pytest.raises(ValueError, match=r"positions must have shape \(batch, seq\) = \(1, 4\)"):
        layer(x, positions=torch.zeros(1, 3, dtype=torch.long))
