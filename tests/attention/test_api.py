"""The public API of SynthesizerAttention: kinds, errors, parameter counts, weights, training
behaviour (fixed_random, mixture weights, dropout), state_dict and torch.compile."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from synthesizer.attention import COMPONENTS, SynthesizerAttention
from tests.tolerances import LAYER, assert_close_f32

PURE = ["vanilla", "dense", "random", "fixed_random", "factorized_dense", "factorized_random"]
MIXTURES = ["random+vanilla", "dense+vanilla", "random+dense", "dense+random+vanilla", "factorized_random+vanilla",
            "random+factorized_random", "fixed_random+dense"]
L, D, H = 8, 16, 4



def build(kind: str, seed: int = 0, **kw) -> SynthesizerAttention:
    torch.manual_seed(seed)
    return SynthesizerAttention(D, H, L, kind, **kw)


# ---------------------------------------------------------------------------------- kinds


@pytest.mark.parametrize("alias,canonical", [
    ("V", "vanilla"), ("d", "dense"), ("r", "random"), ("RFIX", "fixed_random"), ("Rfix", "fixed_random"),
    ("fd", "factorized_dense"), ("Fr", "factorized_random"), ("R+V", "random+vanilla"),
    ("Dense+Vanilla", "dense+vanilla"), ("d+R+v", "random+dense+vanilla"), ("v+R", "random+vanilla"),
    ("FR+vanilla", "factorized_random+vanilla"),
])
def test_aliases_are_case_insensitive(alias, canonical):
    layer = build(alias)
    assert layer.kind == canonical
    assert layer.components == tuple(canonical.split("+"))


def test_every_set_of_distinct_components_builds_and_runs():
    x = torch.randn(2, 5, D)
    for size in range(2, len(COMPONENTS) + 1):
        for combo in itertools.combinations(COMPONENTS, size):
            layer = build("+".join(combo))
            assert layer.components == combo
            assert layer.alpha.shape == (size,)
            assert torch.isfinite(layer(x)).all()


@pytest.mark.parametrize("kind,fragments", [
    ("sparse", ["'sparse'", "vanilla", "factorized_random", "Rfix"]),
    ("random+foo", ["'foo'", "random+vanilla", "dense"]),
    ("", ["''", "vanilla"]),
    ("random+R", ["'random+R'", "'random'", "once"]),
    ("D+dense+V", ["'dense'", "once"]),
])
def test_bad_kind_names_the_value_and_the_allowed_ones(kind, fragments):
    with pytest.raises(ValueError) as info:
        build(kind)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_d_model_not_divisible_by_heads():
    with pytest.raises(ValueError) as info:
        SynthesizerAttention(10, 4, L, "dense")
    assert "d_model=10" in str(info.value) and "n_heads=4" in str(info.value)


@pytest.mark.parametrize("kind", PURE)
def test_seq_longer_than_max_len(kind):
    layer = build(kind)
    with pytest.raises(ValueError) as info:
        layer(torch.randn(1, L + 1, D))
    assert f"seq={L + 1}" in str(info.value) and f"max_len={L}" in str(info.value)
    with pytest.raises(ValueError, match=f"max_len={L}"):
        layer.attention_weights(torch.randn(1, L + 1, D))


@pytest.mark.parametrize("kind", ["random", "dense", "vanilla"])
def test_padding_before_a_real_token_is_refused_by_the_layer_as_by_the_hf_wrapper(kind):
    """Left padding would index R and W2 by shifted positions and silently give other outputs."""
    layer = build(kind)
    x = torch.randn(2, 5, D)
    pad = torch.zeros(2, 5, dtype=torch.bool)
    pad[1, :2] = True  # left-padded
    message = "key_padding_mask has padding before a real token.*put the padding on the right"
    with pytest.raises(ValueError, match=message):
        layer(x, pad)
    with pytest.raises(ValueError, match=message):
        layer.attention_weights(x, pad)
    hole = torch.zeros(2, 5, dtype=torch.bool)
    hole[0, 2] = True
    with pytest.raises(ValueError, match=message):
        layer(x, hole)
    # padding cached, then a real token: left padding across the calls of incremental decoding
    causal = build(kind, causal=True)
    cache = causal.new_cache()
    with torch.no_grad():
        causal(x[:, :2], pad[:, :2], cache=cache)
        with pytest.raises(ValueError, match=message):
            causal(x[:, 2:3], cache=cache)
    right = torch.zeros(2, 5, dtype=torch.bool)
    right[1, 3:] = True  # on the right: fine
    assert torch.isfinite(layer(x, right)).all()


@pytest.mark.parametrize("kind", ["random", "dense+vanilla", "factorized_random+vanilla"])
def test_a_nan_in_one_example_stays_in_that_example(kind):
    layer = build(kind).eval()
    x = torch.randn(3, 6, D)
    alone = layer(x[1:])
    x[0, 2, 5] = float("nan")
    out = layer(x)
    assert torch.isnan(out[0]).any() and torch.isfinite(out[1:]).all()
    assert_close_f32(out[1:], alone, f"{kind}: the other examples", LAYER)


def test_bad_padding_mask():
    layer = build("dense+vanilla")
    x = torch.randn(2, 5, D)
    with pytest.raises(ValueError) as info:
        layer(x, torch.zeros(2, 4, dtype=torch.bool))
    assert "(2, 4)" in str(info.value) and "(2, 5)" in str(info.value)
    with pytest.raises(ValueError) as info:
        layer(x, torch.zeros(5, 2, dtype=torch.bool))
    assert "(5, 2)" in str(info.value)
    with pytest.raises(ValueError) as info:
        layer(x, torch.zeros(2, 5))
    assert "float32" in str(info.value) and "bool" in str(info.value)
    with pytest.raises(ValueError) as info:
        layer(x, torch.zeros(2, 5, dtype=torch.long))
    assert "int64" in str(info.value) and "bool" in str(info.value)


def test_bad_input_shape():
    layer = build("random")
    with pytest.raises(ValueError, match=str(D)):
        layer(torch.randn(2, 5, D + 1))
    with pytest.raises(ValueError):
        layer(torch.randn(5, D))


# ---------------------------------------------------------------------------------- parameter counts


def fd_split(length: int) -> int:
    """The largest divisor of L that is at most sqrt(L)."""
    return max(a for a in range(1, length + 1) if length % a == 0 and a * a <= length)


@pytest.mark.parametrize("d,h,length,k", [(16, 4, 12, 3), (12, 3, 16, 8), (8, 2, 7, 2)])
def test_param_counts_follow_the_spec_table(d, h, length, k):
    dh = d // h
    a = fd_split(length)
    b = length // a
    want = {
        "vanilla": 2 * (d * d + d),
        "dense": d * d + d + length * dh + length,
        "random": h * length * length,
        "fixed_random": 0,
        "factorized_random": 2 * h * length * k,
        "factorized_dense": d * d + d + h * (dh * (a + b) + a + b),
    }
    for kind, count in want.items():
        layer = SynthesizerAttention(d, h, length, kind, k=k)
        counts = layer.param_counts()
        assert counts[kind] == count, kind
        assert counts["mixture"] == 0
        assert counts["values_output"] == 2 * (d * d + d)
        assert sum(counts.values()) == sum(p.numel() for p in layer.parameters())
    per_head = SynthesizerAttention(d, h, length, "dense", dense_per_head=True).param_counts()
    assert per_head["dense"] == d * d + d + h * (length * dh + length)


def test_factorized_dense_default_split():
    assert [fd_split(n) for n in (12, 16, 7, 36, 10)] == [3, 4, 1, 6, 2]
    for n in (12, 16, 7, 36, 10):
        fd = SynthesizerAttention(8, 2, n, "FD").logit_modules["factorized_dense"]
        assert (fd.a, fd.b) == (fd_split(n), n // fd_split(n))


@pytest.mark.parametrize("kind", MIXTURES)
def test_param_counts_of_mixtures(kind):
    comps = kind.split("+")
    layer = build(kind)
    counts = layer.param_counts()
    assert counts["mixture"] == len(comps)
    for comp in comps:
        assert counts[comp] == build(comp).param_counts()[comp]
    assert build(kind, mix_per_head=True).param_counts()["mixture"] == H * len(comps)
    assert sum(counts.values()) == sum(p.numel() for p in layer.parameters())


def test_initialisation_follows_the_spec():
    """R, R1, R2: Xavier-uniform per head matrix; W2/b2, Wa/Wb: nn.Linear's bound; alpha zeros."""
    length, k = 32, 4
    torch.manual_seed(0)
    layer = SynthesizerAttention(D, H, length, "random+fixed_random+factorized_random+dense+factorized_dense", k=k)
    mods = layer.logit_modules
    for r in (mods["random"].r, mods["fixed_random"].r):
        bound = math.sqrt(6 / (length + length))
        assert r.abs().max() <= bound and r.abs().max() > 0.9 * bound
        assert r.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.1)
    assert not torch.equal(mods["random"].r, mods["fixed_random"].r)
    for r in (mods["factorized_random"].r1, mods["factorized_random"].r2):
        bound = math.sqrt(6 / (length + k))
        assert r.abs().max() <= bound and r.abs().max() > 0.8 * bound
    dh_bound = 1 / math.sqrt(D // H)
    for name in ("w2", "b2"):
        t = getattr(mods["dense"], name)
        assert t.abs().max() <= dh_bound and t.abs().max() > 0.8 * dh_bound
    for name in ("wa", "ba", "wb", "bb"):
        assert getattr(mods["factorized_dense"], name).abs().max() <= dh_bound
    assert torch.equal(layer.alpha, torch.zeros(5))


# ---------------------------------------------------------------------------------- weights


@pytest.mark.parametrize("kind", PURE + MIXTURES)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_weights(kind, causal):
    layer = build(kind, causal=causal)
    x = torch.randn(3, 6, D)
    pad = torch.zeros(3, 6, dtype=torch.bool)
    pad[1, 4:] = True
    probs = layer.attention_weights(x, pad)
    assert probs.shape == (3, H, 6, 6)
    assert (probs >= 0).all()
    torch.testing.assert_close(probs.sum(-1), torch.ones(3, H, 6))
    assert torch.all(probs[1, :, :, 4:] == 0)  # padded keys get weight 0
    if causal:
        assert torch.all(probs.triu(1) == 0)


@pytest.mark.parametrize("kind", PURE + MIXTURES)
@pytest.mark.parametrize("causal", [False, True])
def test_component_logits_sum_to_what_the_layer_softmaxes(kind, causal):
    layer = build(kind, causal=causal)
    if layer.alpha is not None:
        with torch.no_grad():
            layer.alpha.copy_(torch.linspace(-1.0, 1.5, layer.alpha.numel()))
    x = torch.randn(3, 6, D)
    parts = layer.component_logits(x)
    assert list(parts) == list(layer.components)
    total = sum(parts.values()).expand(3, H, 6, 6)
    if causal:
        total = total.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf"))
    assert_close_f32(torch.softmax(total, -1), layer.attention_weights(x), "softmax of the parts' sum", LAYER)


@pytest.mark.parametrize("kind", ["random+vanilla", "dense+random+vanilla"])
def test_component_logits_carry_the_mixture_weight(kind):
    layer = build(kind)
    x = torch.randn(2, 5, D)
    before, w_before = layer.component_logits(x), layer.mixture_weights()
    with torch.no_grad():
        layer.alpha.copy_(torch.linspace(-2.0, 1.0, layer.alpha.numel()))
    after, w_after = layer.component_logits(x), layer.mixture_weights()
    for c, name in enumerate(layer.components):
        # the same component logits, scaled by each setting's weight
        assert_close_f32(after[name] / w_after[c], before[name] / w_before[c], name, LAYER)
        assert not torch.allclose(after[name], before[name])


def test_mixture_weights():
    assert build("dense").mixture_weights() is None
    layer = build("dense+random+vanilla")
    w = layer.mixture_weights()
    torch.testing.assert_close(w, torch.full((3,), 1 / 3))
    with torch.no_grad():
        layer.alpha.copy_(torch.tensor([1.0, -2.0, 0.5]))
    torch.testing.assert_close(layer.mixture_weights(), torch.softmax(torch.tensor([1.0, -2.0, 0.5]), -1))
    per_head = build("R+V", mix_per_head=True)
    assert per_head.mixture_weights().shape == (H, 2)


@pytest.mark.parametrize("mix_per_head", [False, True])
def test_mixture_weights_move_under_training_and_sum_to_one(mix_per_head):
    layer = build("dense+random+vanilla", mix_per_head=mix_per_head)
    before = layer.mixture_weights().clone()
    opt = torch.optim.Adam(layer.parameters(), lr=1e-1)
    torch.manual_seed(3)
    x, target = torch.randn(4, L, D), torch.randn(4, L, D)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.mse_loss(layer(x), target).backward()
        opt.step()
    after = layer.mixture_weights()
    assert (after - before).abs().max() > 1e-3
    torch.testing.assert_close(after.sum(-1), torch.ones(after.shape[:-1]))


# ---------------------------------------------------------------------------------- training behaviour


@pytest.mark.parametrize("impl", ["auto", "reference"])
def test_fixed_random_is_a_buffer_that_never_trains(impl):
    layer = build("fixed_random+dense", impl=impl)
    r = layer.logit_modules["fixed_random"].r
    assert all(p is not r for p in layer.parameters())
    assert "logit_modules.fixed_random.r" in layer.state_dict()
    assert layer.param_counts()["fixed_random"] == 0
    saved = r.clone()
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-1, weight_decay=0.1)
    layer(torch.randn(2, L, D)).square().sum().backward()
    opt.step()
    assert torch.equal(layer.logit_modules["fixed_random"].r, saved)
    assert not r.requires_grad


