"""Hugging Face interop (the ``hf`` extra): config and weights round trips, the Auto classes,
generate against the project's own generation (cached and uncached), Trainer, run-folder export."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")
import torch  # noqa: E402

import synthesizer.hf as H  # noqa: E402
from synthesizer.models.blocks import Embeddings  # noqa: E402
from tests.helpers import free_port  # noqa: E402
from tests.test_cli import run_cli  # noqa: E402
from synthesizer.models import beam_search, generate  # noqa: E402
from synthesizer.tasks import run_experiment  # noqa: E402
from tests.tasks.test_experiment import tiny_config, write_data  # noqa: E402
from tests.tolerances import MODEL, SUM, TRAINING, assert_close_f32  # noqa: E402

transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

PURE = ["vanilla", "dense", "random", "fixed_random", "factorized_random", "factorized_dense"]
MIXTURES = ["random+vanilla", "dense+vanilla"]
KINDS = PURE + MIXTURES
TINY = dict(vocab_size=50, hidden_size=32, num_attention_heads=2, num_hidden_layers=2, max_position_embeddings=24,
            dropout=0.0)


def tiny(cls, kind="random", **fields):
    """A tiny model with spread-out logits (token embeddings x20, tied to the head) so that greedy and beam
    choices are not all the same token."""
    torch.manual_seed(0)
    model = cls(H.SynthesizerConfig(**{**TINY, "attention": kind, **fields})).eval()
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(20)
    return model


def rows(tokens: torch.Tensor, lengths: list[int]) -> list[list[int]]:
    return [row[:n] for row, n in zip(tokens.tolist(), lengths)]


def same_tokens(hf: torch.Tensor, project: list[list[int]], pad: int = 0) -> None:
    """HF rows equal the project's, the rest of each HF row being padding."""
    assert rows(hf, [len(p) for p in project]) == project
    assert all(t == pad for row, p in zip(hf.tolist(), project) for t in row[len(p):])


# ----------------------------------------------------------------------------- import, config
def test_importing_synthesizer_does_not_import_transformers():
    code = "import sys, synthesizer, synthesizer.models, synthesizer.cli; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


def test_config_uses_hf_names_keeps_the_canonical_kind_and_round_trips(tmp_path):
    config = H.SynthesizerConfig(**{**TINY, "attention": "V+R", "attention_options": {"mix_per_head": True}})
    assert config.attention == "random+vanilla"
    project = config.to_model_config()
    assert (project.d_model, project.n_heads, project.n_layers, project.max_len) == (32, 2, 2, 24)
    config.save_pretrained(tmp_path)
    loaded = transformers.AutoConfig.from_pretrained(tmp_path)
    assert type(loaded) is H.SynthesizerConfig and loaded.to_model_config() == project
    assert H.SynthesizerConfig.from_model_config(project).to_model_config() == project
    with pytest.raises(ValueError, match="unknown attention kind 'bogus'"):
        H.SynthesizerConfig(attention="bogus")
    with pytest.raises(ValueError, match="d_model=30 is not divisible by n_heads=4"):
        H.SynthesizerConfig(hidden_size=30, num_attention_heads=4)


# ----------------------------------------------------------------------------- save / load, Auto classes
AUTO = [(H.SynthesizerForCausalLM, transformers.AutoModelForCausalLM),
        (H.SynthesizerForSeq2SeqLM, transformers.AutoModelForSeq2SeqLM),
        (H.SynthesizerForSequenceClassification, transformers.AutoModelForSequenceClassification)]


# every kind through the LM; the other classes with a pure kind, fixed_random's saved buffer and a mixture
ROUND_TRIPS = [(*AUTO[0], k) for k in KINDS] + [(*a, k) for a in AUTO[1:] for k in ("random", "fixed_random",
                                                                                    "random+vanilla")]


