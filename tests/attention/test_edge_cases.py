"""Edge cases of SynthesizerAttention: empty inputs, float16/bfloat16 with padding, the types of the
constructor options, canonical component order (state_dicts across spellings) and what ``path`` says."""

from __future__ import annotations

import itertools

import pytest
import torch

from synthesizer.attention import COMPONENTS, SynthesizerAttention, parse_kind
from synthesizer.attention.ops import fused_bias
from synthesizer.attention.dispatch import applicable_paths
from synthesizer.attention.factory import check_kind
from tests.helpers import rel_err

L, D, H = 8, 16, 2
# Every pure kind, every two-component mixture, and one three-component mixture.
KINDS = [*COMPONENTS, *("+".join(c) for c in itertools.combinations(COMPONENTS, 2)), "random+dense+vanilla"]
CASES = [(kind, impl) for kind in KINDS for impl in applicable_paths(parse_kind(kind))]


def build(kind: str, seed: int = 0, **kw) -> SynthesizerAttention:
    """A layer with unequal mixture weights (alpha starts at zero)."""
    torch.manual_seed(seed)
    layer = SynthesizerAttention(D, H, L, kind, **kw)
    if layer.alpha is not None:
        with torch.no_grad():
            layer.alpha.normal_()
    return layer


# ---------------------------------------------------------------------------------- empty inputs


@pytest.mark.parametrize("kind,impl", CASES)
def test_empty_batch_or_sequence_gives_empty_output_and_zero_gradients(kind, impl):
    """Like nn.MultiheadAttention: (0, n, d) -> (0, n, d) and (B, 0, d) -> (B, 0, d), on every path."""
    for causal, padded, training, shape in itertools.product((False, True), (False, True), (False, True),
                                                             ((0, 5), (3, 0), (0, 0))):
        what = f"{kind} via {impl}, causal={causal}, padded={padded}, training={training}, shape={shape}"
        layer = build(kind, causal=causal, dropout=0.1, impl=impl).train(training)
        x = torch.randn(*shape, D, requires_grad=True)
        pad = torch.zeros(shape, dtype=torch.bool) if padded else None
        out = layer(x, pad)
        assert out.shape == (*shape, D) and out.dtype == x.dtype, what
        out.sum().backward()
        assert x.grad is not None and x.grad.shape == x.shape, what
        for name, p in layer.named_parameters():
            assert p.grad is not None and torch.all(p.grad == 0), f"{name}: {what}"
        probs = layer.attention_weights(x.detach(), pad)
        assert probs.shape == (shape[0], H, shape[1], shape[1]), what


@pytest.mark.parametrize("kind", KINDS)
def test_decoding_step_with_no_new_position(kind):
    """t = 0 with a cache: an empty output, the cache unchanged, later steps still exact."""
    layer = build(kind, causal=True).eval()
    x = torch.randn(2, 4, D)
    with torch.no_grad():
        full = layer(x)
        cache = layer.new_cache()
        empty = layer(x[:, :0], cache=cache)  # before anything is cached
        assert empty.shape == (2, 0, D) and cache.length == 0
        outs = [layer(x[:, :2], cache=cache)]
        empty = layer(x[:, :0], torch.zeros(2, 0, dtype=torch.bool), cache=cache)  # between steps, with padding
        assert empty.shape == (2, 0, D) and cache.length == 2
        outs.append(layer(x[:, 2:], cache=cache))
    assert (torch.cat(outs, dim=1) - full).abs().max() <= 1e-5


# ---------------------------------------------------------------------------------- half precision


def _pad(n: int) -> torch.Tensor:
    """Example 0 unpadded, example 1 padded at the end, example 2 fully padded."""
    mask = torch.zeros(3, n, dtype=torch.bool)
    mask[1, n - 3 :] = True
    mask[2] = True
    return mask


# Half precision against the float32 reference path with the same weights. Rounding the inputs and
# weights costs eps/2 relative each, and value projection, logits, softmax, P V and the output
# projection compound a few of those: measured up to ~1 eps of the dtype here (float16 eps ~1e-3,
# bfloat16 eps ~7.8e-3), so the bound is 5 eps.
HALF_TOLERANCE = {torch.float16: 5e-3, torch.bfloat16: 4e-2}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("kind,impl", CASES)
def test_half_precision_with_padding_on_every_path(kind, impl, dtype):
    """Finite outputs and gradients, close to float32; a fixed -1e30 fill used to overflow float16."""
    for causal, n in itertools.product((False, True), (5, L)):
        what = f"{kind} via {impl}, {dtype}, causal={causal}, n={n}"
        ref = build(kind, causal=causal, impl="reference")
        layer = build(kind, causal=causal, impl=impl)
        layer.load_state_dict(ref.state_dict())
        x, pad = torch.randn(3, n, D), _pad(n)
        with torch.no_grad():
            want = ref(x, pad)
        layer.to(dtype)
        assert layer.path == impl or impl == "auto", what
        xh = x.to(dtype).requires_grad_(True)
        got = layer(xh, pad)
        assert got.dtype == dtype and torch.isfinite(got).all(), what
        assert rel_err(got.float(), want) <= HALF_TOLERANCE[dtype], what
        got.float().square().sum().backward()
        assert torch.isfinite(xh.grad).all(), what
        for name, p in layer.named_parameters():
            assert p.grad is not None and torch.isfinite(p.grad).all(), f"{name}: {what}"