@pytest.mark.parametrize("kind", PURE + MIXTURES)
@pytest.mark.parametrize("impl", ["auto", "reference"])
def test_every_parameter_gets_a_gradient(kind, impl):
    layer = build(kind, causal=True, impl=impl)
    if layer.alpha is not None:  # equal weights would still get a gradient, but make it generic
        with torch.no_grad():
            layer.alpha.normal_()
    torch.manual_seed(1)
    x = torch.randn(2, L, D)
    (layer(x) * torch.randn(2, L, D)).sum().backward()
    for name, p in layer.named_parameters():
        assert p.grad is not None, name
        if name != "logit_modules.vanilla.key.bias":  # softmax ignores a per-row constant: its gradient is 0
            assert p.grad.abs().max() > 1e-6, name


@pytest.mark.parametrize("kind", PURE + MIXTURES)
def test_state_dict_round_trip(kind):
    layer = build(kind, seed=0, causal=True, mix_per_head=True)
    if layer.alpha is not None:
        with torch.no_grad():
            layer.alpha.normal_()
    copy = build(kind, seed=1, causal=True, mix_per_head=True)
    x = torch.randn(2, 6, D)
    assert not torch.equal(layer(x), copy(x))
    copy.load_state_dict(layer.state_dict())
    assert torch.equal(layer(x), copy(x))
    for key, value in layer.state_dict().items():
        assert torch.equal(value, copy.state_dict()[key]), key