@pytest.mark.parametrize("cls, auto, kind", ROUND_TRIPS, ids=[f"{c.__name__[11:]}-{k}" for c, _, k in ROUND_TRIPS])
def test_save_pretrained_from_pretrained_round_trip_is_exact_through_the_auto_class(cls, auto, kind, tmp_path):
    model = tiny(cls, kind)
    model.save_pretrained(tmp_path)
    loaded = auto.from_pretrained(tmp_path)
    assert type(loaded) is cls
    before, after = model.state_dict(), loaded.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    ids = torch.randint(3, 50, (2, 7))
    args = {"decoder_input_ids": ids[:, :5]} if cls is H.SynthesizerForSeq2SeqLM else {}
    assert torch.equal(model(ids, **args).logits, loaded.eval()(ids, **args).logits)


def test_from_pretrained_rebuilds_the_sinusoid_table_no_checkpoint_holds(tmp_path):
    model = tiny(H.SynthesizerForCausalLM, "random", position_embedding_type="sinusoidal")
    model.save_pretrained(tmp_path)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert torch.equal(loaded.model.embed.sinusoid, model.model.embed.sinusoid)
    ids = torch.randint(3, 50, (1, 9))
    assert torch.equal(model(ids).logits, loaded(ids).logits)


def test_a_folder_saved_before_weights_had_a_revision_is_refused_by_every_loader(tmp_path):
    from synthesizer.training.checkpoint import WEIGHTS_REVISION, CheckpointError

    model = tiny(H.SynthesizerForCausalLM, "random", weights_revision=1)  # e.g. built from an old config
    model.save_pretrained(tmp_path)
    config_file = tmp_path / "config.json"
    saved = json.loads(config_file.read_text())
    assert saved["weights_revision"] == WEIGHTS_REVISION  # the weights this code made are this revision's
    assert transformers.AutoModelForCausalLM.from_pretrained(tmp_path).config.weights_revision == WEIGHTS_REVISION
    del saved["weights_revision"]  # as 0.1.0 wrote its folders
    config_file.write_text(json.dumps(saved))
    for load in (transformers.AutoModelForCausalLM.from_pretrained, H.SynthesizerForCausalLM.from_pretrained):
        with pytest.raises(CheckpointError, match=f"{tmp_path} holds weights of revision 1, this synthesizer reads "
                                                  f"revision {WEIGHTS_REVISION}"):
            load(tmp_path)
    assert H.SynthesizerConfig().weights_revision == WEIGHTS_REVISION  # a fresh config is this revision


def test_auto_model_is_the_bare_stack_with_the_lm_weights(tmp_path):
    lm = tiny(H.SynthesizerForCausalLM, "dense+vanilla")
    lm.save_pretrained(tmp_path)
    bare = transformers.AutoModel.from_pretrained(tmp_path).eval()
    assert type(bare) is H.SynthesizerModel
    ids = torch.randint(3, 50, (2, 6))
    hidden = bare(ids).last_hidden_state
    assert hidden.shape == (2, 6, 32)
    assert_close_f32(lm.model.head(hidden), lm(ids).logits, "hidden states through the head", MODEL)


def test_weights_missing_from_the_folder_are_initialised_like_the_project_does(tmp_path):
    """R, R1, R2, alpha and the LayerNorms dropped from the checkpoint come from _init_weights (the
    project's initialisation), not from the uninitialised memory from_pretrained allocates for them."""
    from safetensors.torch import load_file, save_file

    model = tiny(H.SynthesizerForCausalLM, "random+factorized_random")
    model.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    dropped = [k for k in weights if k.endswith((".r", ".r1", ".r2", ".alpha", "ln_f.weight"))]
    save_file({k: v for k, v in weights.items() if k not in dropped}, tmp_path / "model.safetensors",
              metadata={"format": "pt"})
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    layer = loaded.model.blocks[0].attn
    for t, fan in ((layer.logit_modules["random"].r, 24), (layer.logit_modules["factorized_random"].r1, 8),
                   (layer.logit_modules["factorized_random"].r2, 8)):
        bound = (6 / (24 + fan)) ** 0.5  # xavier-uniform of each head's (24, fan) matrix
        assert torch.isfinite(t).all() and bound / 2 < t.abs().max() <= bound
    assert torch.equal(layer.alpha, torch.zeros(2)) and torch.equal(loaded.model.ln_f.weight, torch.ones(32))
    assert torch.equal(loaded.model.blocks[1].ffn.fc.weight, model.model.blocks[1].ffn.fc.weight)  # loaded as saved


