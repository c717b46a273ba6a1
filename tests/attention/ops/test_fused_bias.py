"""The fused_bias and blockwise kernels directly: the combined backward (dq, dk, dv and the
batch-summed bias gradient in one pass) against float64 autograd, over several query blocks, with
causal masks, padding (rows without a key) and dropout, and the fallback where the private op is
missing or fails."""

from __future__ import annotations

import warnings

import pytest
import torch

from synthesizer.attention import SynthesizerAttention
from synthesizer.attention.masks import combined_mask, masked_softmax
from synthesizer.attention.ops import blockwise, fused_bias
from tests.helpers import rel_err
from tests.tolerances import LAYER

B, H, N, DQ, DV = 3, 2, 40, 5, 4  # N > 16 rows: several blocks once BLOCK_ELEMENTS is small


def inputs(padded: bool):
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(B, H, N, DQ, generator=gen) for _ in range(2))
    v = torch.randn(B, H, N, DV, generator=gen)
    bias = torch.randn(H, N, N, generator=gen)
    grad = torch.randn(B, H, N, DV, generator=gen)
    pad = None
    if padded:  # example 1 padded at the end, example 2 padded at the start (causal: rows with no key)
        pad = torch.zeros(B, N, dtype=torch.bool)
        pad[1, N - 7 :] = True
        pad[2, :5] = True
    return q, k, v, bias, pad, grad


def reference(q, k, v, bias, pad, causal, keep=None):
    """Output of the spec's formula in float64 (keep: the dropout keep-mask, scaled, or None)."""
    q, k, v, bias = (t.double() for t in (q, k, v, bias))
    probs = masked_softmax(q @ k.transpose(-1, -2) + bias, combined_mask(N, N, causal, pad, q.device))
    if keep is not None:
        probs = probs * keep.double()
    return probs @ v


def grads(fn, q, k, v, bias, grad):
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v, bias)]
    out = fn(*leaves)
    out.backward(grad.to(out.dtype))
    return out.detach(), [t.grad for t in leaves]


def assert_matches(got, want, what):
    (out_g, grads_g), (out_w, grads_w) = got, want
    assert rel_err(out_g, out_w.float()) <= LAYER.rtol, f"forward: {what}"
    for name, g, w in zip(("q", "k", "v", "bias"), grads_g, grads_w):
        assert torch.isfinite(g).all(), f"{name}: {what}"
        assert rel_err(g, w.float()) <= LAYER.rtol, f"gradient of {name}: {what}"


@pytest.fixture(params=[1, 2], ids=["one-example-steps", "two-example-steps"])
def small_blocks(monkeypatch, request):
    """16 query rows per block of one example at these sizes: three blocks, the last one short; and
    the blocks of one example a step (long sequences' steps) or of two (short ones': the three
    examples in an even group and a short one)."""
    monkeypatch.setattr(blockwise, "BLOCK_ELEMENTS", 16 * H * N)
    monkeypatch.setattr(blockwise, "GROUP_ELEMENTS", request.param * 16 * H * N)
    assert [j - i for i, j in blockwise._groups(B, H, 16, N)] == ([1, 1, 1] if request.param == 1 else [2, 1])


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("padded", [False, True], ids=["nopad", "pad"])
@pytest.mark.parametrize("kernel", ["fused_bias", "blockwise"])
def test_combined_backward_matches_float64_autograd(small_blocks, kernel, causal, padded):
    q, k, v, bias, pad, grad = inputs(padded)
    if kernel == "fused_bias":
        assert fused_bias.available(q.device, q.dtype)
        fn = lambda q, k, v, b: fused_bias.fused_bias_attention(q, k, v, b, pad, causal)
    else:
        fn = lambda q, k, v, b: blockwise.blockwise_attention(q, k, v, b, pad, causal)
    want = grads(lambda q, k, v, b: reference(q, k, v, b, pad, causal), q, k, v, bias, grad)
    assert_matches(grads(fn, q, k, v, bias, grad), want, f"{kernel}, causal={causal}, padded={padded}")


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_dropout_backward_matches_float64_autograd_with_the_same_keep_masks(small_blocks, causal):
    """Keep-masks regenerated per block from the seed in the backward give the gradients of the
    forward that used them (dv through the dropped weights, the rest through P * keep)."""
    q, k, v, bias, pad, grad = inputs(True)
    p, seed = 0.3, 1234
    rows = blockwise._block_rows(H, N)
    assert rows < N
    keep = torch.zeros(B, H, N, N)
    for s in range(0, N, rows):
        e = min(s + rows, N)
        m = e if causal else N
        for i, j in blockwise._groups(B, H, rows, N):
            seed_i = blockwise._block_seed(seed, i, s, N)
            keep[i:j, :, s:e, :m] = blockwise._dropout_keep(torch.Size((j - i, H, e - s, m)), p, seed_i, q.device)
    assert 0 < (keep == 0).float().mean() < 1
    fn = lambda q, k, v, b: blockwise._BlockwiseAttention.apply(q, k, v, pad, causal, p, seed, None, None, b)
    want = grads(lambda q, k, v, b: reference(q, k, v, b, pad, causal, keep), q, k, v, bias, grad)
    assert_matches(grads(fn, q, k, v, bias, grad), want, f"dropout, causal={causal}")


@pytest.fixture
def fresh_probe():
    """Forget what earlier calls found about the op (and whether they warned), before and after."""
    fused_bias._PROBED.clear()
    fused_bias._warn_fallback.cache_clear()
    yield
    fused_bias._PROBED.clear()
    fused_bias._warn_fallback.cache_clear()


