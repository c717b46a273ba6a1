import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from synthesizer.training import build_optimizer, build_scheduler, sequence_cross_entropy
from tests.training.test_toy import TinyLM
from tests.tolerances import SUM, assert_close_f32


def lrs(kind, warmup, total, n, **kw):
    p = nn.Parameter(torch.zeros(2, 2))
    opt = torch.optim.AdamW([p], lr=2.0)
    sched = build_scheduler(opt, warmup, total, kind, **kw)
    out = []
    for _ in range(n):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def test_inverse_sqrt_warms_up_linearly_then_decays_as_inverse_sqrt():
    got = lrs("inverse_sqrt", 4, 100, 8)
    want = [2 * 0.25, 2 * 0.5, 2 * 0.75, 2.0] + [2 * math.sqrt(4 / t) for t in (5, 6, 7, 8)]
    assert got == pytest.approx(want)


def test_cosine_reaches_peak_after_warmup_and_floor_at_total():
    got = lrs("cosine", 2, 10, 12, min_ratio=0.1)
    assert got[:2] == pytest.approx([1.0, 2.0])
    assert got[5] == pytest.approx(2 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 4 / 8))))
    assert got[9:] == pytest.approx([0.2, 0.2, 0.2])  # stays at the floor past total_steps
    assert all(a >= b for a, b in zip(got[1:], got[2:]))


def test_constant_after_warmup_and_no_warmup():
    assert lrs("constant", 2, 10, 4) == pytest.approx([1.0, 2.0, 2.0, 2.0])
    assert lrs("inverse_sqrt", 0, 10, 3) == pytest.approx([2.0, 2 / math.sqrt(2), 2 / math.sqrt(3)])


def test_unknown_schedule_lists_allowed():
    opt = torch.optim.AdamW([nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.raises(ValueError, match="linear.*allowed: inverse_sqrt, cosine, constant"):
        build_scheduler(opt, 0, 10, "linear")
    with pytest.raises(ValueError, match="warmup_steps"):
        build_scheduler(opt, -1, 10, "cosine")


def test_weight_decay_skips_biases_norms_and_embeddings_and_counts_tied_once():
    model = TinyLM()
    opt = build_optimizer(model, lr=1e-3, weight_decay=0.1)
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    ids = lambda group: {id(p) for p in group["params"]}
    assert ids(decay) == {id(model.mix.weight)}
    assert ids(no_decay) == {id(model.embed.weight), id(model.mix.bias), id(model.norm.weight), id(model.norm.bias)}
    with pytest.raises(ValueError, match="lr"):
        build_optimizer(model, lr=0.0)


def test_sequence_cross_entropy_sums_over_non_padding_tokens():
    torch.manual_seed(0)
    logits, targets = torch.randn(2, 5, 7), torch.randint(1, 7, (2, 5))
    targets[0, 3:] = 0
    loss_sum, n = sequence_cross_entropy(logits, targets, pad_id=0)
    keep = targets != 0
    assert n.item() == keep.sum().item() == 8
    assert_close_f32(loss_sum, F.cross_entropy(logits[keep], targets[keep], reduction="sum"), "summed loss", SUM)
    # label smoothing: padded positions contribute nothing, also to the smoothing term
    smooth, _ = sequence_cross_entropy(logits, targets, pad_id=0, label_smoothing=0.1)
    logp = logits[keep].log_softmax(-1)
    manual = -(0.9 * logp.gather(1, targets[keep][:, None]).squeeze(1) + 0.1 * logp.mean(-1)).sum()
    assert_close_f32(smooth, manual, "label-smoothed loss", SUM)
    with pytest.raises(ValueError, match="do not match"):
        sequence_cross_entropy(logits, targets[:, :4], pad_id=0)


def test_fused_adamw_is_the_default_on_cpu_and_matches_the_loop():
    torch.manual_seed(0)
    fused_model = TinyLM(d=16)
    loop_model = TinyLM(d=16)
    loop_model.load_state_dict(fused_model.state_dict())
    fused = build_optimizer(fused_model, lr=1e-2, weight_decay=0.1)
    loop = build_optimizer(loop_model, lr=1e-2, weight_decay=0.1, fused=False)
    assert fused.defaults["fused"] is True and not loop.defaults["fused"] and not loop.defaults["foreach"]
    ids, start = torch.randint(0, 10, (4, 6)), fused_model.mix.weight.detach().clone()
    for _ in range(5):
        for model, opt in ((fused_model, fused), (loop_model, loop)):
            opt.zero_grad(set_to_none=True)
            model(ids).square().mean().backward()
            opt.step()
    for (name, a), b in zip(fused_model.named_parameters(), loop_model.parameters()):
        assert_close_f32(a, b, f"{name} after 5 fused steps", SUM)
    assert (fused_model.mix.weight - start).abs().max() > 1e-3  # the steps did move the weights


def test_fused_is_not_asked_for_where_it_cannot_run():
    from synthesizer.training.optim import fused_supported

    assert fused_supported([torch.zeros(2, device="cpu")])
    assert not fused_supported([torch.zeros(2, device="meta")])
