"""User-defined logits components through ``register_component``, and the registry they join.

The components live in this file only: a "local window" (a learned logit per head and relative
offset |i - j| <= 2, general logits, so the reference path) and a "previous token" bias (a learned
per-head logit on the j = i - 1 diagonal, declared as a bias form, so it joins the fast paths).
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from synthesizer import register_component
from synthesizer.attention import COMPONENTS, SynthesizerAttention, build_mixer, parse_kind, registry
from synthesizer.attention.dispatch import applicable_paths, candidate_paths
from tests.tolerances import LAYER

D, H, L, B = 16, 2, 8, 3
WINDOW = 2


class LocalWindow(nn.Module):
    """S[h, i, j] = table[h, j - i + WINDOW] for |i - j| <= WINDOW, else 0."""

    def __init__(self, d_model: int, n_heads: int, max_len: int, **options):
        super().__init__()
        self.table = nn.Parameter(torch.randn(n_heads, 2 * WINDOW + 1))

    def logits(self, x: torch.Tensor, start: int, n_keys: int) -> torch.Tensor:
        rows = torch.arange(start, start + x.shape[1]).unsqueeze(1)
        offset = torch.arange(n_keys).unsqueeze(0) - rows  # (t, n_keys)
        inside = offset.abs() <= WINDOW
        s = self.table[:, (offset.clamp(-WINDOW, WINDOW) + WINDOW)]  # (H, t, n_keys)
        return torch.where(inside, s, s.new_zeros(())).unsqueeze(0)


class PreviousToken(nn.Module):
    """S[h, i, i - 1] = strength[h], 0 elsewhere: an input-independent bias."""

    form = "bias"
    input_independent = True

    def __init__(self, d_model: int, n_heads: int, max_len: int):
        super().__init__()
        self.strength = nn.Parameter(torch.full((n_heads,), 2.0))

    def bias(self, n: int) -> torch.Tensor:
        return self.logits(torch.empty(1, n, 0), 0, n)[0]

    def logits(self, x: torch.Tensor, start: int, n_keys: int) -> torch.Tensor:
        rows = torch.arange(start, start + x.shape[1]).unsqueeze(1)
        previous = (torch.arange(n_keys).unsqueeze(0) == rows - 1).float()
        return (self.strength[:, None, None] * previous).unsqueeze(0)


@pytest.fixture
def registered():
    """local_window (alias LW) and previous_token, removed again after the test."""
    register_component("local_window", LocalWindow, alias="LW")
    register_component("previous_token", PreviousToken)
    yield
    registry.unregister_component("local_window")
    registry.unregister_component("previous_token")


def make(kind: str, causal: bool = False, seed: int = 0, **kw) -> SynthesizerAttention:
    torch.manual_seed(seed)
    layer = SynthesizerAttention(D, H, L, kind, causal=causal, **kw)
    if layer.alpha is not None:
        with torch.no_grad():
            layer.alpha.normal_()
    return layer


MIXED = ["local_window", "LW+vanilla", "random+LW", "LW+dense+R"]


def test_registered_component_goes_after_the_builtins_in_registration_order(registered):
    assert registry.names() == (*COMPONENTS, "local_window", "previous_token")
    assert parse_kind("previous_token+lw+V") == ("vanilla", "local_window", "previous_token")
    assert str(parse_kind("LW+R")) == "random+local_window"
    assert make("vanilla+LW").kind == "vanilla+local_window"


@pytest.mark.parametrize("kind", MIXED)
def test_registered_logits_component_runs_on_the_reference_path(registered, kind):
    layer = make(kind)
    assert layer.path == "reference" and applicable_paths(layer.components) == ["reference"]
    assert "local_window" in layer.param_counts() and layer.param_counts()["local_window"] == H * (2 * WINDOW + 1)
    x = torch.randn(B, 6, D)
    assert torch.isfinite(layer(x)).all()


def test_registered_component_alone_computes_its_logits():
    """softmax(table at the window offsets) as the attention weights, by hand."""
    register_component("local_window", LocalWindow, alias="LW")
    try:
        layer = make("LW")
        t = layer.logit_modules["local_window"].table.detach()
        n = 5
        want = torch.zeros(H, n, n)
        for i in range(n):
            for j in range(n):
                if abs(i - j) <= WINDOW:
                    want[:, i, j] = t[:, j - i + WINDOW]
        probs = layer.attention_weights(torch.randn(2, n, D))
        torch.testing.assert_close(probs[1], torch.softmax(want, dim=-1))
    finally:
        registry.unregister_component("local_window")


@pytest.mark.parametrize("kind", MIXED)
def test_registered_component_is_causal(registered, kind):
    layer = make(kind, causal=True)
    x = torch.randn(2, 6, D, requires_grad=True)
    out = layer(x)
    for i in range(6):
        (grad,) = torch.autograd.grad(out[:, i].sum(), x, retain_graph=True)
        assert torch.all(grad[:, i + 1 :] == 0), f"{kind}: output {i} sees the future"


@pytest.mark.parametrize("kind", MIXED)
def test_registered_component_decodes_like_the_full_forward(registered, kind):
    layer = make(kind, causal=True).eval()
    x = torch.randn(B, 7, D)
    pad = torch.zeros(B, 7, dtype=torch.bool)
    pad[1, 5:] = True
    full = layer(x, pad)
    cache = layer.new_cache()
    steps = [layer(x[:, :3], pad[:, :3], cache=cache)] + [layer(x[:, i : i + 1], pad[:, i : i + 1], cache=cache)
                                                          for i in range(3, 7)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=LAYER.atol)
    assert cache.keys is None or "vanilla" in layer.components  # only vanilla makes the cache keep keys


@pytest.mark.parametrize("kind", MIXED)
def test_registered_component_state_dict_round_trip_and_gradients(registered, kind):
    layer = make(kind, seed=0)
    assert "logit_modules.local_window.table" in layer.state_dict()
    other = make(kind, seed=1)
    other.load_state_dict(layer.state_dict())
    x = torch.randn(B, 6, D)
    torch.testing.assert_close(other(x), layer(x), rtol=0, atol=0)
    layer(x).square().sum().backward()
    for name, p in layer.named_parameters():
        if name != "logit_modules.vanilla.key.bias":  # softmax ignores a per-row constant: its gradient is ~0
            assert p.grad is not None and p.grad.abs().max() > 0, name


def test_registered_component_in_build_mixer_model_config_and_param_tables(registered):
    from synthesizer.models import ModelConfig, build_model
    from synthesizer.tasks.result import param_summary

    layer = build_mixer("LW+R", D, H, L, causal=True)
    assert isinstance(layer, SynthesizerAttention) and layer.kind == "random+local_window"
    cfg = ModelConfig(vocab_size=50, d_model=D, n_heads=H, n_layers=2, max_len=L, attention="lw+vanilla")
    assert cfg.kind == ("vanilla", "local_window")
    model = build_model("lm", cfg)
    assert torch.isfinite(model(torch.randint(3, 50, (2, L)))).all()
    summary = param_summary(model)
    assert summary["by_component"]["attention.local_window"] == 2 * H * (2 * WINDOW + 1)
    assert summary["attention_logits"] == (summary["by_component"]["attention.local_window"]
                                           + summary["by_component"]["attention.vanilla"])


def test_registered_component_trains_from_the_command_line(registered, tmp_path, capsys):
    """``synthesizer train --attention`` with a component registered in the same process."""
    from tests.test_cli import run_cli, write_config
    from tests.tasks.test_experiment import tiny_config, write_data

    cfg = tiny_config("classification", write_data(tmp_path / "d", "cls"))
    config = write_config(tmp_path / "c.yaml", cfg)
    code, out, err = run_cli(["train", "--config", str(config), "--attention", "LW+V", "--out", str(tmp_path / "r"),
                              "--set", "train.max_steps=2", "--set", "train.eval_every=0", "--quiet"], capsys)
    assert code == 0, err
    assert json.loads(out)["attention"] == "vanilla+local_window"


# ------------------------------------------------------------------------------ a declared fast form


def test_registered_bias_component_joins_the_fast_paths(registered):
    assert make("previous_token").path == "shared"
    assert applicable_paths(parse_kind("previous_token+vanilla")) == ["fused_bias", "blockwise", "reference"]
    assert candidate_paths(parse_kind("previous_token+vanilla")) == ["sdpa_bias"]  # on CPU
    for kind in ("previous_token", "previous_token+vanilla", "previous_token+dense+random"):
        for causal in (False, True):
            for impl in applicable_paths(parse_kind(kind)):
                fast, ref = make(kind, causal, impl=impl), make(kind, causal, impl="reference")
                x = torch.randn(B, 6, D, requires_grad=True)
                pad = torch.zeros(B, 6, dtype=torch.bool)
                pad[1, 4:] = True
                out_f, out_r = fast(x, pad), ref(x, pad)
                torch.testing.assert_close(out_f, out_r, rtol=LAYER.rtol, atol=LAYER.atol)
                (g_f,) = torch.autograd.grad(out_f.square().sum(), fast.logit_modules["previous_token"].strength)
                (g_r,) = torch.autograd.grad(out_r.square().sum(), ref.logit_modules["previous_token"].strength)
                torch.testing.assert_close(g_f, g_r, rtol=LAYER.rtol, atol=LAYER.atol)


# ------------------------------------------------------------------------------ errors


def test_register_rejects_a_taken_name_or_alias(registered):
    with pytest.raises(ValueError, match="'random' already exists"):
        register_component("random", LocalWindow)
    with pytest.raises(ValueError, match="'local_window' already exists"):
        register_component("local_window", LocalWindow)
    with pytest.raises(ValueError, match="'linformer' already exists"):  # a baseline's name
        register_component("linformer", LocalWindow)
    with pytest.raises(ValueError, match="alias 'R' of attention component 'mine' clashes with 'random'"):
        register_component("mine", LocalWindow, alias="R")
    with pytest.raises(ValueError, match="alias 'lw' .* clashes with 'local_window'"):
        register_component("mine", LocalWindow, alias="lw")
    with pytest.raises(ValueError, match="alias 'Dense' .* clashes with 'dense'"):
        register_component("mine", LocalWindow, alias="Dense")
    with pytest.raises(ValueError, match="'Local-Window'"):
        register_component("Local-Window", LocalWindow)
    assert "mine" not in registry.names()


def test_register_rejects_a_module_without_logits():
    class NoLogits(nn.Module):
        def __init__(self, d_model, n_heads, max_len, **options):
            super().__init__()

    with pytest.raises(ValueError, match="'no_logits'.*NoLogits has no logits"):
        register_component("no_logits", NoLogits)
    assert "no_logits" not in registry.names()
    # A plain function is checked when it builds its module.
    register_component("no_logits", lambda d_model, n_heads, max_len, **options: NoLogits(d_model, n_heads, max_len))
    try:
        with pytest.raises(ValueError, match="'no_logits'.*has no logits"):
            SynthesizerAttention(D, H, L, "no_logits")
    finally:
        registry.unregister_component("no_logits")


def test_register_rejects_a_bias_form_without_bias():
    class Claims(LocalWindow):
        form = "bias"

    with pytest.raises(ValueError, match="'claims'.*has no bias"):
        register_component("claims", Claims)


def test_flops_of_a_component_without_a_formula_name_it(registered):
    from synthesizer.bench.flops import layer_flops

    with pytest.raises(ValueError, match="'local_window' has no FLOP formula"):
        layer_flops("local_window+vanilla", 2, 8, D, H)
