"""The factorized_dense kernel against the materialised reference, block by block."""

from __future__ import annotations

import pytest
import torch

from synthesizer.attention import SynthesizerAttention
from synthesizer.attention.ops import factorized_dense, reference
from synthesizer.attention.ops.factorized_dense import _FactorizedDenseAttention, factorized_dense_attention
from tests.tolerances import LAYER
from tests.helpers import three_paddings

B, H, A, BB = 3, 2, 5, 8  # a * b = 40 = max_len


def factors(n: int, dtype=torch.float32) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    pa = torch.randn(B, H, n, A, dtype=dtype, requires_grad=True)
    pb = torch.randn(B, H, n, BB, dtype=dtype, requires_grad=True)
    v = torch.randn(B, H, n, 4, dtype=dtype, requires_grad=True)
    return pa, pb, v


def padding(n: int) -> torch.Tensor:
    return three_paddings(n)  # B = 3


def reference_attention(pa, pb, v, pad, causal):
    n = v.shape[2]
    logits = (pa.unsqueeze(-1) * pb.unsqueeze(-2)).flatten(-2)[..., :n]
    return reference.probabilities(logits, pad, causal) @ v


@pytest.fixture(params=["rows", "pairs"])
def small_blocks(request, monkeypatch):
    """Several blocks per call: of 16 query rows of one (example, head) pair, so that n = 37 or 40 takes
    three blocks per pair (the last one partial), causal or not; or (not causal) whole matrices of
    two pairs at a time, three blocks for the B * H = 6 pairs."""
    monkeypatch.setattr(factorized_dense, "CAUSAL_ROWS", 16)
    monkeypatch.setattr(factorized_dense, "BLOCK_ELEMENTS", 1 if request.param == "rows" else 2 * 40 * 40)
    blocks = factorized_dense._blocks(B * H, 40, 40, causal=False)
    assert blocks[:3] == ([(0, 1, 0, 16), (0, 1, 16, 32), (0, 1, 32, 40)] if request.param == "rows"
                          else [(0, 2, 0, 40), (2, 4, 0, 40), (4, 6, 0, 40)])
    assert factorized_dense._blocks(B * H, 40, 40, causal=True)[:2] == [(0, 1, 0, 16), (0, 1, 16, 32)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [37, 40])  # n < a * b and n = a * b
@pytest.mark.parametrize("padded", [False, True])
def test_matches_reference_forward_and_gradients(small_blocks, causal, n, padded):
    pa, pb, v = factors(n)
    pad = padding(n) if padded else None
    grad = torch.randn(B, H, n, 4)
    got = factorized_dense_attention(pa, pb, v, pad, causal)
    want = reference_attention(pa, pb, v, pad, causal)
    torch.testing.assert_close(got, want, rtol=LAYER.rtol, atol=LAYER.atol)
    got_grads = torch.autograd.grad(got, (pa, pb, v), grad)
    want_grads = torch.autograd.grad(want, (pa, pb, v), grad)
    for name, g, w in zip(("pa", "pb", "v"), got_grads, want_grads):
        torch.testing.assert_close(g, w, rtol=LAYER.rtol, atol=LAYER.atol * w.abs().max().item(), msg=name)
    if padded:  # the fully padded example: zero rows, no NaN
        assert torch.equal(got[2], torch.zeros_like(got[2]))
        assert all(torch.isfinite(g).all() for g in got_grads)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_with_dropout_is_the_gradient_of_its_forward(small_blocks, causal):
    """One seed gives the same dropout mask in forward and backward: gradcheck in float64."""
    pa, pb, v = factors(37, torch.float64)
    pad = padding(37)
    fn = lambda a, b, c: _FactorizedDenseAttention.apply(a, b, c, pad, causal, 37, 0.3, 1234)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (pa, pb, v), atol=1e-6, fast_mode=True)  # a random projection: seconds, not minutes
    dropped = fn(pa, pb, v)
    assert not torch.allclose(dropped, reference_attention(pa, pb, v, pad, causal))  # dropout really applied


def test_layer_takes_the_kernel_and_keeps_no_attention_matrix():
    """Pure factorized_dense runs this kernel and saves nothing of shape (B, H, n, n) for backward;
    its mixtures keep the reference path."""
    n = 40
    torch.manual_seed(0)
    layer = SynthesizerAttention(16, H, n, "factorized_dense", causal=True, fd_split=A)
    assert layer.path == "factorized_dense"
    assert SynthesizerAttention(16, H, n, "factorized_dense+vanilla").path == "reference"
    x = torch.randn(B, n, 16, requires_grad=True)
    saved = []

    def pack(t):
        saved.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x, padding(n))
    big = [s for s in saved if s[-2:] == (n, n)]
    assert not big, f"factorized_dense saves {big}"


@pytest.mark.parametrize("family", ["lm", "classifier"])
def test_training_reaches_the_kernel(monkeypatch, family):
    """A model training with dropout runs every factorized_dense layer on this kernel, never the
    reference path, in forward and backward."""
    from synthesizer.models import ModelConfig, build_model

    calls = []
    for kernel in (factorized_dense, reference):
        monkeypatch.setattr(kernel, "attend", lambda *a, _k=kernel, _f=kernel.attend, **kw: calls.append(_k.NAME)
                            or _f(*a, **kw))
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=50, d_model=16, n_heads=2, n_layers=2, max_len=16, dropout=0.1,
                         attention="factorized_dense", **({"n_classes": 3} if family == "classifier" else {}))
    model = build_model(family, config).train()
    ids = torch.randint(3, 50, (3, 12))
    pad = torch.zeros(3, 12, dtype=torch.bool)
    pad[1, 9:] = True
    model(ids, pad).float().sum().backward()
    assert calls == ["factorized_dense", "factorized_dense"]


def test_under_autocast_matches_the_reference_path():
    from tests.attention.ops.test_wide_qk import check_autocast_against_reference

    check_autocast_against_reference("factorized_dense", "factorized_dense")
