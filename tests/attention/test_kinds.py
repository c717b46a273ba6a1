"""The kind parsed once: ``parse_kind`` gives a ``Kind`` that travels from the config to the layer."""

from __future__ import annotations

import pytest
import torch

from synthesizer.attention import Kind, SynthesizerAttention, build_mixer, parse_kind, registry
from synthesizer.attention.factory import check_kind, resolve_kind
from synthesizer.models import ModelConfig


def test_parse_kind_gives_a_canonical_kind():
    kind = parse_kind("V+r")
    assert isinstance(kind, Kind) and kind == ("random", "vanilla") and kind.components == ("random", "vanilla")
    assert str(kind) == "random+vanilla" and f"{kind}" == "random+vanilla" and repr(kind) == "Kind('random+vanilla')"
    assert parse_kind(kind) is kind
    with pytest.raises(AttributeError):
        kind.extra = 1  # frozen


def test_check_kind_gives_the_canonical_text_and_resolve_kind_the_value():
    assert check_kind("vanilla+R") == "random+vanilla" and type(check_kind("vanilla+R")) is str
    assert resolve_kind("Linformer") == "linformer" and resolve_kind("R+V") == parse_kind("random+vanilla")
    with pytest.raises(ValueError, match=r"unknown attention kind 'rnd\+V' \(no component 'rnd'\).*linformer"):
        resolve_kind("rnd+V")
    with pytest.raises(ValueError, match="repeats"):
        resolve_kind("R+random")
    with pytest.raises(ValueError, match="unknown attention kind ''"):
        resolve_kind("")


def test_a_parsed_kind_is_not_parsed_again(monkeypatch):
    """The layer and build_mixer take a Kind as it is: no name is looked up again."""
    kind = parse_kind("dense+R")

    def no_lookup(part):
        raise AssertionError(f"parsed again: {part!r}")

    monkeypatch.setattr(registry, "resolve", no_lookup)
    layer = build_mixer(kind, 16, 2, 8)
    assert isinstance(layer, SynthesizerAttention) and layer.components is kind and layer.kind == "random+dense"
    assert layer(torch.randn(2, 5, 16)).shape == (2, 5, 16)


def test_model_config_parses_its_attention_once(monkeypatch):
    cfg = ModelConfig(vocab_size=10, d_model=16, n_heads=2, attention="V+dense")
    assert cfg.kind == ("dense", "vanilla") and cfg.attention == "V+dense"  # the field keeps what was written
    assert cfg.to_dict()["attention"] == "V+dense" and "_kind" not in cfg.to_dict()
    monkeypatch.setattr(registry, "resolve", lambda part: pytest.fail(f"parsed again: {part!r}"))
    assert cfg.kind is cfg.kind
    monkeypatch.undo()
    cfg.attention = "random"
    assert cfg.kind == ("random",)
    assert ModelConfig(vocab_size=10, attention="linformer").kind == "linformer"
