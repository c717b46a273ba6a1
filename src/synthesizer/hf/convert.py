"""Run folders <-> Hugging Face folders (``synthesizer export``), and HF folders where the CLI takes a run.

An HF folder written by :func:`export_run`::

    DIR/
      config.json               SynthesizerConfig (model_type "synthesizer", the class in "architectures",
                                id2label for a classifier's label names)
      model.safetensors         the weights, keys "model.<the project model's state_dict key>"
      generation_config.json
      tokenizer.json            the run's tokenizer (the same file the project writes), with
      tokenizer_config.json     its special tokens, so PreTrainedTokenizerFast / AutoTokenizer load it
      synthesizer_experiment.json   the run's experiment config (task, data): what `evaluate` needs

:func:`import_hf` writes a run folder back (experiment.json, labels.json, one checkpoint that
``last`` and ``best`` point to), which ``evaluate``, ``generate`` and ``--resume``-free reuse read.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

from torch import nn

from ..errors import InputError
from ..runs.files import (BEST, CONFIG_NAME, EXPERIMENT_FILE as RUN_EXPERIMENT_FILE, LAST, TOKENIZER_DIR,
                          check_outside_runs, is_hf_folder, read_json, read_labels, write_json, write_labels)
from ..data.records import DataError
from ..data.tokenizer import BOS, CLS, EOS, FILENAME as TOKENIZER_FILE, PAD, SEP, UNK, Tokenizer
from ..tasks.config import ExperimentConfig
from ..tasks.data import TASK_CLASSES
from ..tasks.trained import evaluate_model, load_trained
from ..training.checkpoint import save_checkpoint
from . import HF_CLASSES
from .configuration_synthesizer import MODEL_TYPE, SynthesizerConfig

EXPERIMENT_FILE = "synthesizer_experiment.json"
FAMILY_OF = {cls.__name__: family for family, cls in HF_CLASSES.items()}


def save_tokenizer(tokenizer: Tokenizer, tokenizer_file: Path, out_dir: Path) -> None:
    """The project tokenizer as an HF fast tokenizer in ``out_dir`` (tokenizer.json + its config)."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file), pad_token=PAD, unk_token=UNK, bos_token=BOS,
                                   eos_token=EOS, sep_token=SEP, cls_token=CLS)
    fast.save_pretrained(str(out_dir))


def export_run(run_dir: str | os.PathLike, out_dir: str | os.PathLike, which: str = BEST) -> Path:
    """Write the run's ``which`` checkpoint ("best", falling back to "last") as an HF folder; returns it."""
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    check_outside_runs("--out", out_dir)  # before the model is loaded: nothing is written into a run folder
    model, tokenizer, cfg = load_trained(run_dir, which)
    family = TASK_CLASSES[cfg.task].family
    extra = {}
    names = read_labels(run_dir) if family == "classifier" else None
    if names is not None:
        extra["id2label"] = dict(enumerate(names))
    hf_model = to_hf(model, family, **extra)
    out_dir.mkdir(parents=True, exist_ok=True)
    hf_model.save_pretrained(str(out_dir))
    save_tokenizer(tokenizer, _tokenizer_file(run_dir, which), out_dir)
    (out_dir / EXPERIMENT_FILE).write_text(json.dumps(cfg.to_dict(), indent=2))
    return out_dir


def _tokenizer_file(run_dir: Path, which: str) -> Path:
    for candidate in (run_dir / which / TOKENIZER_DIR, run_dir / LAST / TOKENIZER_DIR, run_dir / TOKENIZER_DIR):
        if (candidate / TOKENIZER_FILE).is_file():
            return candidate / TOKENIZER_FILE
    raise DataError(f"{run_dir}: no tokenizer ({TOKENIZER_FILE}) in the checkpoint or the run folder")


def to_hf(model: nn.Module, family: str, **config_fields):
    """The HF model of ``family`` ("lm", "seq2seq", "classifier") holding ``model``'s weights (a copy)."""
    if family not in HF_CLASSES:
        raise InputError(f"unknown model family {family!r}; allowed: {', '.join(HF_CLASSES)}")
    config = SynthesizerConfig.from_model_config(model.config, **config_fields)
    hf_model = HF_CLASSES[family](config)
    hf_model.model.load_state_dict(model.state_dict())
    return hf_model.eval()


