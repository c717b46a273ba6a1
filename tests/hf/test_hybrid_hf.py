"""A model with a kind per layer through Hugging Face: the config keeps the canonical per-layer spelling,
save_pretrained / from_pretrained is exact, generate equals the project's, and a run folder exports
and comes back."""

import pytest

transformers = pytest.importorskip("transformers")
import torch  # noqa: E402

import synthesizer.hf as H  # noqa: E402
from synthesizer.models import generate  # noqa: E402
from synthesizer.tasks import run_experiment  # noqa: E402
from tests.hf.test_hf import TINY, same_tokens, tiny  # noqa: E402
from tests.tasks.test_experiment import tiny_config, write_data  # noqa: E402
from tests.test_cli import run_cli  # noqa: E402

transformers.logging.set_verbosity_error()
LAYERS = dict(TINY, num_hidden_layers=4)


def test_the_config_keeps_the_canonical_per_layer_spelling_and_refuses_a_bad_layer(tmp_path):
    config = H.SynthesizerConfig(**{**LAYERS, "attention": ["R", "R", "V", "R"]})
    assert config.attention == "random,random,vanilla,random"
    config.save_pretrained(tmp_path)
    loaded = transformers.AutoConfig.from_pretrained(tmp_path)
    assert loaded.attention == config.attention and loaded.to_model_config() == config.to_model_config()
    with pytest.raises(ValueError, match="attention of layer 2 .*'bogus'.*allowed"):
        H.SynthesizerConfig(attention="random,vanilla,bogus")


@pytest.mark.parametrize("cls, auto", [(H.SynthesizerForCausalLM, transformers.AutoModelForCausalLM),
                                       (H.SynthesizerForSeq2SeqLM, transformers.AutoModelForSeq2SeqLM)])
def test_save_and_load_back_is_exact(cls, auto, tmp_path):
    model = tiny(cls, "random,vanilla", num_hidden_layers=4, position_embedding_type="relative")
    model.save_pretrained(tmp_path)
    loaded = auto.from_pretrained(tmp_path).eval()
    before, after = model.state_dict(), loaded.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    ids = torch.randint(3, 50, (2, 7))
    args = {"decoder_input_ids": ids[:, :5]} if cls is H.SynthesizerForSeq2SeqLM else {}
    assert torch.equal(model(ids, **args).logits, loaded(ids, **args).logits)


def test_generate_cached_equals_uncached_and_the_projects():
    model = tiny(H.SynthesizerForCausalLM, "vanilla,random,random,random", num_hidden_layers=4)
    ids = torch.randint(3, 50, (2, 5))
    out = model.generate(ids, max_new_tokens=10, return_dict_in_generate=True)
    uncached = model.generate(ids, max_new_tokens=10, use_cache=False)
    assert torch.equal(out.sequences, uncached)
    same_tokens(out.sequences, generate(model.model, ids, 10).sequences())
    # values-only layers beside the key/value layer, through the Cache API
    assert [layer.keys is not None for layer in out.cache.layers] == [True, False, False, False]
    assert all(layer.get_seq_length() == out.sequences.shape[1] - 1 for layer in out.cache.layers)


def test_a_per_layer_run_exports_and_comes_back(tmp_path, capsys):
    from synthesizer.tasks.trained import load_trained

    run = tmp_path / "run"
    cfg = tiny_config("lm", write_data(tmp_path / "d", "lm"), "random,vanilla", model={"n_layers": 2},
                      train={"max_steps": 2, "eval_every": 0})
    run_experiment(cfg, run, progress=False)
    assert run_cli(["export", "--run", str(run), "--out", str(tmp_path / "hf")], capsys)[0] == 0
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    assert hf.config.attention == "random,vanilla"
    project, _, _ = load_trained(run)
    assert all(torch.equal(v, hf.model.state_dict()[k]) for k, v in project.state_dict().items())
    assert run_cli(["export", "--from-hf", str(tmp_path / "hf"), "--out", str(tmp_path / "back")], capsys)[0] == 0
    back, _, back_cfg = load_trained(tmp_path / "back")
    assert back_cfg.attention == "random,vanilla" and [b.kind for b in back.blocks] == ["random", "vanilla"]
