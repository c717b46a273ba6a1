"""A kind per layer (ModelConfig.attention as a list or a ','-joined pattern): its spelling, its errors,
the layers it builds, where the position schemes reach, the decoding caches, parameters per layer,
and training and resuming a run of one."""

from __future__ import annotations

import json

import pytest
import torch

from synthesizer.attention.none import NoMixing
from synthesizer.models import Classifier, EncoderDecoder, LanguageModel, ModelConfig
from synthesizer.models.config import attention_text, parse_attention
from synthesizer.models.generation import generate
from tests.models.test_positions import sharpen, tiny as two_layers
from tests.tolerances import MODEL, assert_close_f32


def tiny(**changes) -> ModelConfig:
    """The positions tests' tiny model, four layers deep."""
    return two_layers(**{"n_layers": 4, **changes})


# ----------------------------------------------------------------------------- spelling
def test_a_list_and_a_pattern_give_each_layer_its_kind():
    listed = LanguageModel(tiny(attention=["random", "R", "vanilla", "random"]))
    assert [b.kind for b in listed.blocks] == ["random", "random", "vanilla", "random"]
    cycled = LanguageModel(tiny(attention="random,vanilla"))
    assert [b.kind for b in cycled.blocks] == ["random", "vanilla", "random", "vanilla"]
    assert [b.attn.kind for b in cycled.blocks] == ["random", "vanilla", "random", "vanilla"]
    odd = LanguageModel(tiny(n_layers=3, attention="V+R,dense"))
    assert [b.kind for b in odd.blocks] == ["random+vanilla", "dense", "random+vanilla"]
    assert isinstance(LanguageModel(tiny(attention="none,vanilla")).blocks[0].attn, NoMixing)


def test_the_canonical_spelling_is_the_shortest_pattern_in_full_names():
    assert attention_text(["random", "vanilla", "random", "vanilla"]) == "random,vanilla"
    assert attention_text("V, R ,V,R") == "vanilla,random"
    assert attention_text(["V+R", "D"]) == "random+vanilla,dense"
    assert attention_text(["vanilla"] * 4) == "vanilla" and attention_text("R+V") == "random+vanilla"
    assert attention_text("vanilla,random,random,random") == "vanilla,random,random,random"
    assert parse_attention("random")[0] == ("random",) and len(parse_attention("random,vanilla")) == 2


def test_config_round_trips_through_dict_and_json_as_written():
    for attention in (["random", "random", "vanilla", "random"], "random,vanilla"):
        config = tiny(attention=attention)
        assert ModelConfig.from_json(config.to_json()) == config
        assert ModelConfig.from_dict(json.loads(json.dumps(config.to_dict()))).attention == attention
        assert config.per_layer and not tiny().per_layer


@pytest.mark.parametrize("attention, words", [
    (["random", "vanilla", "random", "bogus"], ["layer 3", "'bogus'", "allowed:", "random (R)", "linformer"]),
    ("random,,vanilla", ["layer 1", "allowed:"]),
    (["random", "vanilla"], ["lists 2 kinds", "4 layers", "one kind per layer"]),
    ([], ["empty list", "allowed kinds"]),
    ([["random", "vanilla"], "random", "random", "random"], ["layer 0", "not one kind"]),
])
def test_bad_attention_names_the_layer_and_the_allowed_kinds(attention, words):
    with pytest.raises(ValueError) as err:
        tiny(attention=attention)
    message = str(err.value)
    assert "\n" not in message and all(w in message for w in words), message


def test_a_stack_of_another_depth_is_named():
    config = tiny(n_layers=2, n_decoder_layers=3, attention=["random", "vanilla"])
    LanguageModel(config)  # the model's two layers
    with pytest.raises(ValueError, match="but the decoder has 3 layers"):
        EncoderDecoder(config)
    with pytest.raises(ValueError, match="has 3 kinds, more than the 2 layers of the model"):
        LanguageModel(tiny(n_layers=2, attention="random,vanilla,dense"))
    with pytest.raises(ValueError, match="has a kind per layer, not one kind"):
        tiny(attention="random,vanilla").kind


# ----------------------------------------------------------------------------- positions
def test_a_scheme_reaches_exactly_the_layers_with_a_dot_product_component():
    lm = LanguageModel(tiny(attention="random,vanilla,dense,random+vanilla", positions="rope"))
    assert [getattr(b.attn, "positions", "none") for b in lm.blocks] == ["none", "rope", "none", "rope"]
    biased = LanguageModel(tiny(attention=["random", "random", "vanilla", "random"], positions="relative"))
    assert biased.position_bias is not None and [b.takes_bias for b in biased.blocks] == [False, False, True, False]
    assert biased.param_counts()["position_bias"] == 32 * 4  # one table, however many layers use it
    assert LanguageModel(tiny(attention="random,dense", positions="relative")).position_bias is None
    s2s = EncoderDecoder(tiny(attention="none,vanilla", positions="alibi", n_layers=2))
    assert s2s.encoder_position_bias is not None and s2s.decoder_position_bias is not None
    assert [b.takes_bias for b in s2s.encoder] == [False, True]


def test_the_bias_moves_only_the_layers_that_apply_it():
    torch.manual_seed(0)
    lm = LanguageModel(tiny(attention="random,vanilla", positions="relative", n_layers=2)).eval()
    x = torch.randint(4, 50, (1, 10))
    seen = {}
    for i, block in enumerate(lm.blocks):
        block.attn.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(i, out.clone()))
    lm(x)
    before = dict(seen)
    with torch.no_grad():
        lm.position_bias.table.weight.add_(torch.arange(32.0)[:, None])
    lm(x)
    assert torch.equal(seen[0], before[0]) and not torch.allclose(seen[1], before[1])


