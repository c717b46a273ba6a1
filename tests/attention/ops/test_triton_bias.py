"""The triton kernel (``impl="triton"``): the random mixtures through our Triton forward and
backward, against ``impl="reference"`` with the same weights: forward and every gradient (x, the
features through the layer's parameters, R's batch-summed gradient, the mixture weights alpha).

Without a GPU the kernels run in triton's interpreter on CPU tensors, at small sizes (a ragged
n = 20 against blocks of 16, so every kernel sees a full block, a partial one and the causal
diagonal inside a block). triton reads ``TRITON_INTERPRET`` once, when it is first imported, so
conftest.py sets it for the session (this module too, for a run without conftest); if triton was
imported before that, the module skips. With a GPU the same tests run the compiled kernels on
CUDA tensors. Without triton the module skips.
"""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
triton = pytest.importorskip("triton")

# The kernel's masking of any key set is tested here (example 2 is padded at the start, so causal rows
# without a real key occur), which the layer refuses for inputs: see conftest.any_key_mask.
pytestmark = pytest.mark.usefixtures("any_key_mask")

from synthesizer.attention import SynthesizerAttention  # noqa: E402
from synthesizer.attention.dispatch import KERNELS, running_path  # noqa: E402
from synthesizer.attention.ops import triton_bias  # noqa: E402
from tests.attention.test_fastpaths import assert_grads_close, run  # noqa: E402
from tests.helpers import rel_err  # noqa: E402
from tests.tolerances import GRAD_FLOOR, LAYER  # noqa: E402

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if DEVICE.type == "cpu" and not triton_bias.interpreting():
    pytest.skip("triton was imported before this module could turn on its interpreter (TRITON_INTERPRET=1); "
                "run this file on its own", allow_module_level=True)

L, D, H, B, N = 24, 32, 2, 3, 20  # d_head 16 (dense: 17 features, padded to 32 inside the kernel)
KINDS = ["random+vanilla", "random+dense", "fixed_random+vanilla", "factorized_random+vanilla"]
R = "logit_modules.random.r"


def pair(kind: str, causal: bool, dtype: torch.dtype = torch.float32, **kw):
    """(triton layer, reference layer) with the same weights, alpha made unequal, on DEVICE."""
    torch.manual_seed(1)
    ref = SynthesizerAttention(D, H, L, kind, causal, impl="reference", **kw)
    if ref.alpha is not None:
        with torch.no_grad():
            ref.alpha.normal_()
    torch.manual_seed(2)
    fast = SynthesizerAttention(D, H, L, kind, causal, impl="triton", **kw)
    fast.load_state_dict(ref.state_dict())
    fast, ref = fast.to(DEVICE, dtype), ref.to(DEVICE)
    assert fast.path == "triton" and ref.path == "reference"
    return fast, ref


def padding(n: int) -> torch.Tensor:
    """Example 0 unpadded, 1 padded at the end, 2 at the start (causal rows 0-1 have no real key)."""
    mask = torch.zeros(B, n, dtype=torch.bool)
    mask[1, n - 5 :] = True
    mask[2, :2] = True
    return mask.to(DEVICE)