class Offsets(torch.nn.Module):
    """A registered bias component: a learned logit per head, 0.5 at the start (its reset_parameters)."""

    form = "bias"
    input_independent = True

    def __init__(self, d_model: int, n_heads: int, max_len: int, **options):
        super().__init__()
        self.level = torch.nn.Parameter(torch.empty(n_heads))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        torch.nn.init.constant_(self.level, 0.5)

    def bias(self, n: int) -> torch.Tensor:
        return self.level[:, None, None].expand(-1, n, n)

    def logits(self, x: torch.Tensor, start: int, n_keys: int) -> torch.Tensor:
        return self.level[:, None, None].expand(-1, x.shape[1], n_keys).unsqueeze(0)


def test_a_registered_components_missing_weights_take_its_own_reset_parameters(tmp_path):
    from safetensors.torch import load_file, save_file

    from synthesizer import register_component
    from synthesizer.attention import registry

    register_component("offsets", Offsets)
    try:
        model = tiny(H.SynthesizerForCausalLM, "offsets+vanilla")
        model.save_pretrained(tmp_path)
        weights = load_file(tmp_path / "model.safetensors")
        save_file({k: v for k, v in weights.items() if not k.endswith(".level")}, tmp_path / "model.safetensors",
                  metadata={"format": "pt"})
        loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    finally:
        registry.unregister_component("offsets")
    assert torch.equal(loaded.model.blocks[0].attn.logit_modules["offsets"].level, torch.full((2,), 0.5))


def test_every_module_that_holds_weights_can_reset_them():
    """The HF init calls each module's own reset_parameters: a module holding a parameter (or a saved
    buffer) without one would be left as from_pretrained allocated it."""
    from synthesizer.attention.kinds import PAPER_KINDS
    from synthesizer.models import ModelConfig, build_model

    kinds = [*PAPER_KINDS, "factorized_dense", "factorized_random+vanilla", "linformer", "lightconv", "dynamicconv",
             "none"]
    lacking = set()
    for family in ("lm", "seq2seq", "classifier"):
        for kind in kinds:
            if kind == "linformer" and family != "classifier":  # it cannot be causal
                continue
            cross = "random" if family == "seq2seq" else "vanilla"
            model = build_model(family, ModelConfig(vocab_size=40, d_model=16, n_heads=2, n_layers=1, max_len=16,
                                                    attention=kind, cross_attention=cross))
            for module in model.modules():
                saved = [n for n, _ in module.named_buffers(recurse=False) if n not in module._non_persistent_buffers_set]
                if (list(module.parameters(recurse=False)) or saved) and not hasattr(module, "reset_parameters"):
                    lacking.add(type(module).__name__)
    assert not lacking, lacking


@pytest.mark.parametrize("cls", [H.SynthesizerForCausalLM, H.SynthesizerForSeq2SeqLM,
                                 H.SynthesizerForSequenceClassification])
def test_fresh_hf_models_scale_their_token_embeddings_like_the_project(cls):
    """N(0, 1/d) token tables (the forward multiplies them by sqrt(d)), also where a head is tied to them:
    the head's Linear init must not overwrite the shared table."""
    torch.manual_seed(0)
    model = cls(H.SynthesizerConfig(**{**TINY, "attention": "vanilla"}))
    tables = [m.token.weight for m in model.modules() if isinstance(m, Embeddings)]
    assert tables and all(abs(t.std().item() - 32 ** -0.5) < 0.02 for t in tables)


