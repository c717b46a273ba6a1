"""The sdpa_bias kernel: random mixtures through one scaled_dot_product_attention call whose float
mask (the bias) requires grad, against impl="reference" with the same weights, forward and every
gradient (x, q/k/v through the layer's parameters, R, the mixture weights); and the dispatcher's
choice of it on CUDA.

On CPU the kernel runs sdpa's math backend. Tests named ``test_cuda_*`` need a GPU and skip
without one; ``pytest -k cuda`` (what ``scripts/gpu_check.sh`` runs) selects them.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend

from synthesizer.attention import SynthesizerAttention
from synthesizer.attention.dispatch import KERNELS
from synthesizer.attention.ops import sdpa_bias
from tests.attention.test_fastpaths import B, D, H, L, assert_grads_close, pair, ran, run  # noqa: F401 (ran: a fixture)
from tests.helpers import rel_err
from tests.tolerances import LAYER

KINDS = ["random+vanilla", "random+dense", "fixed_random+vanilla", "random+factorized_random"]
# The parameters whose gradients the kernel itself must give (the others come from autograd around it).
R = "logit_modules.random.r"
BIAS_GRADS = {"random+vanilla": (R, "alpha"), "random+dense": (R, "alpha"), "fixed_random+vanilla": ("alpha",),
              "random+factorized_random": (R, "alpha")}
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                   reason="needs a CUDA device: torch.cuda.is_available() is False")


def padding(kind: str, n: int) -> torch.Tensor | None:
    """None; "end": example 1 padded at the end, example 2 fully padded (its rows have no key);
    "start": the first keys padded, so that causal rows before the first real key have none."""
    if kind == "none":
        return None
    mask = torch.zeros(B, n, dtype=torch.bool)
    if kind == "end":
        mask[1, n - 3 :] = True
        mask[2] = True
    else:
        mask[0, :2] = True
        mask[1, 0] = True
    return mask


def compare(kind: str, causal: bool, pad_kind: str, n: int, device: torch.device, tol=LAYER) -> None:
    """sdpa_bias against the reference on ``device``: forward and every gradient."""
    fast, ref = (layer.to(device) for layer in pair(kind, "sdpa_bias", causal))
    assert fast.path == "sdpa_bias" and ref.path == "reference"
    gen = torch.Generator().manual_seed(3)
    x, grad_out = (torch.randn(B, n, D, generator=gen).to(device) for _ in range(2))
    pad = padding(pad_kind, n)
    pad = None if pad is None else pad.to(device)
    out_f, grads_f = run(fast, x, pad, grad_out)
    out_r, grads_r = run(ref, x, pad, grad_out)
    what = f"{kind}, causal={causal}, padding={pad_kind}, n={n}, {device}"
    assert torch.isfinite(out_f).all(), what
    assert rel_err(out_f, out_r) <= tol.rtol, f"forward: {what}"
    for name in BIAS_GRADS[kind]:
        assert grads_f[name] is not None and grads_f[name].abs().max() > 0, f"no gradient of {name}: {what}"
    assert_grads_close(grads_f, grads_r, what)
    if pad is not None:  # rows without a real key give zeros: the output is the output projection's bias
        visible = torch.ones(n, n, dtype=torch.bool, device=device)  # [i, j]: query i may see key j
        visible = visible.tril() if causal else visible
        empty = ~(~pad[:, None, :] & visible).any(-1)  # (B, n)
        assert bool(empty.any()) == (pad_kind == "end" or causal), what  # "start" empties causal rows only
        assert torch.equal(out_f[empty], fast.out.bias.detach().expand(int(empty.sum()), D)), what


@pytest.mark.parametrize("pad_kind", ["none", "end", "start"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("kind", KINDS)
def test_sdpa_bias_matches_reference(kind, causal, pad_kind, any_key_mask):
    for n in (5, L):  # a head size and a length that are not multiples of the padded head size
        compare(kind, causal, pad_kind, n, torch.device("cpu"))


def test_sdpa_bias_on_cpu_uses_the_mask_gradient_of_sdpa(monkeypatch):
    """One sdpa call, handed the bias as a float mask that requires grad: R's gradient comes out of
    sdpa's backward."""
    seen = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, **kwargs):
        seen.append((attn_mask.shape, attn_mask.requires_grad, q.shape[-1], kwargs.get("scale")))
        return sdpa(q, k, v, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(sdpa_bias.F, "scaled_dot_product_attention", spy)
    fast, _ = pair("random+dense", "sdpa_bias", True)
    x = torch.randn(B, L, D)
    fast(x, padding("end", L)).sum().backward()
    # (1, H, n, n) shared by the batch; dense's d_h + 1 features plus the padding feature, padded to 16
    assert seen == [((1, H, L, L), True, 16, 1.0)]
    assert fast.logit_modules["random"].r.grad.abs().max() > 0


def test_sdpa_bias_drops_per_example_in_training():
    """Dropout is sdpa's: on in training (reproducible from the seed), off in eval."""
    torch.manual_seed(0)
    layer = SynthesizerAttention(D, H, L, "random+vanilla", causal=True, dropout=0.5, impl="sdpa_bias")
    x = torch.randn(B, L, D)
    assert layer.path == "sdpa_bias"
    torch.manual_seed(1)
    a = layer(x)
    torch.manual_seed(1)
    b = layer(x)
    c = layer(x)
    assert torch.equal(a, b) and not torch.equal(a, c)
    layer.eval()
    assert layer.path == "sdpa_bias" and torch.equal(layer(x), layer(x))
    assert not torch.allclose(layer(x), a)


def test_sdpa_bias_is_a_kernel_with_the_kernel_interface():
    assert KERNELS["sdpa_bias"] is sdpa_bias and sdpa_bias.NEEDS == "features"
    with pytest.raises(ValueError, match="sdpa_bias"):
        SynthesizerAttention(D, H, L, "dense+vanilla", impl="sdpa_bias")  # no bias term: fused's layer


# ------------------------------------------------------------------------------------ on a GPU


@requires_cuda
@pytest.mark.parametrize("pad_kind", ["none", "end", "start"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("kind", KINDS)
def test_cuda_sdpa_bias_matches_reference(kind, causal, pad_kind, any_key_mask):
    for n in (5, L):
        compare(kind, causal, pad_kind, n, torch.device("cuda"))


@requires_cuda
@pytest.mark.parametrize("kind", ["random+vanilla", "random+dense"])
def test_cuda_sdpa_bias_runs_the_memory_efficient_kernel(kind, monkeypatch):
    """With only the memory-efficient backend allowed, the kernel still takes these inputs (a mask
    that requires grad, broadcast over the batch, padded head sizes) and gives the same numbers:
    the GPU path does not fall back to the math kernel."""
    monkeypatch.setattr(sdpa_bias, "CUDA_BACKENDS", [SDPBackend.EFFICIENT_ATTENTION])
    for causal in (False, True):
        compare(kind, causal, "end", L, torch.device("cuda"))


@requires_cuda
@pytest.mark.parametrize("kind", ["random+vanilla", "random+dense", "fixed_random+dense", "random+dense+vanilla"])
def test_cuda_dispatcher_picks_sdpa_bias(kind, ran):
    """On a GPU, random mixtures run sdpa_bias in eval and in training with dropout, and ``path`` says so."""
    layer = SynthesizerAttention(D, H, L, kind, causal=True, dropout=0.1).cuda()
    x = torch.randn(B, 6, D, device="cuda")
    for training in (False, True):
        layer.train(training)
        ran.clear()
        layer(x, padding("end", 6).cuda()).sum().backward()
        assert ran == ["sdpa_bias"] and layer.path == "sdpa_bias", (kind, training, ran)


@requires_cuda
def test_cuda_sdpa_bias_trains_under_bf16_autocast(monkeypatch):
    """The trainer's bf16 autocast on CUDA: bf16 features beside a float32 R, on the memory-efficient
    kernel; close to the float32 reference at bf16's precision."""
    monkeypatch.setattr(sdpa_bias, "CUDA_BACKENDS", [SDPBackend.EFFICIENT_ATTENTION])
    fast, ref = (layer.cuda() for layer in pair("random+vanilla", "auto", True, dropout=0.0))
    assert fast.path == "sdpa_bias"
    x, pad = torch.randn(B, L, D, device="cuda"), padding("end", L).cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = fast(x, pad)
    out.float().square().sum().backward()
    ref(x, pad).square().sum().backward()
    torch.testing.assert_close(out.float(), ref(x, pad).detach(), rtol=5e-2, atol=5e-2)
    r_fast, r_ref = fast.logit_modules["random"].r.grad, ref.logit_modules["random"].r.grad
    assert torch.isfinite(r_fast).all() and rel_err(r_fast, r_ref) < 5e-2