def inputs(n: int, dtype: torch.dtype = torch.float32):
    gen = torch.Generator().manual_seed(3)
    return [torch.randn(B, n, D, generator=gen).to(DEVICE, dtype) for _ in range(2)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_triton_matches_reference_fp32(kind, causal):
    """Forward and every gradient at float32 tolerance (LAYER, see tolerances.py), padded, ragged n."""
    fast, ref = pair(kind, causal)
    x, grad_out = inputs(N)
    pad = padding(N)
    out_f, grads_f = run(fast, x, pad, grad_out)
    out_r, grads_r = run(ref, x, pad, grad_out)
    what = f"{kind}, causal={causal}"
    assert torch.isfinite(out_f).all(), what
    assert rel_err(out_f, out_r) <= LAYER.rtol, f"forward: {what}"
    for name in ((R,) if "random+" in kind and not kind.startswith(("fixed", "factorized")) else ()) + ("alpha",):
        assert grads_f[name].abs().max() > 0, f"no gradient of {name}: {what}"
    assert_grads_close(grads_f, grads_r, what)


@pytest.mark.parametrize("kind", ["random+vanilla", "random+dense"])
def test_triton_matches_reference_without_padding_full_length(kind):
    """No padding (the kernel's other branch), n = max_len, mixture weights per head."""
    for causal in (False, True):
        fast, ref = pair(kind, causal, mix_per_head=True)
        x, grad_out = inputs(L)
        out_f, grads_f = run(fast, x, None, grad_out)
        out_r, grads_r = run(ref, x, None, grad_out)
        assert rel_err(out_f, out_r) <= LAYER.rtol
        assert_grads_close(grads_f, grads_r, f"{kind}, causal={causal}, per-head alpha")


def test_triton_sums_several_bias_terms():
    """random+fixed_random+vanilla: two bias terms, summed before the kernel; R's gradient and all
    three mixture weights' still match."""
    fast, ref = pair("random+fixed_random+vanilla", True)
    x, grad_out = inputs(N)
    out_f, grads_f = run(fast, x, padding(N), grad_out)
    out_r, grads_r = run(ref, x, padding(N), grad_out)
    assert rel_err(out_f, out_r) <= LAYER.rtol
    assert_grads_close(grads_f, grads_r, "random+fixed_random+vanilla")


def test_triton_bias_gradient_is_the_batch_sum_and_deterministic():
    """The kernel's R gradient equals the sum of the per-example gradients (each example alone), and
    two backward passes give the same bits (no atomics)."""
    fast, _ = pair("random+vanilla", False)
    x, grad_out = inputs(N)
    pad = padding(N)
    _, first = run(fast, x, pad, grad_out)
    _, second = run(fast, x, pad, grad_out)
    assert torch.equal(first[R], second[R]) and torch.equal(first["alpha"], second["alpha"])
    per_example = sum(run(fast, x[i : i + 1], pad[i : i + 1], grad_out[i : i + 1])[1][R] for i in range(B))
    torch.testing.assert_close(first[R], per_example, rtol=LAYER.rtol, atol=LAYER.atol * first[R].abs().max().item())


def bf16_error(fast, ref, kind: str, causal: bool) -> tuple[float, dict[str, float]]:
    """Errors of a bfloat16 layer against the float32 reference: the output's relative error, and each
    gradient's max error relative to the larger of its size and GRAD_FLOOR of the largest gradient."""
    x, grad_out = inputs(N)
    pad = padding(N)
    out, grads = run(fast, x.to(torch.bfloat16), pad, grad_out.to(torch.bfloat16))
    out_r, grads_r = run(ref, x, pad, grad_out)
    assert torch.isfinite(out).all() and all(torch.isfinite(g).all() for g in grads.values()), kind
    scale = max(g.abs().max().item() for g in grads_r.values())
    errs = {name: ((grads[name].float() - g_r).abs().max() / max(g_r.abs().max().item(), GRAD_FLOOR * scale)).item()
            for name, g_r in grads_r.items()}
    return rel_err(out.float(), out_r), errs


@pytest.mark.parametrize("kind", KINDS)
def test_triton_bf16_is_as_close_as_the_bf16_reference(kind):
    """bfloat16 (8 significant bits: eps 7.8e-3) against float32: the kernel computes in float32
    inside, so its error is that of rounding inputs, weights and outputs to bfloat16; it must stay
    within twice the bfloat16 reference layer's own error plus 2 eps. (That error is up to 1e-1
    for dense's first layer here: a gradient summed over the batch and sequence in bfloat16.)
    A wrong mask or a mis-scaled term gives errors of order 1."""
    fast, ref = pair(kind, True, torch.bfloat16)
    ref16 = SynthesizerAttention(D, H, L, kind, True, impl="reference").to(DEVICE)
    ref16.load_state_dict(ref.state_dict())
    ref16 = ref16.to(torch.bfloat16)
    out_err, grad_errs = bf16_error(fast, ref, kind, True)
    ref_out_err, ref_grad_errs = bf16_error(ref16, ref, kind, True)
    eps = torch.finfo(torch.bfloat16).eps
    assert out_err <= 2 * ref_out_err + 2 * eps, f"forward of {kind}: {out_err} (reference bf16 {ref_out_err})"
    for name, err in grad_errs.items():
        assert err <= 2 * ref_grad_errs[name] + 2 * eps, f"{name} of {kind}: {err} (reference bf16 {ref_grad_errs[name]})"


def test_triton_under_bfloat16_autocast_computes_in_bfloat16():
    """Under autocast the features come in mixed dtypes (q times a float32 mixture weight, dense's
    float32 key matrix): the kernel computes in autocast's dtype, and R's gradient stays float32."""
    fast, ref = pair("random+dense", True)
    x, grad_out = inputs(N)
    seen = []
    real = triton_bias._TritonBiasAttention.apply
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(triton_bias._TritonBiasAttention, "apply", lambda *a: seen.append(a[0].dtype) or real(*a))
        with torch.autocast(DEVICE.type, dtype=torch.bfloat16):
            out = fast(x, padding(N))
    assert seen == [torch.bfloat16] and out.dtype == torch.bfloat16
    (out.float() * grad_out).sum().backward()
    _, grads_r = run(ref, x, padding(N), grad_out)
    got = fast.logit_modules["random"].r.grad
    assert got.dtype == torch.float32
    assert rel_err(got, grads_r[R]) <= 5e-2  # bfloat16 rounding of the inputs (eps 7.8e-3), summed


def test_triton_float16_forward_and_backward_run():
    """float16 inputs: finite, and within float16 rounding of the float32 reference."""
    fast, ref = pair("random+vanilla", True, torch.float16)
    x, grad_out = inputs(N)
    out, grads = run(fast, x.half(), padding(N), grad_out.half())
    out_r, grads_r = run(ref, x, padding(N), grad_out)
    assert rel_err(out.float(), out_r) <= 1e-2
    assert rel_err(grads[R].float(), grads_r[R]) <= 1e-2


def test_triton_rows_without_a_key_give_zeros_and_zero_gradients():
    """A fully padded example: zeros out, no NaN anywhere, as on the reference path."""
    fast, ref = pair("random+vanilla", False)
    x, grad_out = inputs(N)
    pad = padding(N)
    pad[1] = True
    out_f, grads_f = run(fast, x, pad, grad_out)
    out_r, grads_r = run(ref, x, pad, grad_out)
    assert torch.equal(out_f[1], fast.out.bias.detach().expand_as(out_f[1])), "no key: zeros before the output layer"
    assert_grads_close(grads_f, grads_r, "fully padded example")


def test_triton_path_and_dispatch():
    """impl="triton" is reported by ``path`` where it runs, never chosen by "auto", and refused with the
    allowed kinds named where it does not apply; dropout while training falls back to the reference."""
    assert "triton" in KERNELS
    layer = SynthesizerAttention(D, H, L, "random+vanilla", impl="triton").to(DEVICE)
    assert layer.path == "triton"
    layer.dropout = 0.1
    assert layer.train().path == "reference" and layer.eval().path == "triton"
    for device in ("cpu", "cuda"):
        assert running_path(("random", "vanilla"), "auto", training=False, dropout=0.0,
                            device=torch.device(device)) != "triton"
    with pytest.raises(ValueError, match="random\\+vanilla"):
        SynthesizerAttention(D, H, L, "dense+vanilla", impl="triton")
    with pytest.raises(ValueError, match="input-independent"):
        SynthesizerAttention(D, H, L, "random", impl="triton")


def test_triton_refuses_head_widths_past_its_limit():
    q = torch.zeros(1, 1, 4, triton_bias.MAX_WIDTH + 1, device=DEVICE)
    with pytest.raises(ValueError, match="at most 256"):
        triton_bias.triton_bias_attention(q, q, q, None, None, False)