def load_hf(hf_dir: str | os.PathLike):
    """The HF model saved in ``hf_dir`` (its class from config.json's "architectures"), in eval mode."""
    hf_dir = Path(hf_dir)
    if not is_hf_folder(hf_dir):
        raise DataError(f"{hf_dir}: not a synthesizer HF folder (no config.json with model_type {MODEL_TYPE!r})")
    architectures = json.loads((hf_dir / CONFIG_NAME).read_text()).get("architectures") or []
    known = [a for a in architectures if a in FAMILY_OF]
    if not known:
        raise DataError(f"{hf_dir}/config.json: architectures {architectures} name none of "
                        f"{', '.join(FAMILY_OF)}")
    try:
        return HF_CLASSES[FAMILY_OF[known[0]]].from_pretrained(str(hf_dir)).eval()
    except pickle.UnpicklingError:  # from_pretrained reads .bin files with weights_only=True: nothing in them runs
        bins = sorted(hf_dir.glob("*.bin"))
        where = bins[0] if bins else hf_dir
        raise DataError(f"{where}: not a weights-only file (it holds objects other than tensors, which are not "
                        "loaded); save the model with save_pretrained (model.safetensors)") from None


def load_folder(hf_dir: str | os.PathLike) -> tuple[nn.Module, Tokenizer, ExperimentConfig | None, str, list | None]:
    """What the CLI needs from an HF folder: (project model in eval mode, tokenizer, the experiment
    config or None when the folder has none, family, label names or None)."""
    hf_dir = Path(hf_dir)
    hf_model = load_hf(hf_dir)
    family = FAMILY_OF[type(hf_model).__name__]
    if not (hf_dir / TOKENIZER_FILE).is_file():
        raise DataError(f"{hf_dir}: no {TOKENIZER_FILE}; save the tokenizer next to the model (synthesizer export does)")
    tokenizer = Tokenizer.load(hf_dir)
    experiment = hf_dir / EXPERIMENT_FILE
    cfg = ExperimentConfig.from_dict(read_json(experiment)) if experiment.is_file() else None
    id2label = hf_model.config.id2label if family == "classifier" else None
    names = [id2label[i] for i in sorted(id2label)] if id2label and not _default_labels(id2label) else None
    return hf_model.model.eval(), tokenizer, cfg, family, names


def _default_labels(id2label: dict) -> bool:
    return all(name == f"LABEL_{i}" for i, name in id2label.items())


def _experiment(hf_dir: Path, cfg: ExperimentConfig | None, what: str) -> ExperimentConfig:
    if cfg is None:
        raise DataError(f"{hf_dir}: no {EXPERIMENT_FILE} (the task and data of the run), which {what} needs; "
                        "export the folder from a run folder with `synthesizer export --run RUN --out DIR`")
    return cfg


def evaluate_folder(hf_dir: str | os.PathLike, split: str = "test") -> dict:
    """Metrics of an HF folder's model on ``split`` of the data its experiment config names."""
    model, tokenizer, cfg, _, _ = load_folder(hf_dir)
    return evaluate_model(model, tokenizer, _experiment(Path(hf_dir), cfg, "evaluate"), split)


def import_hf(hf_dir: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Write the HF folder's model as a run folder (one checkpoint, ``last`` and ``best``); returns it."""
    hf_dir, out_dir = Path(hf_dir), Path(out_dir)
    if out_dir.resolve() == hf_dir.resolve() or hf_dir.resolve() in out_dir.resolve().parents:
        raise InputError(f"--out {out_dir} is inside the HF folder {hf_dir}, which it is read from; write the run "
                         "folder elsewhere")
    model, _, cfg, family, names = load_folder(hf_dir)
    cfg = _experiment(hf_dir, cfg, "a run folder")
    if (out_dir / LAST).exists():
        raise InputError(f"{out_dir} already holds a run; choose another output folder (--out)")
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / RUN_EXPERIMENT_FILE, cfg.to_dict())
    if names is not None:
        write_labels(out_dir, names)
    save_checkpoint(out_dir, model, config=model.config.to_dict(), tokenizer=hf_dir / TOKENIZER_FILE, best=True,
                    extra={"imported_from": str(hf_dir)})
    return out_dir


__all__ = ["EXPERIMENT_FILE", "evaluate_folder", "export_run", "import_hf", "is_hf_folder", "load_folder", "load_hf",
           "save_tokenizer", "to_hf"]
