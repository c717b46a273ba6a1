"""Linformer, lightweight and dynamic convolution against per-position references from their definitions."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from synthesizer.attention.conv_common import ConvCache, banded_conv
from synthesizer.attention.dynamicconv import DynamicConv
from synthesizer.attention.lightconv import LightweightConv
from synthesizer.attention.linformer import LinformerAttention
from tests.tolerances import LAYER, assert_close_f32

D, H, L = 8, 2, 12


def padding(b: int, n: int, lengths: list[int]) -> torch.Tensor:
    return torch.arange(n).unsqueeze(0) >= torch.tensor(lengths).unsqueeze(1)


# ---------------------------------------------------------------- references, one position at a time
def reference_linformer(m: LinformerAttention, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    b, n, d = x.shape
    dh = d // m.n_heads
    keep = torch.ones(b, n) if mask is None else (~mask).to(x.dtype)
    e = m.e[:n]
    f = e if m.f is None else m.f[:n]
    q = m.query(x)
    keys = m.key(x) * keep.unsqueeze(-1)  # padded rows zeroed before the projection
    values = m.value(x) * keep.unsqueeze(-1)
    out = torch.zeros(b, n, d, dtype=x.dtype)
    for bi in range(b):
        kp = sum(e[j].unsqueeze(1) * keys[bi, j] for j in range(n))  # (k, d) = E^T K
        vp = sum(f[j].unsqueeze(1) * values[bi, j] for j in range(n))
        for i in range(n):
            for h in range(m.n_heads):
                cols = slice(h * dh, (h + 1) * dh)
                p = torch.softmax(kp[:, cols] @ q[bi, i, cols] / math.sqrt(dh), dim=0)
                out[bi, i, cols] = p @ vp[:, cols]
    return m.out(out)


def reference_conv(m, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    b, n, d = x.shape
    r, k = d // m.n_heads, m.kernel_size
    u = m.input(x)
    u = F.glu(u, dim=-1) if m.glu else u
    if mask is not None:
        u = u * (~mask).unsqueeze(-1).to(u.dtype)
    out = torch.zeros(b, n, d, dtype=x.dtype)
    for bi in range(b):
        for i in range(n):
            if isinstance(m, DynamicConv):
                w = m.kernel_linear(u[bi, i]).view(m.n_heads, k)
            else:
                w = m.weight
            w = torch.softmax(w, dim=-1) if m.weight_softmax else w
            for c in range(d):
                for tap in range(k):
                    j = i - m.pad_left + tap
                    if 0 <= j < n:
                        out[bi, i, c] += w[c // r, tap] * u[bi, j, c]
    return m.out(out)


CONVS = [LightweightConv, DynamicConv]


# ---------------------------------------------------------------- forward against the references
@pytest.mark.parametrize("n", [7, L])
@pytest.mark.parametrize("share_kv", [False, True])
def test_linformer_matches_reference(n, share_kv):
    torch.manual_seed(0)
    m = LinformerAttention(D, H, L, k=5, share_kv=share_kv)
    x = torch.randn(2, n, D)
    for mask in (None, padding(2, n, [n, 4])):
        assert_close_f32(m(x, mask), reference_linformer(m, x, mask), f"linformer, mask {mask is not None}", LAYER)


@pytest.mark.parametrize("cls", CONVS)
@pytest.mark.parametrize("causal, kernel_size", [(False, 5), (True, 4)])
@pytest.mark.parametrize("glu, softmax", [(True, True), (False, False)])
def test_conv_matches_reference(cls, causal, kernel_size, glu, softmax):
    torch.manual_seed(0)
    m = cls(D, H, L, causal=causal, kernel_size=kernel_size, glu=glu, weight_softmax=softmax)
    x = torch.randn(2, 7, D)
    mask = padding(2, 7, [7, 5])
    assert_close_f32(m(x, mask), reference_conv(m, x, mask), "with padding", LAYER)
    assert_close_f32(m(x), reference_conv(m, x, None), "without padding", LAYER)


@pytest.mark.parametrize("shared", [False, True])
def test_banded_conv_across_blocks(shared):
    """Several blocks and a ragged last block give the plain sliding sum."""
    torch.manual_seed(0)
    b, n, d, h, k = 2, 11, 6, 3, 5
    ext = torch.randn(b, n + k - 1, d)
    w = torch.randn(h, k) if shared else torch.randn(b, n, h, k)
    expected = torch.zeros(b, n, d)
    for i in range(n):
        for tap in range(k):
            wi = w if shared else w[:, i]
            expected[:, i] += wi[..., tap].repeat_interleave(d // h, dim=-1) * ext[:, i + tap]
    for block in (3, 4, 64):
        assert_close_f32(banded_conv(ext, w, h, block=block), expected, f"block {block}", LAYER)


# ---------------------------------------------------------------- masking and causality
def all_mixers():
    """Every mixer, causal versions included, at the test sizes."""
    return [LinformerAttention(D, H, L, k=4)] + [cls(D, H, L, causal=c, kernel_size=5) for cls in CONVS for c in (False, True)]


@pytest.mark.parametrize("m", all_mixers(), ids=lambda m: f"{type(m).__name__}-causal={m.causal}")
def test_padded_tokens_change_no_real_output(m):
    torch.manual_seed(0)
    x = torch.randn(2, 9, D)
    mask = padding(2, 9, [9, 5])
    other = x.clone()
    other[1, 5:] = 100 * torch.randn(4, D)
    torch.testing.assert_close(m(x, mask)[~mask], m(other, mask)[~mask], atol=1e-5, rtol=1e-5)
    if not m.causal:  # the check has teeth: without the mask the padding would leak (right padding is
        assert not torch.allclose(m(x)[1, :5], m(other)[1, :5])  # in a causal layer's future anyway)


@pytest.mark.parametrize("cls", CONVS)
def test_causal_conv_never_looks_ahead(cls):
    torch.manual_seed(0)
    m = cls(D, H, L, causal=True, kernel_size=3)
    x = torch.randn(1, 6, D, requires_grad=True)
    y = m(x)
    for i in range(6):
        (grad,) = torch.autograd.grad(y[0, i].sum(), x, retain_graph=True)
        seen = grad[0].abs().sum(-1) > 0
        assert not seen[i + 1 :].any(), f"output {i} depends on later inputs"
        assert seen[max(0, i - 2) : i + 1].all(), f"output {i} misses one of its {m.kernel_size} inputs"
        assert not seen[: max(0, i - 2)].any()


# ---------------------------------------------------------------- incremental decoding
@pytest.mark.parametrize("cls", CONVS)
@pytest.mark.parametrize("kernel_size", [1, 4])
def test_decoding_with_cache_equals_full_causal_forward(cls, kernel_size):
    torch.manual_seed(0)
    m = cls(D, H, L, causal=True, kernel_size=kernel_size).eval()
    x = torch.randn(3, 8, D)
    mask = padding(3, 8, [8, 6, 3])
    full = m(x, mask)
    for steps in ([1] * 8, [3, 1, 4]):
        cache = m.new_cache()
        outs, start = [], 0
        for t in steps:
            outs.append(m(x[:, start : start + t], mask[:, start : start + t], cache=cache))
            start += t
        assert isinstance(cache, ConvCache) and cache.length == 8
        assert cache.nbytes == 3 * (kernel_size - 1) * D * 4  # constant: K-1 inputs, whatever the length
        assert_close_f32(torch.cat(outs, dim=1), full, f"steps {steps}", LAYER)


def test_cache_reorder_follows_the_beam():
    torch.manual_seed(0)
    m = DynamicConv(D, H, L, causal=True, kernel_size=3).eval()
    x = torch.randn(2, 4, D)
    cache = m.new_cache()
    m(x[:, :3], cache=cache)
    cache.reorder(torch.tensor([1, 1]))
    step = m(x[[1, 1], 3:], cache=cache)
    assert_close_f32(step, m(x[[1, 1]])[:, 3:], "step after the reorder", LAYER)


# ---------------------------------------------------------------- gradients
GRAD_MIXERS = [
    lambda: LinformerAttention(4, 2, 6, k=3),
    lambda: LightweightConv(4, 2, 6, kernel_size=3),
    lambda: LightweightConv(4, 2, 6, causal=True, kernel_size=2),
    lambda: DynamicConv(4, 2, 6, kernel_size=3),
    lambda: DynamicConv(4, 2, 6, causal=True, kernel_size=2),
]


@pytest.mark.parametrize("build", GRAD_MIXERS)
def test_gradcheck_float64(build):
    """Input and the mixing parameters (E/F, kernels, kernel predictor); the plain projections are nn.Linear."""
    torch.manual_seed(0)
    m = build().double()
    names = ("e", "f", "weight", "kernel_linear.weight", "kernel_linear.bias")
    params = [p for name, p in m.named_parameters() if name in names]
    assert params
    x = torch.randn(2, 4, 4, dtype=torch.double, requires_grad=True)
    mask = padding(2, 4, [4, 3])

    def run(x, *ps):
        return m(x, mask)

    assert torch.autograd.gradcheck(run, (x, *params), eps=1e-6, atol=1e-5)


# ---------------------------------------------------------------- options, counts and errors
def test_weight_dropout_only_while_training():
    torch.manual_seed(0)
    m = DynamicConv(D, H, L, dropout=0.5, kernel_size=3)
    x = torch.randn(1, 6, D)
    assert not torch.allclose(m(x), m(x))
    m.eval()
    torch.testing.assert_close(m(x), m(x))


def test_param_counts():
    lin = LinformerAttention(D, H, L, k=4)
    assert lin.param_counts() == {"query_key": 2 * (D * D + D), "projections": 2 * L * 4, "values_output": 2 * (D * D + D)}
    assert LinformerAttention(D, H, L, k=4, share_kv=True).param_counts()["projections"] == L * 4
    light = LightweightConv(D, H, L, kernel_size=5)
    assert light.param_counts() == {"kernel": H * 5, "input_output": (D * 2 * D + 2 * D) + (D * D + D)}
    dyn = DynamicConv(D, H, L, kernel_size=5, glu=False)
    assert dyn.param_counts() == {"kernel": D * H * 5 + H * 5, "input_output": 2 * (D * D + D)}
    for m in (lin, light, dyn):
        assert sum(m.param_counts().values()) == sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize("build, message", [
    (lambda: LightweightConv(D, H, L, kernel_size=4), "odd"),
    (lambda: DynamicConv(D, H, L, kernel_size=0), "kernel_size"),
    (lambda: LinformerAttention(D, H, L, k=0), "k must be a positive"),
    (lambda: LinformerAttention(D, H, L, causal=True), "future tokens"),
    (lambda: DynamicConv(D, 3, L), "not divisible"),
    (lambda: LightweightConv(D, H, L, dropout=1.0), "dropout"),
    (lambda: LinformerAttention(D, H, L).new_cache(), "encoder-only"),
    (lambda: LightweightConv(D, H, L).new_cache(), "causal=True"),
])
def test_bad_settings_raise(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize("m", all_mixers(), ids=lambda m: f"{type(m).__name__}-causal={m.causal}")
def test_bad_inputs_raise(m):
    with pytest.raises(ValueError, match=f"seq=13 exceeds max_len={L}"):
        m(torch.randn(1, 13, D))
    with pytest.raises(ValueError, match="bool"):
        m(torch.randn(1, 4, D), torch.zeros(1, 4))
    with pytest.raises(ValueError, match="shape"):
        m(torch.randn(1, 4, D), torch.zeros(1, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="d_model"):
        m(torch.randn(1, 4, D + 1))


def test_cache_cannot_run_past_max_len():
    m = LightweightConv(D, H, 4, causal=True, kernel_size=3)
    cache = m.new_cache()
    m(torch.randn(1, 3, D), cache=cache)
    with pytest.raises(ValueError, match="cached 3 \\+ new 2 positions exceeds max_len=4"):
        m(torch.randn(1, 2, D), cache=cache)


def test_linformer_compresses_by_default_and_refuses_to_lengthen():
    # a k above max_len projects the sequence up: the comparison's old default k=256 at max_len 64 did
    assert LinformerAttention(D, H, 64).k == 16 and LinformerAttention(D, H, 2).k == 1
    assert LinformerAttention(D, H, 64).e.shape == (64, 16)
    with pytest.raises(ValueError, match=r"k=256 > max_len=64: the projection would lengthen the sequence.*max_len // 4 = 16"):
        LinformerAttention(D, H, 64, k=256)
