"""Every fast path of SynthesizerAttention against impl="reference" with the same weights.

Forward and all gradients (input and every parameter) within 1e-5 relative error in float32, on
random inputs with padding (one example padded at the end, one fully padded), causal or not, for
seq < max_len and seq == max_len. Also causality and padding invariance on both kinds of path.
"""

from __future__ import annotations

import pytest
import torch

from synthesizer.attention import SynthesizerAttention
from synthesizer.attention.dispatch import applicable_paths
from tests.helpers import rel_err
from tests.tolerances import GRAD_FLOOR, LAYER

PURE = ["vanilla", "dense", "random", "fixed_random", "factorized_dense", "factorized_random"]
MIXTURES = ["random+vanilla", "dense+vanilla", "random+dense", "dense+random+vanilla", "factorized_random+vanilla",
            "random+factorized_random", "fixed_random+dense", "factorized_dense+vanilla", "factorized_random+dense+vanilla"]
KINDS = PURE + MIXTURES
L, D, H, B = 8, 16, 2, 3



def padding(n: int) -> torch.Tensor:
    """Example 0 unpadded, example 1 padded at the end, example 2 fully padded."""
    mask = torch.zeros(B, n, dtype=torch.bool)
    mask[1, n - 3 :] = True
    mask[2] = True
    return mask


def pair(kind: str, impl: str, causal: bool, **kw) -> tuple[SynthesizerAttention, SynthesizerAttention]:
    """(fast layer, reference layer) holding the same weights; mixture weights made unequal."""
    torch.manual_seed(1)
    ref = SynthesizerAttention(D, H, L, kind, causal, impl="reference", **kw)
    if ref.alpha is not None:
        with torch.no_grad():
            ref.alpha.normal_()
    torch.manual_seed(2)  # different init, so load_state_dict must do the work
    fast = SynthesizerAttention(D, H, L, kind, causal, impl=impl, **kw)
    fast.load_state_dict(ref.state_dict())
    return fast, ref


def assert_grads_close(grads_f: dict, grads_r: dict, what: str) -> None:
    """Every gradient within LAYER.rtol of the larger of its own size and GRAD_FLOOR of the largest gradient.

    A gradient that is zero in exact arithmetic (the key bias of vanilla: softmax ignores a
    constant added to a row) holds only rounding noise on both paths; it must stay at noise level,
    measured against the largest gradient of the layer.
    """
    assert grads_f.keys() == grads_r.keys()
    scale = max(g.abs().max().item() for g in grads_r.values() if g is not None)
    for name, g_r in grads_r.items():
        g_f = grads_f[name]
        assert g_f is not None and g_r is not None, f"{name} has no gradient ({what})"
        assert torch.isfinite(g_f).all(), f"{name} ({what})"
        if g_r.abs().max() <= 1e-6 * scale:
            assert g_f.abs().max() <= LAYER.rtol * scale, f"gradient of {name} should be ~0 ({what})"
        else:
            size = max(g_r.abs().max().item(), GRAD_FLOOR * scale)  # a cancelling sum (alpha): error relative to its terms
            assert (g_f - g_r).abs().max() <= LAYER.rtol * size, f"gradient of {name} ({what})"


def run(layer: SynthesizerAttention, x: torch.Tensor, pad: torch.Tensor | None, grad_out: torch.Tensor):
    """Output and gradients of (x, every parameter) for the loss <out, grad_out>."""
    x = x.clone().requires_grad_(True)
    layer.zero_grad(set_to_none=True)
    out = layer(x, pad)
    (out * grad_out).sum().backward()
    grads = {"x": x.grad}
    grads.update({name: p.grad for name, p in layer.named_parameters()})
    return out.detach(), grads


def fast_cases():
    for kind in KINDS:
        paths = [p for p in applicable_paths(tuple(kind.split("+"))) if p != "reference"]
        for impl in ["auto"] + paths:
            yield kind, impl


