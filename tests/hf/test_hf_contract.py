"""What a transformers user expects of every model class (issue 47), one test per behaviour: special
token ids left unset, loading info, resizing the vocabulary, tuples, hidden states and attention maps,
inputs_embeds, assisted decoding, shift_labels, problem_type, the Auto classes, torch.export with a
mask, activation checkpointing."""

import pytest

transformers = pytest.importorskip("transformers")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

import synthesizer.hf as H  # noqa: E402
from synthesizer.models.blocks import EncoderBlock  # noqa: E402
from tests.hf.test_hf import TINY, tiny  # noqa: E402

transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

CLASSES = [H.SynthesizerForCausalLM, H.SynthesizerForSeq2SeqLM, H.SynthesizerForSequenceClassification]


def inputs_for(cls, batch: int = 2, n: int = 6, labels: bool = False) -> dict:
    torch.manual_seed(1)
    ids = torch.randint(3, 50, (batch, n))
    mask = torch.ones(batch, n, dtype=torch.long)
    mask[1, n - 2:] = 0  # right padding
    inputs = {"input_ids": ids, "attention_mask": mask}
    if cls is H.SynthesizerForSeq2SeqLM:
        inputs["decoder_input_ids"] = torch.randint(3, 50, (batch, n - 1))
    if labels:
        target = inputs.get("decoder_input_ids", ids)
        inputs["labels"] = torch.tensor([1, 0]) if cls is H.SynthesizerForSequenceClassification else target
    return inputs


# ----------------------------------------------------------------------------- 1. special token ids
def test_special_token_ids_may_be_unset_as_in_any_hf_config():
    config = H.SynthesizerConfig(**TINY, eos_token_id=None, pad_token_id=None)
    assert config.eos_token_id is None and config.pad_token_id is None
    model = H.SynthesizerForCausalLM(config).eval()
    ids = torch.randint(3, 50, (2, 4))
    out = model.generate(ids, max_new_tokens=5, pad_token_id=0)  # no EOS: every row gets its 5 tokens
    assert out.shape == (2, 9) and torch.equal(out[:, :4], ids)
    assert H.SynthesizerConfig(**TINY, bos_token_id=None).decoder_start_token_id is None


# ----------------------------------------------------------------------------- 2. loading info
@pytest.mark.parametrize("cls", CLASSES)
def test_from_pretrained_returns_the_loading_info_when_asked(cls, tmp_path):
    model = tiny(cls)
    model.save_pretrained(tmp_path)
    loaded, info = cls.from_pretrained(tmp_path, output_loading_info=True)
    assert isinstance(loaded, cls) and not info["missing_keys"] and not info["mismatched_keys"]
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), model.state_dict().values()))
    # a checkpoint without any weight: every table is reported missing and initialised, the tied ones too
    save_file({"other": torch.zeros(2)}, str(tmp_path / "model.safetensors"))
    empty, info = cls.from_pretrained(tmp_path, output_loading_info=True)
    table = empty.get_input_embeddings().weight
    assert any("token" in key for key in info["missing_keys"])
    assert torch.isfinite(table).all() and abs(table.std().item() - 32 ** -0.5) < 0.03


# ----------------------------------------------------------------------------- 3. resizing
@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("cls", CLASSES)
def test_resize_token_embeddings_keeps_the_model_consistent(cls, tied):
    model = tiny(cls, tie_word_embeddings=tied)
    model.resize_token_embeddings(60)
    assert model.config.vocab_size == model.model.config.vocab_size == 60
    tables = [model.get_input_embeddings()]
    if cls is H.SynthesizerForSeq2SeqLM:
        tables.append(model.model.tgt_embed.token)  # the decoder's own table when untied
    assert all(t.num_embeddings == 60 for t in tables)
    head = model.get_output_embeddings()
    if head is not None:
        assert head.weight.shape[0] == 60
        assert (head.weight is model.get_input_embeddings().weight) == tied
    inputs = inputs_for(cls)
    inputs["input_ids"][0, 0] = 59  # a new token
    out = model(**inputs)
    if cls is not H.SynthesizerForSequenceClassification:
        assert out.logits.shape[-1] == 60


