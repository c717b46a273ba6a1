"""The wide_qk kernel (q, k wider than v) against the materialised reference, block by block, in its
PyTorch blocks and in its compiled CPU blocks; the layer on each against the reference path in every
gradient, mixture weights included."""

from __future__ import annotations

import pytest
import torch

from synthesizer.attention import SynthesizerAttention
from synthesizer.attention.dispatch import applicable_paths
from synthesizer.attention.ops import compiled, reference, wide_qk
from synthesizer.attention.ops.wide_qk import _WideQKAttention, runs_compiled, wide_qk_attention
from tests.attention.test_fastpaths import assert_grads_close
from tests.helpers import rel_err, three_paddings
from tests.tolerances import LAYER

B, H, DQK, DV = 3, 2, 9, 4


def inputs(n: int, dtype=torch.float32) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    q = torch.randn(B, H, n, DQK, dtype=dtype, requires_grad=True)
    k = torch.randn(B, H, n, DQK, dtype=dtype, requires_grad=True)
    v = torch.randn(B, H, n, DV, dtype=dtype, requires_grad=True)
    return q, k, v


def padding(n: int) -> torch.Tensor:
    return three_paddings(n)  # B = 3


def reference_attention(q, k, v, pad, causal):
    return reference.probabilities(q @ k.transpose(-1, -2), pad, causal) @ v


def use_implementation(monkeypatch, implementation: str) -> None:
    """"blocks": the PyTorch blocks; "compiled": the compiled CPU blocks, skipped where they cannot be built."""
    monkeypatch.setenv(compiled.ENV, "1" if implementation == "compiled" else "0")
    if implementation == "compiled" and compiled.load("wide_qk_cpu") is None:
        pytest.skip("the compiled CPU kernel could not be built here (see the warning)")


def use_blocks(monkeypatch, blocks: str) -> None:
    """The PyTorch blocks. "one": one block per call (small n); "rows": blocks of 16 query rows of one
    (example, head) pair, so that n = 37 takes three blocks per pair (the last one partial), causal or not
    (causal: the last rows first); "pairs": not causal, whole matrices of two pairs at a time, three blocks
    for the B * H = 6 pairs; causal, 16 rows of four pairs at a time (then of the last two)."""
    use_implementation(monkeypatch, "blocks")
    if blocks == "one":
        return
    monkeypatch.setattr(wide_qk, "CAUSAL_ROWS", 16)
    monkeypatch.setattr(wide_qk, "BLOCK_ELEMENTS", 1 if blocks == "rows" else 2 * 37 * 37)
    rows = [(32, 37), (16, 32), (0, 16)]
    if blocks == "rows":
        assert wide_qk._blocks(B * H, 37, 37, causal=False)[:3] == [(0, 1, 0, 16), (0, 1, 16, 32), (0, 1, 32, 37)]
        assert wide_qk._blocks(B * H, 37, 37, causal=True)[:3] == [(0, 1, s, e) for s, e in rows]
    else:
        assert wide_qk._blocks(B * H, 37, 37, causal=False) == [(0, 2, 0, 37), (2, 4, 0, 37), (4, 6, 0, 37)]
        assert wide_qk._blocks(B * H, 37, 37, causal=True) == [(c0, c1, s, e) for c0, c1 in ((0, 4), (4, 6))
                                                                for s, e in rows]


@pytest.fixture
def small_blocks(monkeypatch):
    use_blocks(monkeypatch, "rows")


@pytest.fixture(params=["blocks", "compiled"])
def implementation(request, monkeypatch):
    """Each implementation in turn: the PyTorch blocks (16 rows) and the compiled ones."""
    if request.param == "blocks":
        use_blocks(monkeypatch, "rows")
    else:
        use_implementation(monkeypatch, "compiled")
    return request.param


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("blocks", ["one", "rows", "pairs"])
def test_matches_reference_forward_and_gradients(monkeypatch, causal, padded, blocks):
    use_blocks(monkeypatch, blocks)
    check_against_reference(37, causal, padded)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("n", [37, 150])