# ----------------------------------------------------------------------------- decoding
@pytest.mark.parametrize("scheme", ["learned", "rope", "relative", "alibi"])
@pytest.mark.parametrize("attention", ["random,vanilla", "vanilla,random,random,random", "none,dense+vanilla"])
def test_lm_cached_generation_equals_the_full_forward(attention, scheme):
    torch.manual_seed(0)
    lm = sharpen(LanguageModel(tiny(attention=attention, positions=scheme))).eval()
    cached = generate(lm, [[5, 6, 7], [8, 9]], 8, return_logits=True, stop_at_eos=False)
    full = generate(lm, [[5, 6, 7], [8, 9]], 8, return_logits=True, stop_at_eos=False, use_cache=False)
    assert torch.equal(cached.tokens, full.tokens)
    assert_close_f32(cached.logits, full.logits, f"{attention} {scheme}: cached against full", MODEL)


def test_step_by_step_logits_equal_the_full_forward():
    torch.manual_seed(2)
    lm = LanguageModel(tiny(attention=["dense", "vanilla", "random", "random+vanilla"], positions="relative")).eval()
    x = torch.randint(4, 50, (2, 12))
    caches = lm.new_caches()
    steps = torch.cat([lm(x[:, t:t + 1], caches=caches) for t in range(x.shape[1])], dim=1)
    assert_close_f32(steps, lm(x), "one token at a time against the full forward", MODEL)
    # values-only layers beside key/value layers: keys only where vanilla is a component
    assert [c.keys is not None for c in caches] == [False, True, False, True]
    assert all(c.values.shape[2] == 12 for c in caches)
    assert caches[0].nbytes * 2 == caches[1].nbytes


@pytest.mark.parametrize("scheme", ["learned", "relative"])
def test_seq2seq_cached_generation_equals_the_full_forward(scheme):
    torch.manual_seed(1)
    config = tiny(attention="random,vanilla", positions=scheme, n_layers=2, n_decoder_layers=3)
    model = sharpen(EncoderDecoder(config)).eval()
    assert [b.kind for b in model.encoder] == ["random", "vanilla"]
    assert [b.kind for b in model.decoder] == ["random", "vanilla", "random"]
    src = torch.randint(4, 50, (2, 9))
    cached = generate(model, src, 8, return_logits=True, stop_at_eos=False)
    full = generate(model, src, 8, return_logits=True, stop_at_eos=False, use_cache=False)
    assert torch.equal(cached.tokens, full.tokens)
    assert_close_f32(cached.logits, full.logits, f"{scheme}: cached against full", MODEL)


# ----------------------------------------------------------------------------- parameters per layer
@pytest.mark.parametrize("family", [LanguageModel, Classifier, EncoderDecoder])
def test_parameters_per_layer_add_up_to_the_attention(family):
    model = family(tiny(attention="vanilla,random,random,random"))
    layers = model.layer_param_counts()
    attention = sum(v for k, v in model.param_counts().items() if k.startswith("attention."))
    assert sum(layer["params"] for layer in layers) == attention
    stacks = [("blocks", 4)] if family is not EncoderDecoder else [("encoder", 4), ("decoder", 4)]
    assert [layer["layer"] for layer in layers] == [f"{s}.{i}" for s, n in stacks for i in range(n)]
    assert [layer["kind"] for layer in layers[:4]] == ["vanilla", "random", "random", "random"]
    assert layers[1]["params"] - layers[0]["params"] == 4 * 16 * 16 - 2 * (32 * 32 + 32)  # R in, q and k out
    assert all(layer["path"] for layer in layers)
    assert "random" in model.param_table().split("attention")[-1]


def test_a_mixed_model_state_dict_round_trips():
    torch.manual_seed(0)
    a = LanguageModel(tiny(attention="random,vanilla", positions="relative")).eval()
    b = LanguageModel(tiny(attention="random,vanilla", positions="relative")).eval()
    b.load_state_dict(a.state_dict())
    x = torch.randint(4, 50, (2, 12))
    assert torch.equal(a(x), b(x))
    with pytest.raises(RuntimeError):
        LanguageModel(tiny(attention="vanilla,random", positions="relative")).load_state_dict(a.state_dict())


# ----------------------------------------------------------------------------- a run
def test_a_per_layer_lm_trains_resumes_and_records_its_layers(tmp_path):
    from synthesizer.tasks import run_experiment
    from synthesizer.tasks.trained import load_trained
    from tests.tasks.test_experiment import tiny_config, write_data

    data = write_data(tmp_path / "d", "lm")
    cfg = tiny_config("lm", data, ["random", "vanilla"], model={"n_layers": 2}, train={"max_steps": 3, "eval_every": 0})
    assert cfg.attention == "random,vanilla"
    out = tmp_path / "run"
    first = run_experiment(cfg, out, progress=False)
    assert first["attention"] == "random,vanilla" and first["components"] == ["random", "vanilla"]
    assert [layer["kind"] for layer in first["params"]["by_layer"]] == ["random", "vanilla"]
    more = tiny_config("lm", data, ["random", "vanilla"], model={"n_layers": 2}, train={"max_steps": 5, "eval_every": 0})
    resumed = run_experiment(more, out, resume=True, progress=False)
    assert resumed["steps"] == 5 and [p["step"] for p in resumed["curve"]] == [3, 5]
    model, _, loaded = load_trained(out)
    assert [b.kind for b in model.blocks] == ["random", "vanilla"] and loaded.attention == "random,vanilla"
    swapped = cfg.with_attention("vanilla,vanilla")
    assert swapped.attention == "vanilla" and swapped.model["attention"] == "vanilla"