# ----------------------------------------------------------------------------- generate
@pytest.mark.parametrize("kind", KINDS)
def test_generate_greedy_cached_equals_uncached_and_the_projects_generation(kind):
    model = tiny(H.SynthesizerForCausalLM, kind)
    ids = torch.randint(3, 50, (2, 5))
    out = model.generate(ids, max_new_tokens=10, return_dict_in_generate=True)
    uncached = model.generate(ids, max_new_tokens=10, use_cache=False)
    assert torch.equal(out.sequences, uncached)
    same_tokens(out.sequences, generate(model.model, ids, 10).sequences())
    # the project's cache through the Cache API: V only for a pure synthesizer, K and V with vanilla
    cache = out.cache
    assert isinstance(cache, H.SynthesizerCache) and cache.get_seq_length() == out.sequences.shape[1] - 1
    assert all((layer.keys is not None) == ("vanilla" in kind) for layer in cache.layers)


@pytest.mark.parametrize("kind", ["random", "dense+vanilla"])
def test_beam_search_and_seeded_sampling_equal_the_projects(kind):
    model = tiny(H.SynthesizerForCausalLM, kind)
    ids = torch.randint(3, 50, (2, 5))
    beams = model.generate(ids, max_new_tokens=8, num_beams=3, length_penalty=0.0, early_stopping=True)
    same_tokens(beams, beam_search(model.model, ids, 8, num_beams=3, length_penalty=0.0).best())
    for options in ({"temperature": 0.7, "top_k": 0}, {"top_k": 10, "top_p": 0.9}):
        torch.manual_seed(5)
        sampled = model.generate(ids, max_new_tokens=10, do_sample=True, **options)
        ours = {k: v for k, v in options.items() if v}
        project = generate(model.model, ids, 10, do_sample=True, generator=torch.Generator().manual_seed(5), **ours)
        same_tokens(sampled, project.sequences())