def test_compiled_blocks_match_reference_forward_and_gradients(monkeypatch, causal, padded, n):
    """The compiled kernel (blocks of 64 rows: n = 150 takes two whole and one partial block per pair)."""
    use_implementation(monkeypatch, "compiled")
    assert runs_compiled(torch.zeros(1, 1, 1), 0.0)
    check_against_reference(n, causal, padded)


def test_compiled_blocks_are_left_for_what_they_do_not_compute(monkeypatch):
    """Dropout, float64 and a switch turned off run the PyTorch blocks."""
    use_implementation(monkeypatch, "compiled")
    x = torch.zeros(1, 1, 1)
    assert runs_compiled(x, 0.0) and not runs_compiled(x, 0.1) and not runs_compiled(x.double(), 0.0)
    monkeypatch.setenv(compiled.ENV, "0")
    assert not runs_compiled(x, 0.0)


def check_against_reference(n: int, causal: bool, padded: bool) -> None:
    q, k, v = inputs(n)
    pad = padding(n) if padded else None
    grad = torch.randn(B, H, n, DV)
    got = wide_qk_attention(q, k, v, pad, causal)
    want = reference_attention(q, k, v, pad, causal)
    assert rel_err(got, want) <= LAYER.rtol
    got_grads = torch.autograd.grad(got, (q, k, v), grad)
    want_grads = torch.autograd.grad(want, (q, k, v), grad)
    for name, g, w in zip(("q", "k", "v"), got_grads, want_grads):
        assert rel_err(g, w) <= LAYER.rtol, name
    if padded:  # the fully padded example: zero rows, no NaN
        assert torch.equal(got[2], torch.zeros_like(got[2]))
        assert all(torch.isfinite(g).all() for g in got_grads)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_with_dropout_is_the_gradient_of_its_forward(small_blocks, causal):
    """One seed gives the same dropout mask in forward and backward: gradcheck in float64."""
    q, k, v = inputs(37, torch.float64)
    pad = padding(37)
    fn = lambda a, b, c: _WideQKAttention.apply(a, b, c, pad, causal, 0.3, 1234)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, k, v), atol=1e-6, fast_mode=True)  # a random projection: seconds, not minutes
    assert not torch.allclose(fn(q, k, v), reference_attention(q, k, v, pad, causal))  # dropout really applied


def test_applies_to_mixtures_of_feature_components_only():
    for kind in ("dense+vanilla", "factorized_random+vanilla", "factorized_random+dense",
                 "factorized_random+dense+vanilla"):
        assert "wide_qk" in applicable_paths(tuple(kind.split("+"))), kind
    for kind in ("vanilla", "dense", "random+vanilla", "factorized_dense+vanilla"):
        assert "wide_qk" not in applicable_paths(tuple(kind.split("+"))), kind
    # a candidate: ``auto`` keeps the fused kernel
    assert SynthesizerAttention(16, H, 8, "dense+vanilla").path == "fused"
    assert SynthesizerAttention(16, H, 8, "dense+vanilla", impl="wide_qk").path == "wide_qk"


