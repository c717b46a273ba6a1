"""FLOP formulas of synthesizer.bench.flops against torch's own count of matrix products."""

from __future__ import annotations

import importlib.util

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from synthesizer.attention.factory import build_mixer
from synthesizer.bench.flops import conv_band_extra, layer_flops
from synthesizer.bench.timed_layers import PyPILinformer
from synthesizer.bench.model import model_flops

B, N, D, H, L = 2, 24, 32, 4, 32  # n < L: the top-left block, as in real use
x = torch.randn(B, N, D)


def counted(layer: torch.nn.Module) -> int:
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        layer(x)
    return counter.get_total_flops()


def math_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """scaled_dot_product_attention as two counted matmuls: torch's counter does not see the fused CPU kernel."""
    s = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5 if scale is None else scale)
    return torch.softmax(s, dim=-1) @ v


@pytest.mark.parametrize("kind", ["vanilla", "dense", "random", "fixed_random", "factorized_dense", "factorized_random",
                                  "random+vanilla", "dense+vanilla", "random+dense", "vanilla+factorized_random"])
def test_synthesizer_formulas_match_the_counted_reference_path(kind):
    # The reference path materialises the logits with plain matmuls, so every product is counted.
    assert counted(build_mixer(kind, D, H, L, impl="reference")) == layer_flops(kind, B, N, D, H, L)


def test_convolutions_match_the_algorithm_plus_the_band_overhead():
    for kind in ("lightconv", "dynamicconv"):
        assert counted(build_mixer(kind, D, H, L)) == layer_flops(kind, B, N, D, H, L) + conv_band_extra(B, N, D)
    assert conv_band_extra(1, 128, 8, kernel_size=31, block=64) == 2 * 8 * 2 * 64 * (64 + 30) - 2 * 128 * 8 * 31


def test_linformers_match_with_attention_as_matmuls(monkeypatch):
    monkeypatch.setattr(F, "scaled_dot_product_attention", math_sdpa)
    assert counted(build_mixer("linformer", D, H, L, k=8)) == layer_flops("linformer", B, N, D, H, L, k=8)
    if importlib.util.find_spec("linformer") is None:
        pytest.skip("the PyPI linformer package (bench extra) is not installed")
    assert counted(PyPILinformer(D, H, L, k=8)) == layer_flops("linformer_pypi", B, N, D, H, L, k=8)


def test_closed_forms_and_the_lm_flop_ratio():
    b, n, d, h = 1, 1024, 512, 8
    assert layer_flops("random", b, n, d, h) == 4 * n * d * d + 2 * n * n * d
    assert layer_flops("sdpa", b, n, d, h) == layer_flops("vanilla", b, n, d, h) == 8 * n * d * d + 4 * n * n * d
    assert layer_flops("factorized_random", b, n, d, h, k=8) == layer_flops("random", b, n, d, h) + 2 * h * n * n * 8
    # The "about 1.33x" for a 4-layer LM at d 512, n 1024: attention + FFN, head left out.
    sizes = {"batch": b, "seq": n, "d_model": d, "heads": h, "layers": 4, "vocab": 1}
    ratio = model_flops("vanilla", "classifier", sizes) / model_flops("random", "classifier", sizes)
    assert ratio == pytest.approx((24 * d + 4 * n) / (20 * d + 2 * n))
    assert 1.3 < ratio < 1.36


def test_bad_input_raises_value_error_naming_it():
    with pytest.raises(ValueError, match="banana"):
        layer_flops("banana", 1, 8, 8, 2)
    with pytest.raises(ValueError, match="seq"):
        layer_flops("random", 1, 0, 8, 2)
    with pytest.raises(ValueError, match="not divisible"):
        layer_flops("random", 1, 8, 10, 4)