def _broken(*args, **kwargs):
    raise RuntimeError("no kernel for this dtype")


@pytest.mark.parametrize("how", ["missing", "failing"])
def test_fallback_without_a_working_op(monkeypatch, fresh_probe, how):
    """The op patched away (or raising): not available, the layer runs blockwise, and a direct call
    warns once and still gives the reference's forward and gradients."""
    if how == "missing":
        monkeypatch.setattr(fused_bias, "OP", "_no_such_op_in_this_build")
    else:
        monkeypatch.setattr(fused_bias, "_kernel", lambda: _broken)
    cpu = torch.device("cpu")
    assert not fused_bias.available(cpu) and not fused_bias.runs(cpu, training=False, dropout=0.0)
    assert SynthesizerAttention(16, 2, 8, "random+vanilla").path == "blockwise"

    q, k, v, bias, pad, grad = inputs(True)
    fn = lambda q, k, v, b: fused_bias.fused_bias_attention(q, k, v, b, pad, True)
    with pytest.warns(RuntimeWarning, match="fused_bias"):
        got = grads(fn, q, k, v, bias, grad)
    want = grads(lambda q, k, v, b: reference(q, k, v, b, pad, True), q, k, v, bias, grad)
    assert_matches(got, want, f"fallback, op {how}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the warning comes once per process and dtype
        fused_bias.fused_bias_attention(q, k, v, bias, pad, True)


def test_probe_checks_the_dtype_once(monkeypatch, fresh_probe):
    """The probe runs the op for each dtype asked about, once; a dtype it fails for is not available."""
    calls = []
    real = fused_bias._kernel()

    def kernel(q, *args, **kwargs):
        calls.append(q.dtype)
        if q.dtype == torch.float16:
            raise RuntimeError("float16 not supported")
        return real(q, *args, **kwargs)

    monkeypatch.setattr(fused_bias, "_kernel", lambda: kernel)
    cpu = torch.device("cpu")
    assert fused_bias.available(cpu, torch.float32) and fused_bias.available(cpu, torch.float32)
    assert not fused_bias.available(cpu, torch.float16)
    assert calls == [torch.float32, torch.float16]
    assert not fused_bias.available(torch.device("meta"), torch.float32)


@pytest.mark.parametrize("kernel", ["fused_bias", "blockwise"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("weights", ["per_head", "scalar", "two_terms"])
def test_weighted_terms_give_every_gradient_of_the_float64_sum(small_blocks, kernel, causal, weights):
    """Terms kept apart (``w_c``, ``B_c``) and the features' weight ``w_q`` handed over beside q: the
    kernel forms ``w_q q k^T + sum_c w_c B_c`` block by block and returns the gradient of q, k, v, of
    each weight and each term as float64 autograd of the materialised logits does."""
    q, k, v, bias, pad, grad = inputs(True)
    gen = torch.Generator().manual_seed(1)
    other = torch.randn(H, N, N, generator=gen)
    shape = (H,) if weights == "per_head" else (1,)
    ws = [torch.rand(shape, generator=gen) + 0.5 for _ in range(3)]
    n_terms = 2 if weights == "two_terms" else 1
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v, ws[2], *ws[:n_terms], bias, other)[: 4 + 2 * n_terms]]
    ql, kl, vl, wq, *rest = leaves
    w_leaves, b_leaves = rest[:n_terms], rest[n_terms:]
    terms = tuple(zip(w_leaves, b_leaves))
    if kernel == "fused_bias":
        out = fused_bias.fused_bias_attention(ql, kl, vl, terms, pad, causal, q_weight=wq)
    else:
        out = blockwise.blockwise_attention(ql, kl, vl, terms, pad, causal, q_weight=wq)
    out.backward(grad)
    doubles = [t.detach().double().requires_grad_(True) for t in leaves]
    qd, kd, vd, wqd, *rest_d = doubles
    summed = sum(w.reshape(-1, 1, 1) * b for w, b in zip(rest_d[:n_terms], rest_d[n_terms:]))
    qwd = qd * wqd.reshape(-1, 1, 1)
    summed.retain_grad(), qwd.retain_grad()
    want = reference(qwd, kd, vd, summed, pad, causal)
    want.backward(grad.double())
    assert rel_err(out.detach(), want.detach().float()) <= LAYER.rtol
    # A weight's gradient sums thousands of products (every logit of its term); float32 rounding is
    # bounded relative to the sum of their magnitudes, not to the (cancelling) sum itself.
    term_of = {3: (qwd.grad, qd)} | {4 + c: (summed.grad, rest_d[n_terms + c]) for c in range(n_terms)}
    for i, (got, ref) in enumerate(zip(leaves, doubles)):
        assert got.grad is not None and got.grad.shape == got.shape, f"input {i}"
        if i in term_of:
            upstream, factor = term_of[i]
            dims = tuple(d for d in range(upstream.dim()) if d != upstream.dim() - 3) if got.numel() > 1 else None
            magnitude = (upstream.abs() * factor.abs()).sum(dims) if dims else (upstream.abs() * factor.abs()).sum()
            assert ((got.grad.double() - ref.grad).abs() <= LAYER.rtol * magnitude.reshape(got.shape)).all(), \
                f"gradient of weight input {i}: {kernel}, causal={causal}"
        else:
            assert rel_err(got.grad, ref.grad.float()) <= LAYER.rtol, f"gradient of input {i}: {kernel}, causal={causal}"
