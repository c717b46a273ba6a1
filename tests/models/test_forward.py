import pytest
import torch

from synthesizer.models import Classifier, EncoderDecoder, LanguageModel, ModelConfig, build_model, format_param_counts


KINDS = ["vanilla", "random", "dense+vanilla", "factorized_dense", "fixed_random"]


def tiny(**changes):
    base = dict(vocab_size=50, d_model=32, n_heads=4, n_layers=2, max_len=16, dropout=0.0)
    return ModelConfig(**{**base, **changes})


def padded(batch=3, n=10, pad_from=6):
    ids = torch.randint(3, 50, (batch, n))
    mask = torch.zeros(batch, n, dtype=torch.bool)
    mask[0, pad_from:] = True
    return ids, mask


@pytest.mark.parametrize("kind", KINDS)
def test_shapes(kind):
    torch.manual_seed(0)
    ids, mask = padded()
    lm = LanguageModel(tiny(attention=kind)).eval()
    assert lm(ids, mask).shape == (3, 10, 50)
    s2s = EncoderDecoder(tiny(attention=kind, n_decoder_layers=1)).eval()
    assert len(s2s.decoder) == 1 and len(s2s.encoder) == 2
    assert s2s(ids, ids[:, :7], mask, None).shape == (3, 7, 50)
    clf = Classifier(tiny(attention=kind, n_classes=3)).eval()
    assert clf(ids, mask, segment_ids=(torch.arange(10) >= 5).long().expand(3, -1)).shape == (3, 3)
    reg = Classifier(tiny(attention=kind, n_classes=1, pooling="first")).eval()
    assert reg(ids, mask).shape == (3,)


@pytest.mark.parametrize("family", ["lm", "seq2seq", "classifier"])
@pytest.mark.parametrize("tie", [True, False])
def test_param_counts_sum_to_the_parameters(family, tie):
    model = build_model(family, tiny(attention="random+dense+vanilla", tie_embeddings=tie, positions="sinusoidal"))
    counts = model.param_counts()
    assert sum(counts.values()) == sum(p.numel() for p in model.parameters())
    # The paper's comparison: random logits cost H * L^2 per layer.
    layers = 2 if family != "seq2seq" else 4
    assert counts["attention.random"] == layers * 4 * 16 * 16
    expected_head = 32 * 2 + 2 if family == "classifier" else (0 if tie else 32 * 50)  # a tied head owns nothing
    assert counts["head"] == expected_head
    assert "attention.random" in format_param_counts(counts) and "total" in model.param_table()
    if family == "seq2seq":
        assert counts["cross_attention"] == 2 * 4 * (32 * 32 + 32)


def test_tied_embeddings_share_storage():
    lm = LanguageModel(tiny())
    assert lm.head.weight is lm.embed.token.weight
    s2s = EncoderDecoder(tiny())
    assert s2s.head.weight is s2s.src_embed.token.weight is s2s.tgt_embed.token.weight
    assert LanguageModel(tiny(tie_embeddings=False)).head.weight is not LanguageModel(tiny()).embed.token.weight


def test_too_long_input_names_length_and_max_len():
    ids = torch.zeros(2, 17, dtype=torch.long)
    for call in (lambda: LanguageModel(tiny())(ids), lambda: Classifier(tiny())(ids),
                 lambda: EncoderDecoder(tiny())(ids, ids[:, :3]), lambda: EncoderDecoder(tiny())(ids[:, :3], ids)):
        with pytest.raises(ValueError, match="length 17 exceeds max_len=16"):
            call()


def test_truncate_policy_warns_and_keeps_the_first_positions():
    lm = LanguageModel(tiny(on_too_long="truncate")).eval()
    ids = torch.randint(3, 50, (2, 20))
    with pytest.warns(UserWarning, match="exceeds max_len=16"):
        logits = lm(ids)
    assert logits.shape == (2, 16, 50)
    torch.testing.assert_close(logits, lm(ids[:, :16]))


def test_padding_does_not_leak_into_real_positions():
    torch.manual_seed(0)
    ids, mask = padded(pad_from=6)
    other = ids.clone()
    other[0, 6:] = 7
    lm = LanguageModel(tiny(attention="random+vanilla")).eval()
    torch.testing.assert_close(lm(ids, mask)[0, :6], lm(other, mask)[0, :6])
    clf = Classifier(tiny(attention="dense")).eval()
    torch.testing.assert_close(clf(ids, mask), clf(other, mask))
    s2s = EncoderDecoder(tiny(attention="random")).eval()
    torch.testing.assert_close(s2s(ids, ids[:, :4], mask)[0], s2s(other, ids[:, :4], mask)[0])


def test_dropout_is_active_in_training_only():
    lm = LanguageModel(tiny(dropout=0.5))
    ids = torch.randint(3, 50, (2, 8))
    assert not torch.equal(lm(ids), lm(ids))
    lm.eval()
    assert torch.equal(lm(ids), lm(ids))


def test_unknown_family():
    with pytest.raises(ValueError, match="'bert'.*lm, seq2seq, classifier"):
        build_model("bert", tiny())


def test_logits_at_gives_the_masked_positions_logits_and_checks_the_mask():
    torch.manual_seed(0)
    lm = LanguageModel(tiny(attention="dense+vanilla")).eval()
    ids, mask = padded()
    at = torch.rand(ids.shape) < 0.3
    torch.testing.assert_close(lm(ids, mask, logits_at=at), lm(ids, mask)[at])
    assert lm(ids, logits_at=torch.zeros_like(at)).shape == (0, 50)
    with pytest.raises(ValueError, match=r"boolean mask of shape \(3, 10\).*int64 \(3, 10\)"):
        lm(ids, logits_at=at.long())
    with pytest.raises(ValueError, match=r"boolean mask of shape \(3, 10\).*\(3, 9\)"):
        lm(ids, logits_at=at[:, :9])
