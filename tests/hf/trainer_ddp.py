"""Train a tiny SynthesizerForCausalLM with Trainer for 4 steps; rank 0 saves the losses and weights.

``python trainer_ddp.py OUT PER_DEVICE_BATCH``, alone or under ``torchrun`` (gloo, CPU): used by
tests/hf/test_hf.py to check that 2 processes with batch b train exactly as 1 process with batch 2b.
Plain SGD: Adam would blow the rounding noise of a gradient that is zero in exact arithmetic (the
vanilla key bias: softmax ignores a shift shared by every key) up to a full learning-rate step.
"""

import os
import sys
from pathlib import Path

import torch
import transformers
from transformers import Trainer, TrainingArguments

import synthesizer.hf as H

transformers.logging.set_verbosity_error()


class Rows(torch.utils.data.Dataset):
    """16 sequences of 12 tokens; labels hide a different number of tokens in each (so ranks hold
    different target counts and only a global ``num_items_in_batch`` weighs every token alike)."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(3, 50, (16, 12), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        labels = self.ids[i].clone()
        labels[12 - (i * 5) % 11 :] = -100
        return {"input_ids": self.ids[i], "labels": labels}


def main(out: str, batch: int) -> None:
    torch.manual_seed(0)
    config = H.SynthesizerConfig(vocab_size=50, hidden_size=32, num_attention_heads=2, num_hidden_layers=2,
                                 max_position_embeddings=12, attention="random+vanilla", dropout=0.0)
    model = H.SynthesizerForCausalLM(config)
    args = TrainingArguments(output_dir=out, max_steps=4, per_device_train_batch_size=batch, learning_rate=0.5, optim="sgd",
                             logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, seed=0,
                             disable_tqdm=True, train_sampling_strategy="sequential",
                             ddp_backend="gloo" if "WORLD_SIZE" in os.environ else None)
    trainer = Trainer(model=model, args=args, train_dataset=Rows())
    trainer.train()
    if trainer.is_world_process_zero():
        Path(out).mkdir(parents=True, exist_ok=True)
        losses = torch.tensor([r["loss"] for r in trainer.state.log_history if "loss" in r])
        weights = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
        torch.save({"losses": losses, "weights": weights}, Path(out) / "result.pt")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