@pytest.mark.parametrize("kind", ["random", "dense+vanilla"])
def test_seq2seq_generate_greedy_and_beam_equal_the_projects_with_source_padding(kind):
    model = tiny(H.SynthesizerForSeq2SeqLM, kind)
    src = torch.randint(3, 50, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    greedy = model.generate(src, attention_mask=mask, max_new_tokens=8)
    assert torch.equal(greedy, model.generate(src, attention_mask=mask, max_new_tokens=8, use_cache=False))
    same_tokens(greedy, generate(model.model, src, 8, src_padding_mask=mask == 0).sequences())
    beams = model.generate(src, attention_mask=mask, max_new_tokens=8, num_beams=3, length_penalty=0.0,
                           early_stopping=True)
    same_tokens(beams, beam_search(model.model, src, 8, src_padding_mask=mask == 0, num_beams=3,
                                   length_penalty=0.0).best())


def test_left_padding_of_an_encoder_is_refused_in_one_line():
    model = tiny(H.SynthesizerForSequenceClassification, "random")
    mask = torch.tensor([[0, 1, 1], [1, 1, 1]])
    with pytest.raises(ValueError, match="put the padding on the right"):
        model(torch.randint(3, 50, (2, 3)), attention_mask=mask)


@pytest.mark.parametrize("kind", ["random", "dense", "random+vanilla", "vanilla"])
def test_left_padded_prompts_generate_row_by_row_what_each_prompt_generates_alone(kind):
    """Prompts of different lengths, left-padded: each row's positions count from its first real token
    (derived from the mask, or given as position_ids), so every row generates what its prompt alone does."""
    model = tiny(H.SynthesizerForCausalLM, kind)
    prompts = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
    n = max(map(len, prompts))
    ids = torch.tensor([[0] * (n - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (n - len(p)) + [1] * len(p) for p in prompts])
    batched = model.generate(ids, attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0,
                             eos_token_id=None, output_scores=True, return_dict_in_generate=True)
    for row, prompt in enumerate(prompts):
        alone = model.generate(torch.tensor([prompt]), max_new_tokens=6, do_sample=False, pad_token_id=0,
                               eos_token_id=None, output_scores=True, return_dict_in_generate=True)
        assert batched.sequences[row, n:].tolist() == alone.sequences[0, len(prompt):].tolist()
        for step_batched, step_alone in zip(batched.scores, alone.scores):
            torch.testing.assert_close(step_batched[row], step_alone[0], rtol=1e-4, atol=1e-4)
    # a forward pass of the left-padded batch, with its positions given or derived from the mask alike
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    derived = model(ids, attention_mask=mask).logits
    torch.testing.assert_close(model(ids, attention_mask=mask, position_ids=positions).logits, derived)
    torch.testing.assert_close(derived[1, 3:], model(torch.tensor([prompts[1]])).logits[0])


def test_generate_with_right_padded_prompts_says_so():
    """Right padding is fine for a forward pass, but generate appends after it: pad prompts on the left."""
    model = tiny(H.SynthesizerForCausalLM, "random")
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    with pytest.raises(ValueError, match=r"^prompts of different lengths go to generate left-padded"):
        model.generate(torch.randint(3, 50, (2, 4)), attention_mask=mask, max_new_tokens=3)
    full = torch.ones(2, 4, dtype=torch.long)  # a mask without padding is fine
    assert model.generate(torch.randint(3, 50, (2, 4)), attention_mask=full, max_new_tokens=3).shape == (2, 7)


@pytest.mark.parametrize("cls", [H.SynthesizerForCausalLM, H.SynthesizerForSeq2SeqLM])
def test_generate_past_max_len_is_refused_before_decoding(cls, monkeypatch):
    model = tiny(cls, "random")  # max_position_embeddings=24
    steps = []
    forward = type(model).forward
    monkeypatch.setattr(type(model), "forward", lambda self, *a, **k: steps.append(1) or forward(self, *a, **k))
    with pytest.raises(ValueError, match=r"max_new_tokens=30: \d+ positions exceeds max_position_embeddings=24"):
        model.generate(torch.randint(3, 50, (1, 5)), max_new_tokens=30)
    assert steps == []  # nothing was decoded
    assert model.generate(torch.randint(3, 50, (1, 5)), max_new_tokens=4).shape[0] == 1
    cut = tiny(cls, "random", on_too_long="truncate")  # as the project's generation: up to the limit, with a warning
    with pytest.warns(UserWarning, match="generation stops at max_position_embeddings=24"):
        assert cut.generate(torch.randint(3, 50, (1, 5)), max_new_tokens=30).shape[1] <= 24


@pytest.mark.parametrize("kind", ["random", "dense+vanilla"])
def test_a_decoding_cache_filled_with_grad_enabled_can_be_deep_copied(kind):
    import copy

    model = tiny(H.SynthesizerForCausalLM, kind)
    cache = model.new_cache()
    ids = torch.randint(3, 50, (2, 4))
    logits = model(ids[:, :3], cache=cache, use_cache=True).logits  # grad enabled: the cache holds graph tensors
    assert logits.requires_grad
    copied = copy.deepcopy(cache)
    step = model(ids[:, 3:], cache=cache, use_cache=True).logits
    again = model(ids[:, 3:], cache=copied, use_cache=True).logits
    assert torch.equal(step, again) and copied.get_seq_length() == cache.get_seq_length() == 4
    again.sum().backward()  # the copy keeps the history: gradients reach the weights through the cached steps
    assert all(p.grad is not None for p in model.model.embed.parameters() if p.requires_grad)
    # the project's own caches too
    caches = model.model.new_caches()
    model.model(ids[:, :3], caches=caches)
    assert [c.length for c in copy.deepcopy(caches)] == [c.length for c in caches]


# ----------------------------------------------------------------------------- losses
def test_labels_give_the_projects_losses_and_num_items_in_batch_sums():
    lm = tiny(H.SynthesizerForCausalLM, "random")
    ids = torch.randint(3, 50, (2, 8))
    labels = ids.clone()
    labels[1, 6:] = -100
    logits = lm(ids).logits
    expected = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 50), labels[:, 1:].reshape(-1),
                                                 ignore_index=-100)
    assert_close_f32(lm(ids, labels=labels).loss, expected, "mean over targets", SUM)
    assert_close_f32(lm(ids, labels=labels, num_items_in_batch=7).loss, expected * 12 / 7, "sum / n", SUM)
    s2s = tiny(H.SynthesizerForSeq2SeqLM, "random")
    tgt = torch.randint(3, 50, (2, 5))
    shifted = s2s(ids, labels=tgt).logits  # decoder input: [bos] + tgt[:, :-1]
    bos = torch.full((2, 1), s2s.config.bos_token_id)
    assert torch.equal(shifted, s2s(ids, decoder_input_ids=torch.cat([bos, tgt[:, :-1]], 1)).logits)
    reg = tiny(H.SynthesizerForSequenceClassification, "random", num_labels=1)
    assert reg.config.problem_type == "regression" and reg(ids).logits.shape == (2, 1)


