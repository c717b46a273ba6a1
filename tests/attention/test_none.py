"""The ``none`` token mixer: no mixing between positions, the same interface as every other mixer."""

from __future__ import annotations

import pytest
import torch

from synthesizer.attention.none import NoMixing, NoneCache
from tests.tolerances import LAYER, assert_close_f32

D, H, L = 8, 2, 12


@pytest.mark.parametrize("causal", [False, True])
def test_output_at_each_position_depends_on_its_own_input_only(causal):
    torch.manual_seed(0)
    m = NoMixing(D, H, L, causal=causal)
    x = torch.randn(2, 7, D, requires_grad=True)
    y = m(x)
    for i in range(7):
        (grad,) = torch.autograd.grad(y[:, i].sum(), x, retain_graph=True)
        others = torch.cat([grad[:, :i], grad[:, i + 1:]], dim=1)
        assert others.abs().max() == 0, f"position {i} reads other positions"
        assert grad[:, i].abs().max() > 0, f"position {i} ignores its own input"


def test_output_is_the_value_then_the_output_projection():
    torch.manual_seed(0)
    m = NoMixing(D, H, L)
    x = torch.randn(3, 5, D)
    assert_close_f32(m(x), m.out(m.value(x)), LAYER)


def test_padded_tokens_change_no_real_output():
    torch.manual_seed(0)
    m = NoMixing(D, H, L)
    x = torch.randn(2, 6, D)
    mask = torch.arange(6).unsqueeze(0) >= torch.tensor([[4], [6]])
    changed = x.clone()
    changed[mask] = torch.randn(int(mask.sum()), D) * 100
    assert torch.equal(m(x, mask)[~mask], m(changed, mask)[~mask])


def test_decoding_with_cache_equals_full_forward():
    torch.manual_seed(0)
    m = NoMixing(D, H, L, causal=True)
    x = torch.randn(2, 9, D)
    cache = m.new_cache()
    steps = [m(x[:, :3], cache=cache)] + [m(x[:, i:i + 1], cache=cache) for i in range(3, 9)]
    assert_close_f32(torch.cat(steps, dim=1), m(x), LAYER)
    assert cache.length == 9 and cache.nbytes == 0
    cache.reorder(torch.tensor([1, 0]))  # beam search: nothing to move
    with pytest.raises(ValueError, match="exceeds max_len=12"):
        m(torch.randn(2, 4, D), cache=cache)


def test_state_dict_round_trip():
    torch.manual_seed(0)
    a, b = NoMixing(D, H, L), NoMixing(D, H, L)
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 5, D)
    assert torch.equal(a(x), b(x))
    assert set(a.state_dict()) == {"value.weight", "value.bias", "out.weight", "out.bias"}


def test_param_counts_have_nothing_that_decides_where_to_attend():
    m = NoMixing(D, H, L)
    assert m.param_counts() == {"values_output": 2 * (D * D + D)}
    assert sum(p.numel() for p in m.parameters()) == sum(m.param_counts().values())


@pytest.mark.parametrize("args, message", [((D, 3, L), "not divisible"), ((D, H, 0), "max_len"),
                                           ((D, H, L, False, 1.0), "dropout")])
def test_bad_settings_raise(args, message):
    with pytest.raises(ValueError, match=message):
        NoMixing(*args)


def test_bad_inputs_raise():
    m = NoMixing(D, H, L)
    with pytest.raises(ValueError, match="d_model=8"):
        m(torch.randn(2, 5, D + 1))
    with pytest.raises(ValueError, match="exceeds max_len"):
        m(torch.randn(1, L + 1, D))
    with pytest.raises(ValueError, match="bool"):
        m(torch.randn(2, 5, D), torch.zeros(2, 5))
    assert isinstance(m.new_cache(), NoneCache)


def test_none_is_built_by_name_everywhere_a_mixer_is():
    from synthesizer.attention.factory import build_mixer, check_kind
    from synthesizer.models import build_model
    from synthesizer.models.config import ModelConfig

    assert check_kind("none") == "none" and type(build_mixer("none", 16, 2, 8)).__name__ == "NoMixing"
    lm = build_model("lm", ModelConfig(vocab_size=20, d_model=16, n_heads=2, n_layers=1, max_len=8, attention="none"))
    assert lm(torch.randint(0, 20, (2, 5))).shape == (2, 5, 20)
