"""Packed rows (several documents per row, each at its own positions, ``documents`` ids) give every kind
what each document gets alone: the same logits, the same loss and the same gradients as the documents
run one per row (right-padded), for the causal LM, the encoder-decoder (cross-attention included) and
the classifier."""

from __future__ import annotations

import pytest
import torch

from synthesizer.attention.cross import Packed
from synthesizer.data.batching import pad_sequences
from synthesizer.data.packing import packed_tensors
from synthesizer.models import Classifier, EncoderDecoder, LanguageModel, ModelConfig
from synthesizer.models.blocks import set_packed
from synthesizer.training.losses import sequence_cross_entropy
from tests.tolerances import MODEL, assert_close_f32

KINDS = ["vanilla", "dense", "random", "fixed_random", "factorized_random", "factorized_dense", "dense+vanilla",
         "random+vanilla", "dense+random+vanilla", "none"]
# documents of 5, 4 and 7 tokens: the first two share a row, the third has one of its own
DOCS = [[5, 6, 7, 8, 9], [10, 11, 12, 13], [14, 15, 16, 17, 18, 19, 20]]
ROWS = [[DOCS[0], DOCS[1]], [DOCS[2]]]


def tiny(**changes) -> ModelConfig:
    base = dict(vocab_size=50, d_model=32, n_heads=4, n_layers=2, max_len=12, dropout=0.0, tie_embeddings=False)
    return ModelConfig(**{**base, **changes})


def grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def assert_same_grads(packed: dict, alone: dict, what: str) -> None:
    assert packed.keys() == alone.keys()
    for name in alone:
        assert_close_f32(packed[name], alone[name], f"{what}: gradient of {name}", MODEL)


