"""A trained run read back from its folder: its config, its model and tokenizer, its metrics."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from torch import nn

from ..data.records import DataError
from ..data.tokenizer import Tokenizer
from ..errors import InputError
from ..models import ModelConfig, build_model
from ..runs.files import BEST, CONFIG_NAME, EXPERIMENT_FILE, LAST, TOKENIZER_DIR, json_safe, read_json
from ..training.checkpoint import CheckpointError, corrupt, finished_checkpoint, load_model_weights
from .config import ExperimentConfig
from .data import load_data, task_class


def load_config(run_dir: str | Path) -> ExperimentConfig:
    path = Path(run_dir) / EXPERIMENT_FILE
    if not path.is_file():
        raise DataError(f"{run_dir}: not a run folder (no experiment.json); give the --out folder of a training run")
    return ExperimentConfig.from_dict(read_json(path))


def load_trained(run_dir: str | Path, which: str = BEST) -> tuple[nn.Module, Tokenizer, ExperimentConfig]:
    """(model in eval mode, tokenizer, config) of a run folder; ``which``: "best" (falls back to "last",
    also when "best" cannot be read whole) or "last"."""
    cfg = load_config(run_dir)
    try:
        checkpoint = finished_checkpoint(run_dir, which)
    except FileNotFoundError as e:
        raise DataError(str(e)) from None
    try:
        return _load_checkpoint_model(checkpoint, cfg), Tokenizer.load(checkpoint / TOKENIZER_DIR), cfg
    except CheckpointError as e:
        last = Path(run_dir) / LAST
        if which == LAST or not last.is_dir() or last.resolve() == checkpoint.resolve():
            raise
        warnings.warn(f"{e}; using 'last' instead", stacklevel=2)
        return _load_checkpoint_model(last.resolve(), cfg), Tokenizer.load(last / TOKENIZER_DIR), cfg


def _load_checkpoint_model(checkpoint: Path, cfg: ExperimentConfig) -> nn.Module:
    """The model saved in ``checkpoint``, in eval mode; CheckpointError naming a file that cannot be read."""
    config_file = checkpoint / CONFIG_NAME
    try:
        saved = json.loads(config_file.read_text())
    except (OSError, ValueError) as e:
        raise corrupt(config_file, e) from None
    model = build_model(task_class(cfg).family, ModelConfig.from_dict(saved))
    load_model_weights(checkpoint, model)
    return model.eval()


def evaluate_run(run_dir: str | Path, split: str = "test", which: str = BEST) -> dict:
    """Metrics of a trained run's checkpoint on ``split`` (``valid`` or ``test``), recomputed from the data."""
    if split not in ("valid", "test"):
        raise InputError(f"split must be 'valid' or 'test', got {split!r}")
    model, tokenizer, cfg = load_trained(run_dir, which)
    return evaluate_model(model, tokenizer, cfg, split)


def evaluate_model(model: nn.Module, tokenizer: Tokenizer, cfg: ExperimentConfig, split: str = "test") -> dict:
    """Metrics of ``model`` on ``split`` (``valid`` or ``test``) of the data ``cfg`` names (NaN/inf as None)."""
    if split not in ("valid", "test"):
        raise InputError(f"split must be 'valid' or 'test', got {split!r}")
    task = task_class(cfg)(cfg, load_data(cfg), tokenizer)
    return json_safe(task.metrics(model, split))
