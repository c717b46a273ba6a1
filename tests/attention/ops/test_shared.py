"""The ``shared`` kernel's causal block-triangular products against the reference.

The layer tests in tests/attention/test_fastpaths.py run at lengths below one block; here the block is
made small so that every length has several blocks (and a last, shorter one)."""

from __future__ import annotations

import pytest
import torch
from synthesizer.attention import SynthesizerAttention
from synthesizer.attention.ops import shared
from torch.utils.flop_counter import FlopCounterMode

from tests.attention.test_fastpaths import B, L, assert_grads_close, pair, padding, run
from tests.helpers import rel_err
from tests.tolerances import LAYER

SHARED_KINDS = ["random", "fixed_random", "factorized_random", "random+factorized_random", "fixed_random+factorized_random"]


@pytest.mark.parametrize("n, block, want", [(8, 3, [(0, 3), (3, 6), (6, 8)]), (8, 8, [(0, 8)]), (8, 0, [(0, 8)]),
                                            (4, 128, [(0, 4)])])
def test_row_blocks_cover_every_row_once(n, block, want):
    assert shared.row_blocks(n, block) == want


@pytest.mark.parametrize("kind", SHARED_KINDS)
@pytest.mark.parametrize("block", [1, 3])
@pytest.mark.parametrize("n", [5, L], ids=["short", "full"])
@pytest.mark.parametrize("padded", [False, True])
def test_causal_blocks_match_reference(kind, block, n, padded, monkeypatch):
    monkeypatch.setattr(shared, "CAUSAL_BLOCK", block)
    fast, ref = pair(kind, "shared", causal=True)
    x, grad_out = torch.randn(B, n, fast.d_model), torch.randn(B, n, fast.d_model)
    pad = padding(n) if padded else None
    out_f, grads_f = run(fast, x, pad, grad_out)
    out_r, grads_r = run(ref, x, pad, grad_out)
    assert torch.isfinite(out_f).all()
    assert rel_err(out_f, out_r) <= LAYER.rtol, f"forward of {kind}"
    assert_grads_close(grads_f, grads_r, f"{kind}, causal blocks of {block}")


def test_block_product_and_gradients_in_float64():
    """The Function alone, causal in blocks of 2 over 7 rows, against autograd through the masked product."""
    torch.manual_seed(0)
    h, n, c = 2, 7, 5
    r = torch.randn(h, n, n, dtype=torch.float64, requires_grad=True)
    cols = torch.randn(h, n, c, dtype=torch.float64, requires_grad=True)
    keep = (torch.rand(n, 3) > 0.3).to(torch.float64)
    g_out, g_den = torch.randn(h, n, c, dtype=torch.float64), torch.randn(h, n, 3, dtype=torch.float64)
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)

    def loss(out, den):
        return (out * g_out).sum() + (den * g_den).sum()

    out, den = shared._SharedSoftmaxProduct.apply(r, cols, keep, 2)
    got = torch.autograd.grad(loss(out, den), (r, cols))
    probs = torch.softmax(r.masked_fill(mask, float("-inf")), dim=-1)
    want_out, want_den = probs @ cols, probs @ keep
    want = torch.autograd.grad(loss(want_out, want_den), (r, cols))
    torch.testing.assert_close(out, want_out, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(den, want_den, rtol=1e-12, atol=1e-12)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
    assert got[0].masked_select(mask).abs().max() == 0  # nothing flows to the masked triangle


def test_causal_products_skip_the_upper_triangle():
    """8 blocks: forward and backward products cost (1 + 1/8) / 2 of the full ones."""
    n, c = 64, 16
    r = torch.randn(2, n, n, requires_grad=True)
    cols = torch.randn(2, n, c, requires_grad=True)

    def flops(block: int) -> int:
        with FlopCounterMode(display=False) as counter:
            out, _ = shared._SharedSoftmaxProduct.apply(r, cols, None, block)
            out.sum().backward()
        return counter.get_total_flops()

    full = flops(0)  # not causal
    assert full == 3 * 2 * 2 * n * n * c  # P V, P^T dO and dO V^T
    assert flops(n) == full  # causal in one block
    assert flops(n // 8) == full * (1 + 1 / 8) / 2


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("block", [0, 5], ids=["whole", "blocks"])
def test_shared_backward_under_bfloat16_autocast(causal, block, monkeypatch):
    """Under autocast R stays float32 while the values are bfloat16, and the backward (which runs
    without autocast) must bring them together: it crashed on the dtype mismatch before. R's
    gradient stays float32 and within bfloat16 rounding of the float32 run's."""
    monkeypatch.setattr(shared, "CAUSAL_BLOCK", block)
    torch.manual_seed(0)
    layer = SynthesizerAttention(32, 2, 16, "random", causal)
    x = torch.randn(2, 16, 32)
    pad = torch.zeros(2, 16, dtype=torch.bool)
    pad[1, -4:] = True
    layer(x, pad).sum().backward()
    want = layer.logit_modules["random"].r.grad.clone()
    layer.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(x, pad)
    out.float().sum().backward()
    got = layer.logit_modules["random"].r.grad
    assert got.dtype == torch.float32 and torch.isfinite(got).all()
    assert ((got - want).abs().max() / want.abs().max()).item() < 5e-2