# ----------------------------------------------------------------------------- Trainer
@pytest.fixture(scope="module")
def sotu():
    """The shipped SOTU subset, tokenized with the project tokenizer, cut into 16-token blocks."""
    from synthesizer.data.sources import load_corpus
    from synthesizer.data.tokenizer import Tokenizer

    corpus = load_corpus("sotu-subset")
    texts = corpus.texts("train")[:6]
    tok = Tokenizer.train(texts, vocab_size=300)
    ids = [i for t in texts for i in tok.encode(t, add_eos=True)][: 16 * 32]
    return tok, torch.tensor(ids).view(32, 16)


def train(model, examples: list[dict], tmp_path, steps: int = 12, **args) -> list[float]:
    from transformers import Trainer, TrainingArguments

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return len(examples)

        def __getitem__(self, i):
            return examples[i]

    arguments = TrainingArguments(output_dir=str(tmp_path), max_steps=steps, per_device_train_batch_size=4,
                                  learning_rate=1e-2, logging_steps=1, save_strategy="no", report_to=[],
                                  use_cpu=True, seed=0, disable_tqdm=True, **args)
    trainer = Trainer(model=model.train(), args=arguments, train_dataset=Rows())
    trainer.train()
    return [r["loss"] for r in trainer.state.log_history if "loss" in r]


def falls(losses: list[float]) -> bool:
    return sum(losses[-3:]) / 3 < sum(losses[:3]) / 3


@pytest.mark.parametrize("kind", KINDS)
def test_trainer_trains_the_causal_lm_on_sotu(kind, sotu, tmp_path):
    tok, blocks = sotu
    torch.manual_seed(0)
    model = H.SynthesizerForCausalLM(H.SynthesizerConfig(**{**TINY, "vocab_size": tok.vocab_size,
                                                            "max_position_embeddings": 16, "attention": kind}))
    losses = train(model, [{"input_ids": b, "labels": b} for b in blocks], tmp_path)
    assert len(losses) == 12 and falls(losses), losses


def test_trainer_trains_seq2seq_and_the_classifier(sotu, tmp_path):
    tok, blocks = sotu
    fields = {**TINY, "vocab_size": tok.vocab_size, "max_position_embeddings": 16, "attention": "random+vanilla"}
    torch.manual_seed(0)
    s2s = H.SynthesizerForSeq2SeqLM(H.SynthesizerConfig(**fields))
    copy = [{"input_ids": b, "labels": b.flip(0)} for b in blocks]  # learn to reverse a block
    assert falls(train(s2s, copy, tmp_path / "s2s"))
    torch.manual_seed(0)
    cls = H.SynthesizerForSequenceClassification(H.SynthesizerConfig(**fields))
    label = [{"input_ids": b, "labels": torch.tensor(i % 2)} for i, b in enumerate(blocks[:8])]  # memorise 8 labels
    assert falls(train(cls, label, tmp_path / "cls", steps=16))


TORCHRUN_SCRIPT = Path(__file__).with_name("trainer_ddp.py")


