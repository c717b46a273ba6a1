"""Starting from a pretraining run (``init_from``): the run's checkpoint, checked against the model
of the config that starts from it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from ..data.records import DataError
from ..errors import InputError
from ..models import EncoderDecoder, ModelConfig
from ..models.config import attention_text
from ..runs.files import CONFIG_NAME, EXPERIMENT_FILE, STATE_NAME
from ..training.checkpoint import finished_checkpoint, load_model_weights
from .config import PRETRAIN, ExperimentConfig
from .data import task_class
from .trained import load_config

# model fields a fine-tuned encoder must share with the pretrained one (the classifier's own head and
# pooling, dropout and the length policy may differ); max_len may be shorter, never longer
ENCODER_FIELDS = ("d_model", "n_heads", "encoder_layers", "ffn_size", "positions", "attention_options")


@dataclass
class Pretrained:
    """The pretraining run ``init_from`` names: its folder, the checkpoint used and that checkpoint's model."""

    run_dir: Path
    checkpoint: Path
    model: ModelConfig
    cfg: ExperimentConfig

    def record(self) -> dict:
        """What result.json keeps of it (``init_from``)."""
        state = self.checkpoint / STATE_NAME
        step = int(torch.load(state, map_location="cpu", weights_only=True)["step"]) if state.is_file() else None
        return {"run_dir": str(self.run_dir), "checkpoint": str(self.checkpoint), "step": step,
                "task": self.cfg.task, "data": self.cfg.data_name, "attention": attention_text(self.model.attention)}

    def encoder_decoder(self) -> EncoderDecoder:
        model = EncoderDecoder(self.model)
        load_model_weights(self.checkpoint, model)
        return model


def pretrained_run(cfg: ExperimentConfig) -> Pretrained:
    """Check that ``cfg.init_from`` is a pretraining run whose encoder fits ``cfg``'s model; ValueError
    (one line naming what does not fit) otherwise. Uses its ``best`` checkpoint, else ``last``."""
    where = f"init_from={cfg.init_from}"
    run_dir = Path(cfg.init_from)
    if not (run_dir / EXPERIMENT_FILE).is_file():
        raise DataError(f"{where}: not a run folder (no experiment.json); give the --out folder of a pretraining run")
    source = load_config(run_dir)
    if task_class(source).family != "seq2seq":
        raise InputError(f"{where}: a {source.task!r} run has no encoder-decoder to start from; give a pretraining "
                         f"run (task {PRETRAIN!r})")
    try:
        checkpoint = finished_checkpoint(run_dir)
    except FileNotFoundError:
        checkpoint = None
    if checkpoint is None or not (checkpoint / CONFIG_NAME).is_file():
        raise DataError(f"{where}: no checkpoint yet (no 'best' or 'last' folder); finish or resume that run first")
    model = ModelConfig.from_dict(json.loads((checkpoint / CONFIG_NAME).read_text()))
    pretrained_kind, kind = attention_text(model.attention), cfg.attention
    if pretrained_kind != kind:
        raise InputError(f"{where}: pretrained with attention {pretrained_kind!r}, but model.attention is {kind!r}; "
                         "fine-tune with the attention it was pretrained with")
    mine = ModelConfig(vocab_size=model.vocab_size, **{k: v for k, v in cfg.model.items() if k != "attention"},
                       attention=model.attention)
    differ = [f"model.{k.replace('encoder_layers', 'n_layers').replace('ffn_size', 'd_ff')}={getattr(mine, k)!r} "
              f"(pretrained: {getattr(model, k)!r})" for k in ENCODER_FIELDS if getattr(mine, k) != getattr(model, k)]
    if differ:
        raise InputError(f"{where}: the encoder does not fit: {', '.join(differ)}; use the pretrained sizes")
    if mine.max_len > model.max_len:
        raise InputError(f"{where}: model.max_len={mine.max_len} is longer than the pretrained model's "
                         f"{model.max_len}; set model.max_len to at most {model.max_len}")
    return Pretrained(run_dir, checkpoint, model, source)