# ----------------------------------------------------------------------------- 4. tuples
@pytest.mark.parametrize("cls", CLASSES)
def test_return_dict_false_gives_the_outputs_fields_as_a_tuple(cls):
    model = tiny(cls)
    inputs = inputs_for(cls, labels=True)
    as_dict = model(**inputs, output_hidden_states=True)
    as_tuple = model(**inputs, output_hidden_states=True, return_dict=False)
    assert isinstance(as_tuple, tuple) and len(as_tuple) == len(as_dict.to_tuple())
    assert torch.equal(as_tuple[0], as_dict.loss) and torch.equal(as_tuple[1], as_dict.logits)
    model.config.return_dict = False
    assert isinstance(model(**inputs), tuple)


# ----------------------------------------------------------------------------- 5. hidden states, attention maps
@pytest.mark.parametrize("kind", ["random", "dense+vanilla", "factorized_dense"])
def test_hidden_states_and_attention_maps_are_the_ones_each_block_used(kind):
    model = tiny(H.SynthesizerForCausalLM, kind)
    inputs = inputs_for(H.SynthesizerForCausalLM)
    plain = model(**inputs).logits
    out = model(**inputs, output_hidden_states=True, output_attentions=True)
    torch.testing.assert_close(out.logits, plain)  # the reference kernel: the same function
    states, maps = out.hidden_states, out.attentions
    assert len(states) == 3 and len(maps) == 2 and all(s.shape == (2, 6, 32) for s in states)
    base = H.SynthesizerModel(model.config).eval()
    base.load_state_dict(model.state_dict())
    torch.testing.assert_close(states[-1], base(**inputs).last_hidden_state)  # last: after the final norm
    pad = inputs["attention_mask"] == 0
    for block, state, probs in zip(model.model.blocks, states, maps):
        assert probs.shape == (2, 2, 6, 6)
        torch.testing.assert_close(probs, block.attn.attention_weights(block.ln_attn(state), pad))
    assert torch.all(maps[0].triu(1) == 0) and torch.all(maps[0][1, :, :, 4:] == 0)  # causal, padding


def test_seq2seq_and_classifier_attention_maps_and_generate_outputs():
    seq2seq = tiny(H.SynthesizerForSeq2SeqLM, "random")
    out = seq2seq(**inputs_for(H.SynthesizerForSeq2SeqLM), output_hidden_states=True, output_attentions=True)
    assert [len(out.encoder_hidden_states), len(out.decoder_hidden_states)] == [3, 3]
    assert out.encoder_attentions[0].shape == (2, 2, 6, 6) and out.decoder_attentions[0].shape == (2, 2, 5, 5)
    assert out.cross_attentions[0].shape == (2, 2, 5, 6) and torch.all(out.cross_attentions[0][1, ..., 4:] == 0)
    classifier = tiny(H.SynthesizerForSequenceClassification, "dense+vanilla")
    out = classifier(**inputs_for(H.SynthesizerForSequenceClassification), output_attentions=True)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (2, 2, 6, 6)
    # generate: one map per step over the positions so far, from the values-only cache
    lm = tiny(H.SynthesizerForCausalLM, "random")
    gen = lm.generate(torch.randint(3, 50, (2, 4)), max_new_tokens=3, return_dict_in_generate=True,
                      output_attentions=True, output_hidden_states=True)
    assert [step[0].shape for step in gen.attentions] == [(2, 2, 4, 4), (2, 2, 1, 5), (2, 2, 1, 6)]
    assert len(gen.hidden_states) == 3 and gen.hidden_states[1][0].shape == (2, 1, 32)
    with pytest.raises(ValueError, match=r"attention 'lightconv' \(LightweightConv\) has no attention matrix to return"):
        tiny(H.SynthesizerForCausalLM, "lightconv")(torch.randint(3, 50, (1, 4)), output_attentions=True)


# ----------------------------------------------------------------------------- 7. inputs_embeds
@pytest.mark.parametrize("cls", CLASSES)
def test_inputs_embeds_give_the_outputs_of_their_ids(cls):
    model = tiny(cls, "dense+vanilla")
    inputs = inputs_for(cls)
    expected = model(**inputs).logits
    ids = inputs.pop("input_ids")
    embeds = {"inputs_embeds": model.get_input_embeddings()(ids)}
    if cls is H.SynthesizerForSeq2SeqLM:
        embeds["decoder_inputs_embeds"] = model.model.tgt_embed.token(inputs.pop("decoder_input_ids"))
    torch.testing.assert_close(model(**inputs, **embeds).logits, expected)
    with pytest.raises(ValueError, match="give exactly one of input_ids and inputs_embeds"):
        model(input_ids=ids, **inputs, **embeds)
    if cls is H.SynthesizerForCausalLM:  # generate from embeddings: the new tokens of generate from ids
        from_ids = model.generate(ids, max_new_tokens=4)
        from_embeds = model.generate(inputs_embeds=embeds["inputs_embeds"], max_new_tokens=4)
        assert torch.equal(from_embeds, from_ids[:, ids.shape[1]:])