# What impl="auto" must run, written by hand from the path table in docs/variants.md, in eval mode and in
# training with dropout: shared for input-independent kinds, fused for dot products, fused_bias for
# random mixed with dot products (blockwise when dropout is on), its own kernel for factorized_dense
# alone and reference for its mixtures. On CPU; ON_CUDA below says what changes on a GPU.
EXPECTED_PATH = {
    "random": ("shared", "shared"), "fixed_random": ("shared", "shared"),
    "factorized_random": ("shared", "shared"), "dense": ("fused", "fused"), "vanilla": ("fused", "fused"),
    "factorized_dense": ("factorized_dense", "factorized_dense"),
    "random+fixed_random": ("shared", "shared"), "random+factorized_random": ("shared", "shared"),
    "fixed_random+factorized_random": ("shared", "shared"),
    "random+dense": ("fused_bias", "blockwise"), "random+vanilla": ("fused_bias", "blockwise"),
    "fixed_random+dense": ("fused_bias", "blockwise"), "fixed_random+vanilla": ("fused_bias", "blockwise"),
    "factorized_random+dense": ("fused", "fused"), "factorized_random+vanilla": ("fused", "fused"),
    "dense+vanilla": ("fused", "fused"),
    "random+factorized_dense": ("reference", "reference"), "fixed_random+factorized_dense": ("reference", "reference"),
    "factorized_random+factorized_dense": ("reference", "reference"),
    "dense+factorized_dense": ("reference", "reference"), "factorized_dense+vanilla": ("reference", "reference"),
    "random+dense+vanilla": ("fused_bias", "blockwise"), "factorized_random+dense+vanilla": ("fused", "fused"),
}


@pytest.fixture
def ran(monkeypatch) -> list[str]:
    """The paths forward really takes: every kernel the layer can call records its name."""
    from synthesizer.attention.dispatch import KERNELS

    calls: list[str] = []

    def spy(name, fn):
        def recorded(*args, **kwargs):
            calls.append(name)
            return fn(*args, **kwargs)
        return recorded

    for name, kernel in KERNELS.items():
        monkeypatch.setattr(kernel, "attend", spy(name, kernel.attend))
    return calls


def test_expected_path_table_covers_every_pure_kind_and_pair():
    from itertools import combinations

    from synthesizer.attention import COMPONENTS

    kinds = [*COMPONENTS, *("+".join(c) for c in combinations(COMPONENTS, 2))]
    assert set(kinds) <= set(EXPECTED_PATH), set(kinds) - set(EXPECTED_PATH)


@pytest.mark.parametrize("kind", list(EXPECTED_PATH))
def test_auto_runs_the_expected_fast_path_and_path_says_so(kind, ran):
    """Forward takes the table's path (never the reference where a fast path applies), and ``path``
    reports the path forward really took, in eval mode and in training with dropout."""
    layer = SynthesizerAttention(D, H, L, kind, causal=True, dropout=0.1)
    assert layer.kind == kind
    x, pad = torch.randn(B, 6, D), padding(6)
    for mode, want in zip(("eval", "train"), EXPECTED_PATH[kind]):
        layer.train(mode == "train")
        ran.clear()
        layer(x, pad)
        assert ran == [want], f"{kind} in {mode} mode ran {ran}, expected {want}"
        assert layer.path == want, f"{kind} in {mode} mode: path says {layer.path!r}, forward ran {want!r}"


# On CUDA the table changes for random mixed with dot products only: sdpa_bias in eval and in training
# with dropout (fused_bias's kernel is a CPU op, blockwise a Python loop).
ON_CUDA = {"fused_bias": "sdpa_bias", "blockwise": "sdpa_bias"}


@pytest.mark.parametrize("kind", list(EXPECTED_PATH))
def test_auto_on_a_cuda_device_runs_sdpa_bias_for_random_mixtures(kind):
    """The dispatcher's decision for a layer on a CUDA device (no GPU needed to ask it); the CPU one
    stays the table's."""
    from synthesizer.attention.dispatch import running_path

    components = tuple(kind.split("+"))
    for training, want in zip((False, True), EXPECTED_PATH[kind]):
        for device, expected in ((torch.device("cuda"), ON_CUDA.get(want, want)), (torch.device("cpu"), want)):
            got = running_path(components, "auto", training=training, dropout=0.1, device=device)
            assert got == expected, f"{kind} on {device}, training={training}: {got!r}, expected {expected!r}"