# ---------------------------------------------------------------------------------- dropout


@pytest.mark.parametrize("kind,impl", [("random", "shared"), ("dense", "fused"), ("random+vanilla", "fused_bias"),
                                       ("factorized_dense", "reference"), ("dense+vanilla", "reference")])
def test_dropout(kind, impl):
    plain = build(kind, impl=impl, causal=True)
    dropped = build(kind, impl=impl, causal=True, dropout=0.5)
    dropped.load_state_dict(plain.state_dict())
    x = torch.randn(2, L, D)
    dropped.eval()
    assert torch.equal(dropped(x), plain(x))
    dropped.train()
    a, b = dropped(x), dropped(x)
    assert not torch.allclose(a, b)
    assert not torch.allclose(a, plain(x))
    assert torch.isfinite(a).all()
    # cached decoding runs too, and is deterministic in eval mode
    dropped.eval()
    cache = dropped.new_cache()
    with torch.no_grad():
        step = torch.cat([dropped(x[:, i : i + 1], cache=cache) for i in range(L)], 1)
    assert_close_f32(step, plain(x), "cached decoding in eval mode", LAYER)


# ---------------------------------------------------------------------------------- torch.compile


def test_torch_compile_matches_eager():
    layer = build("dense+random+vanilla", causal=True)
    x = torch.randn(2, 6, D)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, 4:] = True
    compiled = torch.compile(layer, backend="eager")
    want = layer(x, pad)
    got = compiled(x, pad)
    assert_close_f32(got, want, "compiled against eager", LAYER)
    got.sum().backward()
    assert layer.alpha.grad is not None and torch.isfinite(layer.alpha.grad).all()