# ----------------------------------------------------------------------------- 8. assisted decoding
@pytest.mark.parametrize("kind", ["random", "dense+vanilla"])
def test_assisted_and_prompt_lookup_decoding_equal_greedy(kind):
    for cls, inputs in ((H.SynthesizerForCausalLM, torch.randint(3, 50, (1, 5))),
                        (H.SynthesizerForSeq2SeqLM, torch.randint(3, 50, (1, 6)))):
        model, assistant = tiny(cls, kind), tiny(cls, kind)
        with torch.no_grad():  # another model, so that some drafts are rejected and the cache is cut back
            assistant.get_input_embeddings().weight.mul_(-1)
        greedy = model.generate(inputs, max_new_tokens=8)
        assert torch.equal(model.generate(inputs, max_new_tokens=8, assistant_model=assistant), greedy)
        if cls is H.SynthesizerForCausalLM:
            assert torch.equal(model.generate(inputs, max_new_tokens=8, prompt_lookup_num_tokens=3), greedy)
    # the cache itself: cut back two positions, decoding goes on as from a cache that never held them
    model = tiny(H.SynthesizerForCausalLM, kind)
    ids = torch.randint(3, 50, (2, 6))
    cache, fresh = model.new_cache(), model.new_cache()
    model(ids, cache=cache, use_cache=True)
    model(ids[:, :4], cache=fresh, use_cache=True)
    assert cache.is_croppable
    cache.crop(-2)
    assert cache.get_seq_length() == 4
    torch.testing.assert_close(model(ids[:, 4:], cache=cache).logits, model(ids[:, 4:], cache=fresh).logits)


# ----------------------------------------------------------------------------- 9. shift_labels
def test_the_causal_lm_loss_reads_shift_labels():
    model = tiny(H.SynthesizerForCausalLM)
    ids = torch.randint(3, 50, (2, 8))
    shifted = torch.cat([ids[:, 1:], torch.full((2, 1), -100)], dim=1)  # what sequence parallelism passes
    from_labels = model(ids, labels=ids).loss
    torch.testing.assert_close(model(ids, shift_labels=shifted).loss, from_labels)
    logits = model(ids).logits
    other = torch.randint(3, 50, (2, 8))
    expected = F.cross_entropy(logits.reshape(-1, 50), other.reshape(-1))
    torch.testing.assert_close(model(ids, labels=ids, shift_labels=other).loss, expected)  # shift_labels win


# ----------------------------------------------------------------------------- 10. problem_type
def test_the_classifier_loss_follows_problem_type():
    inputs = inputs_for(H.SynthesizerForSequenceClassification)
    model = tiny(H.SynthesizerForSequenceClassification, num_labels=3)
    logits = model(**inputs).logits
    targets = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    model.config.problem_type = "multi_label_classification"
    torch.testing.assert_close(model(**inputs, labels=targets).loss, F.binary_cross_entropy_with_logits(logits, targets))
    model.config.problem_type = "regression"
    torch.testing.assert_close(model(**inputs, labels=targets).loss, F.mse_loss(logits, targets))
    model.config.problem_type = None  # read from the labels: float targets are multi-label, ids single-label
    torch.testing.assert_close(model(**inputs, labels=targets).loss, F.binary_cross_entropy_with_logits(logits, targets))
    classes = torch.tensor([2, 0])
    torch.testing.assert_close(model(**inputs, labels=classes).loss, F.cross_entropy(logits, classes))
    model.config.problem_type = "ranking"
    with pytest.raises(ValueError, match="problem_type='ranking' is not allowed; allowed values: regression, "):
        model(**inputs, labels=classes)