def test_every_kernel_is_ranked_on_cuda_and_on_cpu_ranked_or_a_candidate():
    from synthesizer.attention.candidates import candidates
    from synthesizer.attention.dispatch import CPU_RANKING, CUDA_RANKING, KERNELS, OPT_IN

    assert sorted(CUDA_RANKING + OPT_IN) == sorted(KERNELS) == sorted(CPU_RANKING + candidates("cpu") + OPT_IN)
    assert not set(CPU_RANKING) & set(candidates("cpu")) and candidates("cuda") == ()


@pytest.mark.parametrize("kind,impl", list(fast_cases()))
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("n", [5, L], ids=["short", "full"])
def test_fast_path_matches_reference(kind, impl, causal, n):
    fast, ref = pair(kind, impl, causal)
    assert fast.path == (applicable_paths(fast.components)[0] if impl == "auto" else impl)
    assert ref.path == "reference"
    x = torch.randn(B, n, D)
    pad = padding(n)
    grad_out = torch.randn(B, n, D)
    out_f, grads_f = run(fast, x, pad, grad_out)
    out_r, grads_r = run(ref, x, pad, grad_out)
    assert torch.isfinite(out_f).all()
    assert rel_err(out_f, out_r) <= LAYER.rtol, f"forward of {kind} via {fast.path}"
    assert_grads_close(grads_f, grads_r, f"{kind} via {fast.path}")


@pytest.mark.parametrize("kind,impl", [("random", "shared"), ("dense", "fused"), ("random+vanilla", "fused_bias")])
def test_fast_path_matches_reference_without_padding(kind, impl):
    """No mask at all takes other branches (is_causal, no per-example division)."""
    for causal in (False, True):
        fast, ref = pair(kind, impl, causal)
        x, grad_out = torch.randn(B, L, D), torch.randn(B, L, D)
        out_f, grads_f = run(fast, x, None, grad_out)
        out_r, grads_r = run(ref, x, None, grad_out)
        assert rel_err(out_f, out_r) <= LAYER.rtol
        assert_grads_close(grads_f, grads_r, f"{kind} via {impl}")


@pytest.mark.parametrize("kind", ["dense", "dense+vanilla", "random+vanilla", "random+dense", "random+factorized_random"])
def test_fast_path_options_match_reference(kind):
    """dense_per_head and mix_per_head on the fast path (vanilla folds its weights per head into its
    query projection: in a mixture of features, and as the lone feature beside a bias term)."""
    fast, ref = pair(kind, "auto", True, dense_per_head=True, mix_per_head=True)
    x, grad_out, pad = torch.randn(B, 6, D), torch.randn(B, 6, D), padding(6)
    out_f, grads_f = run(fast, x, pad, grad_out)
    out_r, grads_r = run(ref, x, pad, grad_out)
    assert rel_err(out_f, out_r) <= LAYER.rtol
    assert_grads_close(grads_f, grads_r, kind)


def test_forced_path_that_does_not_apply_is_rejected():
    with pytest.raises(ValueError, match="shared"):
        SynthesizerAttention(D, H, L, "dense", impl="shared")
    with pytest.raises(ValueError, match="fused"):
        SynthesizerAttention(D, H, L, "random+factorized_dense", impl="fused")
    with pytest.raises(ValueError, match="nope"):
        SynthesizerAttention(D, H, L, "dense", impl="nope")


# ---------------------------------------------------------------------------------- causality


def paths_of(kind: str) -> list[str]:
    return applicable_paths(tuple(kind.split("+")))  # always ends with "reference"


@pytest.mark.parametrize("kind", KINDS)
def test_causal_output_ignores_future_inputs(kind):
    """d out_i / d x_j == 0 exactly for every j > i, on every path of the kind."""
    n = 6
    for impl in paths_of(kind):
        torch.manual_seed(0)
        layer = SynthesizerAttention(D, H, L, kind, causal=True, impl=impl)
        x = torch.randn(2, n, D, requires_grad=True)
        out = layer(x)
        for i in range(n):
            (grad,) = torch.autograd.grad(out[:, i].sum(), x, retain_graph=True)
            assert torch.all(grad[:, i + 1 :] == 0), f"{kind} via {impl}: output {i} sees the future"
            assert grad[:, i].abs().max() > 0


