"""The reference path of SynthesizerAttention against the spec's formulas, recomputed here by hand.

The re-computation below deliberately avoids the library's helpers: it loops over heads and
builds each component's logits straight from the formulas in SPEC.md, reading the weights by
their parameter names. Also: gradcheck in float64 (reference and fast paths) and bfloat16.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.func import functional_call

from synthesizer.attention import SynthesizerAttention
from synthesizer.attention.dispatch import applicable_paths
from tests.helpers import rel_err

KINDS = [
    "vanilla", "dense", "random", "fixed_random", "factorized_dense", "factorized_random",
    "random+vanilla", "dense+vanilla", "random+dense", "dense+random+vanilla",
    "factorized_random+vanilla", "random+factorized_random", "fixed_random+dense",
    "factorized_dense+random+vanilla",
]



def padding(batch: int, n: int, *, full: bool = True) -> torch.Tensor:
    """Example 0 unpadded, example 1 padded at the end, the last example fully padded (if full)."""
    mask = torch.zeros(batch, n, dtype=torch.bool)
    mask[1, n - 2 :] = True
    if full:
        mask[-1] = True
    return mask


def spec_forward(layer: SynthesizerAttention, x: torch.Tensor, pad: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """SPEC.md's definition, written independently of the library.

    Returns the output (B, n, d) and the attention probabilities (B, H, n, n).
    """
    p = dict(layer.named_parameters())
    p.update(dict(layer.named_buffers()))
    B, n, d = x.shape
    H, L = layer.n_heads, layer.max_len
    dh = d // H

    def head(w: torch.Tensor, b: torch.Tensor, h: int) -> torch.Tensor:
        # x W_h + b_h with W_h the rows h*dh..(h+1)*dh-1 of an nn.Linear weight
        rows = slice(h * dh, (h + 1) * dh)
        return x @ w[rows].T + b[rows]  # (B, n, dh)

    def logits(component: str) -> torch.Tensor:
        s = torch.zeros(B, H, n, n, dtype=x.dtype)
        pre = f"logit_modules.{component}."
        for h in range(H):
            if component == "vanilla":
                q = head(p[pre + "query.weight"], p[pre + "query.bias"], h)
                k = head(p[pre + "key.weight"], p[pre + "key.bias"], h)
                s[:, h] = torch.einsum("bie,bje->bij", q, k) / math.sqrt(dh)
            elif component == "dense":
                hidden = torch.relu(head(p[pre + "hidden.weight"], p[pre + "hidden.bias"], h))
                w2, b2 = p[pre + "w2"], p[pre + "b2"]
                if w2.dim() == 3:  # dense_per_head
                    w2, b2 = w2[h], b2[h]
                s[:, h] = hidden @ w2.T[:, :n] + b2[:n]
            elif component in ("random", "fixed_random"):
                s[:, h] = p[pre + "r"][h, :n, :n]
            elif component == "factorized_random":
                s[:, h] = (p[pre + "r1"][h] @ p[pre + "r2"][h].T)[:n, :n]
            elif component == "factorized_dense":
                hidden = torch.relu(head(p[pre + "hidden.weight"], p[pre + "hidden.bias"], h))
                pa = hidden @ p[pre + "wa"][h] + p[pre + "ba"][h]  # (B, n, a)
                pb = hidden @ p[pre + "wb"][h] + p[pre + "bb"][h]  # (B, n, b)
                a, b = pa.shape[-1], pb.shape[-1]
                assert a * b == L
                s[:, h] = (pa.repeat_interleave(b, dim=-1) * pb.tile(1, 1, a))[..., :n]
            else:
                raise AssertionError(component)
        return s

    comps = layer.components
    if len(comps) == 1:
        weights = torch.ones(H, 1, dtype=x.dtype)
    else:
        alpha = p["alpha"]
        w = torch.softmax(alpha, dim=-1)
        weights = w if alpha.dim() == 2 else w.expand(H, -1)  # (H, C)
    s = sum(weights[:, c].view(1, H, 1, 1) * logits(comp) for c, comp in enumerate(comps))

    masked = torch.zeros(B, 1, n, n, dtype=torch.bool)
    if layer.causal:
        masked |= torch.ones(n, n, dtype=torch.bool).triu(1)
    if pad is not None:
        masked |= pad[:, None, None, :]
    s = s.masked_fill(masked, float("-inf"))
    probs = torch.zeros_like(s)
    for bi in range(B):
        for i in range(n):
            if not bool(masked[bi, 0, i].all()):
                probs[bi, :, i] = torch.softmax(s[bi, :, i], dim=-1)

    v = x @ p["value.weight"].T + p["value.bias"]  # (B, n, d)
    heads = [probs[:, h] @ v[..., h * dh : (h + 1) * dh] for h in range(H)]
    return torch.cat(heads, dim=-1) @ p["out.weight"].T + p["out.bias"], probs


def build(kind: str, L: int = 8, d: int = 12, H: int = 3, seed: int = 0, **kw) -> SynthesizerAttention:
    torch.manual_seed(seed)
    return SynthesizerAttention(d, H, L, kind, **kw)


def randomize_alpha(layer: SynthesizerAttention) -> None:
    """Alpha starts at zero (equal weights): make the weights unequal so their use is tested."""
    if layer.alpha is not None:
        with torch.no_grad():
            layer.alpha.normal_()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [5, 8])
def test_reference_matches_spec(kind, causal, n):
    layer = build(kind, causal=causal, impl="reference").double()
    randomize_alpha(layer)
    x = torch.randn(3, n, 12, dtype=torch.float64)
    pad = padding(3, n)
    got = layer(x, pad)
    want, want_probs = spec_forward(layer, x, pad)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(layer.attention_weights(x, pad), want_probs, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kind", ["dense", "dense+vanilla", "random+dense", "factorized_dense+factorized_random"])
def test_reference_matches_spec_options(kind):
    """dense_per_head, mix_per_head, a given fd_split and k."""
    layer = build(kind, L=12, causal=True, impl="reference", dense_per_head=True, mix_per_head=True,
                  fd_split=2, k=3).double()
    randomize_alpha(layer)
    if "dense" in layer.components:
        assert layer.logit_modules["dense"].w2.shape == (3, 12, 4)
    if layer.alpha is not None:
        assert layer.alpha.shape == (3, len(layer.components))
    x = torch.randn(3, 10, 12, dtype=torch.float64)
    pad = padding(3, 10)
    torch.testing.assert_close(layer(x, pad), spec_forward(layer, x, pad)[0], rtol=1e-10, atol=1e-10)


def test_factorized_dense_index_rule():
    """S[i, j] = Pa[i, j // b] * Pb[i, j % b] with a = 2, b = 3: checked entry by entry."""
    layer = build("factorized_dense", L=6, d=4, H=1, fd_split=2, impl="reference").double()
    fd = layer.logit_modules["factorized_dense"]
    assert (fd.a, fd.b) == (2, 3)
    x = torch.randn(1, 5, 4, dtype=torch.float64)
    hidden = torch.relu(x @ fd.hidden.weight.T + fd.hidden.bias)[0]
    pa = hidden @ fd.wa[0] + fd.ba[0]
    pb = hidden @ fd.wb[0] + fd.bb[0]
    s = fd.logits(x, 0, 5)[0, 0]
    for i in range(5):
        for j in range(5):
            assert torch.allclose(s[i, j], pa[i, j // 3] * pb[i, j % 3], rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------- gradcheck


def _gradcheck(layer: SynthesizerAttention, x: torch.Tensor, pad: torch.Tensor) -> None:
    names = [n for n, _ in layer.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for _, p in layer.named_parameters())

    def f(x, *ps):
        return functional_call(layer, dict(zip(names, ps)), (x, pad))

    assert torch.autograd.gradcheck(f, (x.requires_grad_(True),) + params, eps=1e-6, atol=1e-6, rtol=1e-5)


GRADCHECK_CASES = [(kind, path) for kind in KINDS[:10] for path in applicable_paths(tuple(kind.split("+")))]


@pytest.mark.parametrize("kind,path", GRADCHECK_CASES)
def test_gradcheck_float64(kind, path):
    causal = len(kind) % 2 == 0  # both settings across the kinds, at half the cost
    layer = build(kind, L=4, d=4, H=2, k=2, causal=causal, impl=path).double()
    randomize_alpha(layer)
    x = torch.randn(2, 4, 4, dtype=torch.float64)
    pad = torch.tensor([[False, False, False, True], [False, False, False, False]])
    _gradcheck(layer, x, pad)


# ---------------------------------------------------------------------------------- bfloat16


@pytest.mark.parametrize("kind", ["vanilla", "dense", "random", "factorized_dense", "factorized_random",
                                  "dense+random+vanilla", "factorized_random+vanilla"])
@pytest.mark.parametrize("impl", ["auto", "reference"])
def test_bfloat16_close_to_float32(kind, impl):
    layer = build(kind, L=16, d=32, H=4, causal=True, impl=impl)
    x = torch.randn(2, 16, 32)
    pad = torch.zeros(2, 16, dtype=torch.bool)
    pad[1, 12:] = True
    want = layer(x, pad)
    got = layer.to(torch.bfloat16)(x.bfloat16(), pad)
    assert got.dtype == torch.bfloat16
    assert torch.isfinite(got).all()
    assert rel_err(got.float(), want) <= 5e-2


@pytest.mark.parametrize("weight", [torch.tensor([0.3]), torch.tensor([0.5, -1.5, 2.0, 0.25])], ids=["one", "per-head"])
@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("n", [5, 8], ids=["onto-q", "into-the-weight"])  # 2 x n rows against d = 16
def test_vanilla_folds_a_mixture_weight_into_its_queries(weight, rotary, n):
    """features(x, weight=w) gives w * q per head, the keys unchanged; with rotary positions, at per-token
    positions too (forward and gradients); the factors on q for fewer rows than d, in the projection's
    weight from d rows on."""
    from synthesizer.attention.vanilla import VanillaLogits

    torch.manual_seed(0)
    module = VanillaLogits(16, 4, rotary=rotary)
    x = torch.randn(2, n, 16)
    w = weight.clone().requires_grad_(True)
    q, k = module.features(x)
    qw, kw = module.features(x, weight=w)
    expected = q * w.reshape(-1, 1, 1)
    torch.testing.assert_close(qw, expected)
    torch.testing.assert_close(kw, k)
    grad = torch.randn_like(qw)
    got = torch.autograd.grad(qw, (w, module.query.weight), grad)
    want = torch.autograd.grad(expected, (w, module.query.weight), grad)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
    positions = torch.stack([torch.arange(n) % 3, torch.arange(n) + 3])
    torch.testing.assert_close(module.features_at(x, positions, weight=w)[0],
                               module.features_at(x, positions)[0] * w.reshape(-1, 1, 1))