@pytest.mark.parametrize("kind", ["dense+vanilla", "factorized_random+dense+vanilla"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mix_per_head", [False, True])
def test_layer_matches_reference_in_every_gradient(implementation, kind, causal, mix_per_head):
    """Output, input gradient and every parameter's gradient (the mixture logits alpha, per head or
    not, and dense's per-head W2, b2) against impl="reference", over several blocks, with padding."""
    n, d = 37, 16
    torch.manual_seed(1)
    options = {"mix_per_head": mix_per_head, "dense_per_head": mix_per_head}
    ref = SynthesizerAttention(d, H, 40, kind, causal, impl="reference", **options)
    with torch.no_grad():
        ref.alpha.normal_()
    fast = SynthesizerAttention(d, H, 40, kind, causal, impl="wide_qk", **options)
    fast.load_state_dict(ref.state_dict())
    x = torch.randn(B, n, d)
    pad = padding(n)
    grad = torch.randn(B, n, d)
    results = []
    for layer in (fast, ref):
        xg = x.clone().requires_grad_(True)
        out = layer(xg, pad)
        (out * grad).sum().backward()
        results.append((out.detach(), {"x": xg.grad, **{k: p.grad for k, p in layer.named_parameters()}}))
    (out_f, grads_f), (out_r, grads_r) = results
    assert rel_err(out_f, out_r) <= LAYER.rtol
    assert_grads_close(grads_f, grads_r, f"{kind}, causal={causal}")


def check_autocast_against_reference(kind: str, impl: str) -> None:
    """Under bfloat16 autocast the layer on ``impl`` gives the reference path's output and input
    gradient within bfloat16 rounding, the gradient in the input's dtype."""
    torch.manual_seed(0)
    ref = SynthesizerAttention(16, H, 16, kind, causal=True, impl="reference")
    fast = SynthesizerAttention(16, H, 16, kind, causal=True, impl=impl)
    fast.load_state_dict(ref.state_dict())
    x = torch.randn(B, 12, 16)
    results = []
    for layer in (fast, ref):
        xg = x.clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = layer(xg, padding(12))
        out.float().sum().backward()
        results.append((out.float(), xg.grad))
    (out_f, dx_f), (out_r, dx_r) = results
    assert dx_f.dtype == torch.float32
    assert rel_err(out_f, out_r) <= 4e-2 and rel_err(dx_f, dx_r) <= 4e-2  # bfloat16: eps 7.8e-3


def test_under_autocast_matches_the_reference_path():
    """q, k and v of different dtypes under autocast (dense's k is its float32 key matrix): the kernel
    computes in autocast's dtype and hands each input its gradient in that input's dtype."""
    check_autocast_against_reference("dense+vanilla", "wide_qk")


@pytest.mark.compile
@pytest.mark.parametrize("training", [False, True])
def test_compiled_blocks_stay_in_a_torch_compile_graph(monkeypatch, training):
    """The compiled blocks are torch operators (``torch.library.custom_op``): torch.compile traces the layer
    in one graph, and the compiled layer gives the eager one's output and input gradient."""
    use_implementation(monkeypatch, "compiled")
    torch.manual_seed(0)
    layer = SynthesizerAttention(16, H, 16, "dense+vanilla", causal=True, impl="wide_qk").train(training)
    x, pad = torch.randn(B, 12, 16), padding(12)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(layer)(x, pad)
    assert explained.graph_break_count == 0, [str(r.reason)[:200] for r in explained.break_reasons]
    results = []
    for run in (layer, torch.compile(layer)):
        xg = x.clone().requires_grad_(True)
        out = run(xg, pad)
        out.sum().backward()
        results.append((out.detach(), xg.grad))
    (out_e, dx_e), (out_c, dx_c) = results
    assert rel_err(out_c, out_e) <= LAYER.rtol and rel_err(dx_c, dx_e) <= LAYER.rtol


def test_compiled_blocks_pass_a_nan_on_as_the_pytorch_blocks_do(monkeypatch):
    """Built with -ffast-math, the compiled blocks must still show a non-finite input in the output (a NaN
    query row: that row; an infinite key: its (example, head) pair), not hide it."""
    results = []
    for implementation in ("compiled", "blocks"):
        use_implementation(monkeypatch, implementation)
        q, k, v = (t.detach() for t in inputs(70))
        q[0, 0, 3, 2] = float("nan")
        k[1, 1, 5, 0] = float("inf")
        results.append(wide_qk_attention(q, k, v))
    for out in results:
        assert torch.isnan(out[0, 0, 3]).all() and torch.isfinite(out[0, 0, 4]).all()
        assert torch.isnan(out[1, 1]).any() and torch.isfinite(out[1, 0]).all()
    assert torch.equal(torch.isnan(results[0]), torch.isnan(results[1]))