def lm_loss(model, packed: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The summed next-token loss and each document's logits, from packed rows or one document per row."""
    model.zero_grad()
    if packed:
        inputs = packed_tensors([[d[:-1] for d in row] for row in ROWS], 0)
        targets = packed_tensors([[d[1:] for d in row] for row in ROWS], 0).ids
        logits = model(inputs.ids, inputs.padding, positions=inputs.positions, documents=inputs.documents)
        per_doc = [logits[0, :4], logits[0, 4:7], logits[1, :6]]
    else:
        ids, mask = pad_sequences([d[:-1] for d in DOCS], 0)
        targets = pad_sequences([d[1:] for d in DOCS], 0)[0]
        logits = model(ids, mask)
        per_doc = [logits[0, :4], logits[1, :3], logits[2, :6]]
    loss = sequence_cross_entropy(logits, targets, pad_id=0)[0]
    loss.backward()
    return loss.detach(), [x.detach() for x in per_doc]


@pytest.mark.parametrize("positions", ["learned", "rope", "relative"])
@pytest.mark.parametrize("kind", KINDS)
def test_lm_packed_rows_equal_each_document_alone(kind, positions):
    torch.manual_seed(0)
    model = LanguageModel(tiny(attention=kind, positions=positions))
    set_packed(model)
    loss, logits = lm_loss(model, packed=True)
    packed_grads = grads(model)
    set_packed(model, False)
    loss_alone, logits_alone = lm_loss(model, packed=False)
    for i, (a, b) in enumerate(zip(logits, logits_alone)):
        assert_close_f32(a, b, f"{kind}: document {i}'s logits", MODEL)
    assert_close_f32(loss, loss_alone, f"{kind}: loss", MODEL)
    assert_same_grads(packed_grads, grads(model), kind)


PAIRS = [([5, 6, 7], [8, 9, 10, 11]), ([12, 13, 14, 15, 16, 17], [18, 19]), ([20, 21, 22, 23], [24, 25, 26])]


def seq2seq_loss(model, packed: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad()
    rows = [[0, 1], [2]]
    tgt_in_seqs, tgt_out_seqs = [[1, *t] for _, t in PAIRS], [[*t, 3] for _, t in PAIRS]
    if packed:
        src = packed_tensors([[PAIRS[i][0] for i in row] for row in rows], 0)
        tgt = packed_tensors([[tgt_in_seqs[i] for i in row] for row in rows], 0)
        out = packed_tensors([[tgt_out_seqs[i] for i in row] for row in rows], 0).ids
        logits = model(src.ids, tgt.ids, src.padding, tgt.padding,
                       packed=Packed(tgt.positions, tgt.documents, src.positions, src.documents))
        per_pair = [logits[0, :5], logits[0, 5:8], logits[1, :4]]
    else:
        src, src_mask = pad_sequences([s for s, _ in PAIRS], 0)
        tgt, tgt_mask = pad_sequences(tgt_in_seqs, 0)
        out = pad_sequences(tgt_out_seqs, 0)[0]
        logits = model(src, tgt, src_mask, tgt_mask)
        per_pair = [logits[0, :5], logits[1, :3], logits[2, :4]]
    loss = sequence_cross_entropy(logits, out, pad_id=0)[0]
    loss.backward()
    return loss.detach(), [x.detach() for x in per_pair]


@pytest.mark.parametrize("cross", ["vanilla", "random"])
@pytest.mark.parametrize("kind", KINDS)
def test_encoder_decoder_packed_pairs_equal_each_pair_alone(kind, cross):
    torch.manual_seed(0)
    model = EncoderDecoder(tiny(attention=kind, cross_attention=cross))
    loss, logits = seq2seq_loss(model, packed=True)
    packed_grads = grads(model)
    loss_alone, logits_alone = seq2seq_loss(model, packed=False)
    for i, (a, b) in enumerate(zip(logits, logits_alone)):
        assert_close_f32(a, b, f"{kind}: pair {i}'s logits", MODEL)
    assert_close_f32(loss, loss_alone, f"{kind}: loss", MODEL)
    assert_same_grads(packed_grads, grads(model), kind)


@pytest.mark.parametrize("pooling", ["mean", "first"])
@pytest.mark.parametrize("kind", ["vanilla", "random", "dense+vanilla", "factorized_dense", "none"])
def test_classifier_packed_inputs_equal_each_input_alone(kind, pooling):
    torch.manual_seed(0)
    model = Classifier(tiny(attention=kind, n_classes=3, pooling=pooling))
    labels = torch.tensor([0, 2, 1])
    x = packed_tensors(ROWS, 0)
    packed = model(x.ids, x.padding, positions=x.positions, documents=x.documents)
    torch.nn.functional.cross_entropy(packed, labels, reduction="sum").backward()
    packed_grads = grads(model)
    model.zero_grad()
    ids, mask = pad_sequences(DOCS, 0)
    alone = model(ids, mask)
    torch.nn.functional.cross_entropy(alone, labels, reduction="sum").backward()
    assert_close_f32(packed.detach(), alone.detach(), f"{kind}: outputs", MODEL)
    assert_same_grads(packed_grads, grads(model), kind)


def test_a_layer_fed_packed_rows_names_the_kernel_it_runs():
    lm = LanguageModel(tiny(attention="random,dense+vanilla"))
    assert [b.attn.path for b in lm.blocks] == ["shared", "fused"]
    set_packed(lm)  # shared softmax over the batch cannot take per-row positions: the reference runs
    assert [b.attn.path for b in lm.blocks] == ["reference", "fused"]


def test_packed_rows_are_refused_where_they_cannot_hold():
    with pytest.raises(ValueError, match="cannot take packed rows"):
        set_packed(LanguageModel(tiny(attention="lightconv")))
    lm = LanguageModel(tiny(attention="lightconv"))
    x = packed_tensors(ROWS, 0)
    with pytest.raises(ValueError, match="takes no per-token positions"):
        lm(x.ids, x.padding, positions=x.positions, documents=x.documents)
    with pytest.raises(ValueError, match="need positions too"):
        LanguageModel(tiny())(x.ids, x.padding, documents=x.documents)
