"""A tiny LM and synthetic padded data shared by the training tests (also imported by their subprocesses)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from synthesizer.training import Trainer, TrainConfig, sequence_cross_entropy

VOCAB, PAD, SEQ, N_EXAMPLES = 11, 0, 7, 48


class TinyLM(nn.Module):
    """Embedding -> LayerNorm -> dropout -> Linear tied to the embedding. (B, n) ids -> (B, n, V) logits."""

    def __init__(self, d: int = 8, dropout: float = 0.0):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.mix = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(d, VOCAB, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, x):
        return self.head(self.drop(self.norm(torch.tanh(self.mix(self.embed(x))))))



def make_data() -> tuple[torch.Tensor, torch.Tensor]:
    """Padded sequences of random lengths: inputs (N, SEQ) and next-token targets (N, SEQ), PAD = 0."""
    g = torch.Generator().manual_seed(1234)
    tokens = torch.randint(1, VOCAB, (N_EXAMPLES, SEQ + 1), generator=g)
    lengths = torch.randint(2, SEQ + 2, (N_EXAMPLES,), generator=g)
    tokens[torch.arange(SEQ + 1) >= lengths[:, None]] = PAD
    return tokens[:, :-1].clone(), tokens[:, 1:].clone()


def batches_factory(batch_size: int, rank: int = 0, world_size: int = 1, seed: int = 0):
    """``train_batches(epoch, skip)``: each global batch of ``batch_size * world_size`` rows, split by rank."""
    x, y = make_data()

    def train_batches(epoch: int, skip: int):
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed + epoch))
        step = batch_size * world_size
        for b, start in enumerate(range(0, len(order) - step + 1, step)):
            if b < skip:
                continue
            idx = order[start + rank * batch_size: start + (rank + 1) * batch_size]
            yield {"x": x[idx], "y": y[idx]}

    return train_batches


def step_fn(model, batch):
    return sequence_cross_entropy(model(batch["x"]), batch["y"], pad_id=PAD, label_smoothing=0.1)


def make_trainer(out_dir=None, *, batch_size=8, grad_accum=1, max_steps=6, dropout=0.0, rank=0, world_size=1,
                 step=step_fn, evaluate_fn=None, **overrides) -> Trainer:
    torch.manual_seed(0)
    model = TinyLM(dropout=dropout)
    settings = dict(max_steps=max_steps, lr=3e-2, warmup_steps=2, schedule="cosine", grad_accum=grad_accum,
                    clip_norm=1.0, log_every=1, progress=False)
    settings.update(overrides)
    return Trainer(model, step, batches_factory(batch_size, rank, world_size), TrainConfig(**settings),
                   evaluate_fn=evaluate_fn, out_dir=out_dir, model_config={"d": 8, "vocab": VOCAB})


def weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_toy_data_has_padding_and_uneven_token_counts():
    _, y = make_data()
    counts = (y != PAD).sum(1)
    assert (counts < SEQ).any() and counts.unique().numel() > 2