# ---------------------------------------------------------------------------------- option types


@pytest.mark.parametrize("option,value", [
    ("d_model", True), ("d_model", 16.0), ("d_model", "16"), ("d_model", 0),
    ("n_heads", True), ("n_heads", 2.0), ("n_heads", -2),
    ("max_len", True), ("max_len", 8.5), ("max_len", "8"), ("max_len", 0),
    ("k", True), ("k", 2.0), ("k", 0),
    ("fd_split", True), ("fd_split", 2.0), ("fd_split", "2"), ("fd_split", 0),
    ("dropout", "x"), ("dropout", True), ("dropout", None), ("dropout", 1.0), ("dropout", -0.1),
    ("dropout", float("nan")), ("dropout", [0.1]),
    ("causal", 1), ("causal", "yes"), ("causal", None),
    ("dense_per_head", 1), ("dense_per_head", "True"),
    ("mix_per_head", 0), ("mix_per_head", None),
    ("kind", 3), ("kind", None), ("kind", ["random"]),
    ("impl", None), ("impl", 1), ("impl", "fast"), ("impl", ["auto"]),
])
def test_bad_option_type_names_the_option(option, value):
    options = {"d_model": D, "n_heads": H, "max_len": L, "kind": "factorized_dense+dense", option: value}
    with pytest.raises(ValueError) as info:
        SynthesizerAttention(**options)
    message = str(info.value)
    assert option in message or (option == "kind" and "attention kind" in message), message
    assert repr(value) in message, message
    assert "\n" not in message


@pytest.mark.parametrize("option,value,stored", [
    ("dropout", 0, 0.0), ("dropout", 0.5, 0.5), ("max_len", 8, 8), ("fd_split", 2, None), ("causal", True, True),
])
def test_good_option_values_are_kept(option, value, stored):
    options = {"d_model": D, "n_heads": H, "max_len": L, "kind": "factorized_dense", option: value}
    layer = SynthesizerAttention(**options)
    if option == "fd_split":
        assert layer.logit_modules["factorized_dense"].a == value
    else:
        got = getattr(layer, option)
        assert got == stored and type(got) is type(stored)


# ---------------------------------------------------------------------------------- canonical order


@pytest.mark.parametrize("canonical", ["random+vanilla", "dense+vanilla", "random+dense", "random+dense+vanilla",
                                       "factorized_random+factorized_dense"])
@pytest.mark.parametrize("mix_per_head", [False, True])
def test_state_dict_loads_across_spellings_with_each_weight_on_its_component(canonical, mix_per_head):
    names = canonical.split("+")
    saved = build(canonical, seed=0, causal=True, mix_per_head=mix_per_head)
    x = torch.randn(2, 6, D)
    want = saved(x)
    for order in itertools.permutations(names):
        for spelling in ("+".join(order), "+".join(order).upper()):
            layer = build(spelling, seed=1, causal=True, mix_per_head=mix_per_head)
            assert layer.kind == canonical and layer.components == tuple(names)
            assert check_kind(spelling) == canonical
            layer.load_state_dict(saved.state_dict())
            assert torch.equal(layer(x), want), spelling
            assert torch.equal(layer.mixture_weights(), saved.mixture_weights())


def test_project_kind_names_are_canonical():
    from synthesizer.comparison.presets import DEFAULT_KINDS

    for kind in DEFAULT_KINDS:
        assert "+".join(parse_kind(kind)) == kind
    assert parse_kind("vanilla+R") == parse_kind("R+V") == ("random", "vanilla")


# ---------------------------------------------------------------------------------- path


def test_path_follows_training_mode_and_repr_says_it():
    layer = build("random+vanilla", dropout=0.1)
    assert layer.training and layer.path == "blockwise" and "path='blockwise'" in repr(layer)
    layer.eval()
    assert layer.path == "fused_bias" and "path='fused_bias'" in repr(layer)
    forced = build("random+dense", dropout=0.1, impl="fused_bias")
    assert forced.path == "blockwise"  # the kernel has no dropout with a float mask
    assert forced.eval().path == "fused_bias"
    assert build("random+vanilla").path == "fused_bias"  # no dropout: the kernel runs in training too


def test_path_falls_back_where_the_fused_bias_kernel_is_missing(monkeypatch):
    """A device without the CPU kernel: ``path`` and forward both take blockwise."""
    layer = build("random+vanilla").eval()
    ran = []
    monkeypatch.setattr(fused_bias, "available", lambda device: False)
    monkeypatch.setattr(fused_bias, "attend", lambda *a: ran.append("fused_bias"))
    assert layer.path == "blockwise"
    out = layer(torch.randn(2, 5, D))
    assert not ran and torch.isfinite(out).all()