# ----------------------------------------------------------------------------- 11. the Auto classes
def test_each_architecture_loads_through_its_auto_class_and_another_is_refused(tmp_path):
    autos = {H.SynthesizerForCausalLM: transformers.AutoModelForCausalLM,
             H.SynthesizerForSeq2SeqLM: transformers.AutoModelForSeq2SeqLM,
             H.SynthesizerForSequenceClassification: transformers.AutoModelForSequenceClassification}
    for cls, auto in autos.items():
        tiny(cls).save_pretrained(tmp_path / cls.__name__)
        assert type(auto.from_pretrained(tmp_path / cls.__name__)) is cls
    # AutoModel: the base model of the folder's head, the causal stack or the classifier's encoder
    assert type(transformers.AutoModel.from_pretrained(tmp_path / "SynthesizerForCausalLM")) is H.SynthesizerModel
    folder = tmp_path / "SynthesizerForSequenceClassification"
    classifier = H.SynthesizerForSequenceClassification.from_pretrained(folder)
    encoder = transformers.AutoModel.from_pretrained(folder)
    assert type(encoder) is H.SynthesizerEncoderModel and not hasattr(encoder.model.head, "weight")
    inputs = inputs_for(H.SynthesizerForSequenceClassification)
    with torch.no_grad():
        expected, _ = classifier.model.encode(inputs["input_ids"], inputs["attention_mask"] == 0)
        torch.testing.assert_close(encoder(**inputs).last_hidden_state, expected)
    with pytest.raises(ValueError, match="holds a SynthesizerForSeq2SeqLM, which SynthesizerModel cannot load "
                                         r"\(another model family\); load it with AutoModelForSeq2SeqLM"):
        transformers.AutoModel.from_pretrained(tmp_path / "SynthesizerForSeq2SeqLM")
    with pytest.raises(ValueError, match="load it with AutoModelForSequenceClassification"):
        transformers.AutoModelForCausalLM.from_pretrained(folder)
    # a new head, a resized vocabulary: the mismatched weights are initialised afresh
    five = transformers.AutoModelForSequenceClassification.from_pretrained(folder, num_labels=5,
                                                                           ignore_mismatched_sizes=True)
    assert five(**inputs).logits.shape == (2, 5)
    smaller = transformers.AutoModel.from_pretrained(folder, vocab_size=30, ignore_mismatched_sizes=True)
    assert smaller(inputs["input_ids"] % 30).last_hidden_state.shape == (2, 6, 32)


# ----------------------------------------------------------------------------- 12. torch.export
@pytest.mark.parametrize("cls, kind", [(H.SynthesizerForCausalLM, "random"),
                                       (H.SynthesizerForSequenceClassification, "dense+vanilla")])
def test_torch_export_with_an_attention_mask_serves_every_mask(cls, kind):
    model = tiny(cls, kind)
    inputs = inputs_for(cls)
    exported = torch.export.export(model, args=(), kwargs={"input_ids": inputs["input_ids"],
                                                          "attention_mask": torch.ones_like(inputs["input_ids"])})
    got = exported.module()(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])  # padded now
    torch.testing.assert_close(got.logits, model(**inputs).logits)
    flipped = inputs["attention_mask"].flip(1)  # left padding: eager calls check it
    if cls is H.SynthesizerForCausalLM:  # ... and take each row's positions from the mask (issue item 6)
        assert model(inputs["input_ids"], attention_mask=flipped).logits.shape == got.logits.shape
    else:
        with pytest.raises(ValueError, match="put the padding on the right"):
            model(inputs["input_ids"], attention_mask=flipped)


# ----------------------------------------------------------------------------- activation checkpointing
@pytest.mark.parametrize("cls", CLASSES)
def test_activation_checkpointing_recomputes_each_block_with_the_same_gradients(cls):
    inputs = inputs_for(cls, labels=True)
    grads, calls = [], []
    for checkpointing in (False, True):
        model = tiny(cls, "random+vanilla").train()
        if checkpointing:
            model.activation_checkpointing_enable()
            assert model.is_activation_checkpointing
        count = []
        first = next(m for m in model.modules() if isinstance(m, EncoderBlock))
        first.attn.register_forward_hook(lambda *_: count.append(1))
        model(**inputs).loss.backward()
        grads.append([p.grad for p in model.parameters()])
        calls.append(len(count))
    assert calls == [1, 2]  # the backward pass ran the block again
    for plain, recomputed in zip(*grads):
        torch.testing.assert_close(recomputed, plain)
