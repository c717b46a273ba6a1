import pytest
import torch

from synthesizer.attention import SynthesizerAttention
from synthesizer.attention.factory import BASELINES, build_mixer, check_kind



@pytest.mark.parametrize("kind", ["vanilla", "random", "R+V", "dense+vanilla", "factorized_dense", "fixed_random"])
def test_build_mixer_gives_synthesizer_attention(kind):
    layer = build_mixer(kind, 32, 4, 16, causal=True, dropout=0.1, k=4)
    assert isinstance(layer, SynthesizerAttention)
    assert layer.kind == check_kind(kind) and layer.causal and layer.dropout == 0.1
    assert layer(torch.randn(2, 10, 32)).shape == (2, 10, 32)


def test_options_reach_the_layer():
    layer = build_mixer("factorized_random", 32, 4, 16, k=3, impl="reference")
    assert layer.impl == "reference"
    assert layer.param_counts()["factorized_random"] == 2 * 4 * 16 * 3


def test_unknown_kind_lists_every_kind_and_baseline():
    with pytest.raises(ValueError) as err:
        build_mixer("randm", 32, 4, 16)
    message = str(err.value)
    assert "'randm'" in message
    for name in ["vanilla", "dense", "random", "fixed_random", "factorized_dense", "factorized_random", *BASELINES]:
        assert name in message


def test_unknown_option_is_named():
    with pytest.raises(ValueError, match="'rank'.*allowed options: k, fd_split"):
        build_mixer("random", 32, 4, 16, rank=3)


def test_repeated_component_is_rejected():
    with pytest.raises(ValueError, match="repeats"):
        check_kind("random+R")