def test_repr_names_the_kind_and_path():
    layer = build("R+V", causal=True)
    text = repr(layer)
    assert "random+vanilla" in text and f"path={layer.path!r}" in text and "causal=True" in text


# ---------------------------------------------------------------------------------- checkpoint keys

# The state_dict of every component as the layer saved it before the registry (L=8, D=16, H=4:
# dh=4, factorized_dense a=2, b=4, k=8), written by hand: a checkpoint saved then must load now.
COMPONENT_KEYS = {
    "vanilla": {"query.weight": (D, D), "query.bias": (D,), "key.weight": (D, D), "key.bias": (D,)},
    "dense": {"hidden.weight": (D, D), "hidden.bias": (D,), "w2": (L, D // H), "b2": (L,)},
    "random": {"r": (H, L, L)},
    "fixed_random": {"r": (H, L, L)},
    "factorized_random": {"r1": (H, L, 8), "r2": (H, L, 8)},
    "factorized_dense": {"hidden.weight": (D, D), "hidden.bias": (D,), "wa": (H, D // H, 2), "ba": (H, 2),
                         "wb": (H, D // H, 4), "bb": (H, 4)},
}
EVERY_KIND = [*COMPONENTS, *("+".join(c) for c in itertools.combinations(COMPONENTS, 2)),
              "dense+random+vanilla", "factorized_random+dense+vanilla"]


def saved_state_dict(kind: str, mix_per_head: bool = False) -> dict[str, torch.Tensor]:
    components = sorted(kind.split("+"), key=COMPONENTS.index)
    keys = {f"logit_modules.{c}.{name}": shape for c in components for name, shape in COMPONENT_KEYS[c].items()}
    if len(components) > 1:
        keys["alpha"] = (H, len(components)) if mix_per_head else (len(components),)
    keys.update({"value.weight": (D, D), "value.bias": (D,), "out.weight": (D, D), "out.bias": (D,)})
    return {name: torch.randn(shape) for name, shape in keys.items()}


@pytest.mark.parametrize("kind", EVERY_KIND)
def test_state_dict_keys_and_shapes_of_every_kind_are_unchanged(kind):
    for mix_per_head in (False, True):
        layer = build(kind, mix_per_head=mix_per_head, causal=True)
        old = saved_state_dict(kind, mix_per_head)
        assert {k: tuple(v.shape) for k, v in layer.state_dict().items()} == {k: tuple(v.shape) for k, v in old.items()}
        layer.load_state_dict(old)  # strict
        assert all(torch.equal(layer.state_dict()[k], v) for k, v in old.items())
        assert torch.isfinite(layer(torch.randn(2, 5, D))).all()