# ---------------------------------------------------------------------------------- padding


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_padded_tokens_do_not_change_real_outputs(kind, causal):
    n = 7
    pad = torch.zeros(2, n, dtype=torch.bool)
    pad[0, 4:] = True
    pad[1, 6:] = True
    x = torch.randn(2, n, D)
    x2 = x.clone()
    x2[pad] = torch.randn(int(pad.sum()), D) * 10
    for impl in paths_of(kind):
        torch.manual_seed(0)
        layer = SynthesizerAttention(D, H, L, kind, causal=causal, impl=impl)
        a, b = layer(x, pad), layer(x2, pad)
        torch.testing.assert_close(a[~pad], b[~pad], rtol=1e-6, atol=1e-6, msg=f"{kind} via {impl}")


@pytest.mark.parametrize("kind", KINDS)
def test_fully_padded_rows_give_zeros_not_nan(kind):
    """A fully padded example: zero attention rows, output = b_O, finite gradients, on every path."""
    n = 5
    pad = torch.zeros(2, n, dtype=torch.bool)
    pad[1] = True
    for causal in (False, True):
        for impl in paths_of(kind):
            torch.manual_seed(0)
            layer = SynthesizerAttention(D, H, L, kind, causal=causal, impl=impl)
            x = torch.randn(2, n, D, requires_grad=True)
            out = layer(x, pad)
            assert torch.isfinite(out).all()
            torch.testing.assert_close(out[1], layer.out.bias.detach().expand(n, D))
            out.square().sum().backward()
            assert torch.isfinite(x.grad).all()
            for name, p in layer.named_parameters():
                assert p.grad is not None and torch.isfinite(p.grad).all(), name
    probs = layer.attention_weights(x.detach(), pad)
    assert torch.all(probs[1] == 0)


@pytest.mark.parametrize("kind,impl", list(fast_cases()))
def test_causal_row_with_no_real_key_matches_reference(kind, impl, any_key_mask):
    """Causal with the first keys padded: the first rows have no key to attend to (zeros, no NaN)."""
    fast, ref = pair(kind, impl, True)
    pad = torch.zeros(B, 6, dtype=torch.bool)
    pad[0, :2] = True
    pad[1, 0] = True
    x, grad_out = torch.randn(B, 6, D), torch.randn(B, 6, D)
    out_f, grads_f = run(fast, x, pad, grad_out)
    out_r, grads_r = run(ref, x, pad, grad_out)
    assert torch.isfinite(out_f).all() and torch.isfinite(out_r).all()
    torch.testing.assert_close(out_r[0, :2], ref.out.bias.detach().expand(2, D))
    assert rel_err(out_f, out_r) <= LAYER.rtol
    assert_grads_close(grads_f, grads_r, f"{kind} via {fast.path}")


@pytest.mark.parametrize("kind", ["random", "fixed_random", "factorized_random", "random+factorized_random",
                                  "dense", "vanilla", "dense+vanilla", "factorized_random+dense+vanilla"])
@pytest.mark.parametrize("padded", [False, True])
def test_fast_paths_keep_no_per_example_attention_matrix(kind, padded):
    """The shared and fused paths save nothing of shape (B, H, n, n) for the backward."""
    n = 32  # larger than any feature size here, so an (n, n) shape can only be attention weights
    torch.manual_seed(0)
    layer = SynthesizerAttention(D, H, n, kind, causal=True)
    assert layer.path in ("shared", "fused")
    x = torch.randn(B, n, D, requires_grad=True)
    pad = torch.zeros(B, n, dtype=torch.bool)
    pad[1, 20:] = True
    saved = []

    def pack(t):
        saved.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x, pad if padded else None)
    big = [s for s in saved if s[-2:] == (n, n) and torch.Size(s).numel() >= B * H * n * n]
    assert not big, f"{kind} via {layer.path} saves {big}"