@pytest.mark.skipif(not os.environ.get("SYNTHESIZER_TEST_TORCHRUN"), reason="set SYNTHESIZER_TEST_TORCHRUN=1 to run")
def test_trainer_under_torchrun_scales_the_loss_like_one_process_with_the_whole_batch(tmp_path):
    """2 processes x per-device batch 2 == 1 process x batch 4: same weights and losses after 4 steps,
    with labels that leave a different number of targets on each rank (num_items_in_batch is global)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    one = subprocess.run([sys.executable, str(TORCHRUN_SCRIPT), str(tmp_path / "one"), "4"], capture_output=True,
                         text=True, timeout=240, env=env)
    assert one.returncode == 0, one.stderr[-3000:]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2", "--master_addr",
           "127.0.0.1", "--master_port", str(free_port()), str(TORCHRUN_SCRIPT), str(tmp_path / "two"), "2"]
    two = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = (torch.load(tmp_path / name / "result.pt", weights_only=True) for name in ("one", "two"))
    assert_close_f32(b["losses"], a["losses"], "training losses", TRAINING)
    for key in a["weights"]:
        assert_close_f32(b["weights"][key], a["weights"][key], key, TRAINING)


# ----------------------------------------------------------------------------- run folders <-> HF folders
@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf-runs")
    out = {}
    for task, kind, attention in (("lm", "lm", "random"), ("classification", "cls", "dense+vanilla")):
        out[task] = root / task
        run_experiment(tiny_config(task, write_data(root / f"data-{kind}", kind), attention), out[task], progress=False)
    return out


def test_export_to_hf_and_back_is_exact_and_evaluate_generate_take_the_hf_folder(runs, tmp_path, capsys):
    from synthesizer.tasks.trained import load_trained

    run = runs["lm"]
    code, out, err = run_cli(["export", "--run", str(run), "--out", str(tmp_path / "hf")], capsys)
    assert code == 0, err
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    project, tok, _ = load_trained(run)
    assert all(torch.equal(v, hf.model.state_dict()[k]) for k, v in project.state_dict().items())
    fast = transformers.PreTrainedTokenizerFast.from_pretrained(tmp_path / "hf")
    assert fast("the cat sat")["input_ids"] == tok.encode("the cat sat") and fast.eos_token_id == tok.eos_id
    for command in (["evaluate", "--split", "test"], ["generate", "--prompt", "the cat", "--max-new-tokens", "6"]):
        assert run_cli([command[0], "--run", str(run), *command[1:]], capsys)[:2] == \
            run_cli([command[0], "--run", str(tmp_path / "hf"), *command[1:]], capsys)[:2]
    code, _, err = run_cli(["export", "--from-hf", str(tmp_path / "hf"), "--out", str(tmp_path / "back")], capsys)
    assert code == 0, err
    back, _, cfg = load_trained(tmp_path / "back")
    assert cfg.task == "lm" and all(torch.equal(v, back.state_dict()[k]) for k, v in project.state_dict().items())


def test_a_classifier_keeps_its_label_names_through_the_hf_folder(runs, tmp_path, capsys):
    run = runs["classification"]
    assert run_cli(["export", "--run", str(run), "--out", str(tmp_path / "hf")], capsys)[0] == 0
    assert transformers.AutoConfig.from_pretrained(tmp_path / "hf").id2label == {0: "no", 1: "yes"}
    prompt = ["generate", "--prompt", "a cat\tthe dog"]
    ours, theirs = run_cli([*prompt, "--run", str(run)], capsys), run_cli([*prompt, "--run", str(tmp_path / "hf")], capsys)
    assert ours[0] == 0 and ours[:2] == theirs[:2] and ours[1].split("\t")[0] in ("no", "yes")


def test_export_errors_are_one_line(tmp_path, capsys):
    code, _, err = run_cli(["export", "--run", str(tmp_path / "nothing"), "--out", str(tmp_path / "hf")], capsys)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    (tmp_path / "bare").mkdir()
    tiny(H.SynthesizerForCausalLM).save_pretrained(tmp_path / "bare")  # no tokenizer, no experiment config
    code, _, err = run_cli(["evaluate", "--run", str(tmp_path / "bare")], capsys)
    assert code == 2 and "tokenizer.json" in err and err.count("\n") == 1


def test_an_hf_folder_with_a_bin_file_that_is_not_weights_only_is_one_line(runs, tmp_path, capsys):
    hf = tmp_path / "hf"
    assert run_cli(["export", "--run", str(runs["lm"]), "--out", str(hf)], capsys)[0] == 0
    (hf / "model.safetensors").unlink()
    torch.save({"model.embed.token.weight": NotWeights()}, hf / "pytorch_model.bin")
    for argv in (["evaluate", "--run", str(hf)], ["export", "--from-hf", str(hf), "--out", str(tmp_path / "back")]):
        code, _, err = run_cli(argv, capsys)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith(f"error: {hf / 'pytorch_model.bin'}: not a weights-only file"), err


def test_a_truncated_hf_config_json_says_so(runs, tmp_path, capsys):
    hf = tmp_path / "hf"
    assert run_cli(["export", "--run", str(runs["lm"]), "--out", str(hf)], capsys)[0] == 0
    config = hf / "config.json"
    config.write_text(config.read_text()[:40])
    for argv in (["evaluate", "--run", str(hf)], ["generate", "--run", str(hf), "--prompt", "x"],
                 ["export", "--from-hf", str(hf), "--out", str(tmp_path / "back")]):
        code, _, err = run_cli(argv, capsys)
        assert code == 2 and err.startswith(f"error: {config}: config.json is not valid JSON"), err


class NotWeights:
    """An object torch.load(weights_only=True) refuses to build."""


def test_export_without_the_extra_names_it_in_one_line(tmp_path):
    code = "import sys; sys.modules['transformers'] = None; from synthesizer.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", code, "export", "--run", str(tmp_path), "--out", str(tmp_path / "hf")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "needs the 'hf' extra (missing module 'transformers')" in proc.stderr


@pytest.mark.parametrize("kind", ["random", "dense+vanilla"])
def test_a_left_padded_source_generates_what_the_source_alone_generates(kind):
    model = tiny(H.SynthesizerForSeq2SeqLM, kind)
    src = torch.tensor([[5, 6, 7, 8]])
    padded = torch.tensor([[0, 0, 5, 6, 7, 8]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1]])
    alone = model.generate(src, max_new_tokens=6, do_sample=False)
    left = model.generate(padded, attention_mask=mask, max_new_tokens=6, do_sample=False)
    assert left.tolist() == alone.tolist()
    with pytest.raises(ValueError, match="needs vanilla cross-attention"):
        tiny(H.SynthesizerForSeq2SeqLM, kind, cross_attention="random").generate(padded, attention_mask=mask,
                                                                                 max_new_tokens=2)


def test_export_never_writes_into_a_run_folder_and_a_run_folder_is_read_as_one(runs, tmp_path, capsys):
    import shutil

    run = tmp_path / "lm"
    shutil.copytree(runs["lm"], run, symlinks=True)
    before = sorted(p.name for p in run.iterdir())
    for out, where in ((run, "is the run folder"), (run / "hf", f"is inside the run folder {run.resolve()}")):
        code, _, err = run_cli(["export", "--run", str(run), "--out", str(out)], capsys)
        assert code == 2 and f"--out {out.resolve()} {where}, which other commands read" in err and err.count("\n") == 1
    assert sorted(p.name for p in run.iterdir()) == before
    code, _, err = run_cli(["export", "--from-hf", str(run), "--out", str(run / "back")], capsys)
    assert code == 2 and "is inside the HF folder" in err
    # a folder damaged so by an older version: still read as the run folder, with the checkpoint asked for
    assert run_cli(["export", "--run", str(run), "--out", str(tmp_path / "hf")], capsys)[0] == 0
    stale = tmp_path / "stale"
    shutil.copytree(tmp_path / "hf", stale)
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(stale / name, run / name)
    torch.manual_seed(0)
    for p in (model := transformers.AutoModelForCausalLM.from_pretrained(stale)).parameters():
        p.data.normal_()
    model.save_pretrained(stale)
    shutil.copyfile(stale / "model.safetensors", run / "model.safetensors")  # other weights than the run's
    code, out, err = run_cli(["evaluate", "--run", str(run)], capsys)
    assert code == 0, err
    assert out == run_cli(["evaluate", "--run", str(runs["lm"])], capsys)[1]
