"""Run one experiment end to end, a recipe read top to bottom: the data, the run folder (tasks/run_folder.py:
its layout and the resume rules), the tokenizer, the task, the model (from a pretraining run where
``init_from`` names one, tasks/pretrained.py), the Trainer, then the best checkpoint's metrics in
result.json (tasks/result.py). Reading a trained run back is tasks/trained.py.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from torch import nn

from ..data.records import Corpus
from ..data.tokenizer import Tokenizer
from ..models import Classifier, ModelConfig, build_model
from ..runs.files import LAST, TOKENIZER_DIR, write_json, write_labels
from ..training import distributed as dist
from ..training.loop import Diverged, Trainer, seed_everything
from .base import Task
from .config import ExperimentConfig
from .data import load_data, task_class
from .pretrained import Pretrained, pretrained_run
from .result import mixture_weights, summarize
from .run_folder import RunFolder


def make_model_config(cfg: ExperimentConfig, tokenizer: Tokenizer, task: Task,
                      pretrained: "Pretrained | None" = None) -> ModelConfig:
    """The model's config; a model that starts from ``pretrained`` keeps its ``max_len`` (the size of its
    position table and of the synthesizers' length-indexed weights), while ``cfg``'s ``model.max_len``
    still caps the inputs."""
    sizes = {"max_len": pretrained.model.max_len} if pretrained is not None else {}
    return ModelConfig(vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id, bos_id=tokenizer.bos_id,
                       eos_id=tokenizer.eos_id, **{**cfg.model, **task.model_fields(), **sizes})


def run_experiment(cfg: ExperimentConfig, out_dir: str | Path, resume: bool = False, progress: bool = True) -> dict:
    """Train (or resume) ``cfg`` in ``out_dir``, evaluate the best checkpoint on test, write ``result.json``.

    Works in one process or under ``torchrun`` (data sharded by rank; rank 0 locks the folder, writes
    every file and returns the same dict on every rank). A diverged training loss (see
    :class:`~synthesizer.training.loop.Diverged`) stops training and is reported as ``"diverged": true``
    with ``diverged_step`` and the metrics of the best checkpoint before it (if any).
    """
    if "max_steps" not in cfg.train:
        raise ValueError("train.max_steps is required (the number of optimizer updates)")
    pretrained = pretrained_run(cfg) if cfg.init_from is not None else None  # refused before any folder is made
    info = dist.init_distributed()
    folder = RunFolder(out_dir)
    dist.on_main(folder.lock)  # a second process is refused here, before reading any data
    try:
        corpus = load_data(cfg)
        provenance = dist.on_main(lambda: folder.open(cfg, corpus, resume))
    except BaseException:
        folder.release(discard=info.rank == 0)  # a folder this run made holds nothing yet
        raise
    try:
        return _train_and_report(cfg, corpus, folder, resume, progress, info, provenance, pretrained)
    finally:
        folder.release()


def _train_and_report(cfg: ExperimentConfig, corpus: Corpus, folder: RunFolder, resume: bool, progress: bool,
                      info: dist.DistInfo, provenance: dict, pretrained: Pretrained | None = None) -> dict:
    main, out_dir = info.rank == 0, folder.path
    tokenizer = folder.tokenizer(cfg, corpus, resume, provenance)
    task = task_class(cfg)(cfg, corpus, tokenizer, info.rank, info.world_size)
    model_cfg = make_model_config(cfg, tokenizer, task, pretrained)
    source = pretrained.encoder_decoder() if pretrained is not None else None  # built before seeding: same init
    seed_everything(cfg.seed)
    model = build_model(task.family, model_cfg)
    if source is not None:
        if not isinstance(model, Classifier):
            raise ValueError(f"init_from: a {cfg.task!r} model has no encoder to load")
        model.load_encoder(source)  # a resumed run then loads its own checkpoint over it
        del source
    if main and corpus.label_names is not None:
        write_labels(out_dir, corpus.label_names)

    def evaluate_fn(m: nn.Module) -> dict:
        metrics = task.evaluate(m)
        weights = mixture_weights(m)
        if weights is not None:
            metrics["mixture_weights"] = weights
        return metrics

    train_cfg = cfg.train_config(best_metric=task.select_metric, best_mode=task.select_mode, progress=progress)
    trainer = Trainer(model, task.step_fn, task.train_batches, train_cfg, evaluate_fn=evaluate_fn, out_dir=out_dir,
                      tokenizer=str(out_dir / TOKENIZER_DIR), device=info.device, reference_loss=task.uniform_loss())
    diverged_step, stopped = None, "max_steps"
    try:
        stopped = trainer.train(resume=resume).stopped
    except Diverged as e:
        diverged_step, stopped = e.step, "diverged"
        if main:
            warnings.warn(f"{out_dir}: training diverged at step {e.step} ({e}); reporting the best "
                          "checkpoint saved before it", stacklevel=3)
    if stopped in ("SIGINT", "SIGTERM", "signal"):
        return {"stopped": stopped, "steps": trainer.step, "checkpoint": str(out_dir / LAST)}

    result_path = folder.result
    if main:
        result = summarize(cfg, task, model, corpus, out_dir, trainer.step, diverged_step, stopped)
        if pretrained is not None:
            result["init_from"] = pretrained.record()
        result["provenance"] = provenance
        write_json(result_path, result)
    dist.barrier()
    return json.loads(result_path.read_text())
