"""Run one experiment end to end, a recipe read top to bottom: the data, the run folder (tasks/run_folder.py:
its layout and the resume rules), the tokenizer, the task, the model (from a pretraining run where
``init_from`` names one, tasks/pretrained.py), the Trainer, then the best checkpoint's metrics in
result.json (tasks/result.py). Reading a trained run back is tasks/trained.py.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from ..attention.dispatch import check_impl
from ..attention.factory import takes_packed
from ..attention.kinds import Kind
from ..attention.positions import BIAS_SCHEMES
from ..data.records import Corpus
from ..data.tokenizer import Tokenizer
from ..errors import InputError
from ..models import Classifier, ModelConfig, build_model
from ..models.blocks import set_packed
from ..models.config import parse_attention
from ..runs.files import LAST, TOKENIZER_DIR, write_json, write_labels
from ..runs.results import RunRecord, Stopped
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


def check_kind_options(cfg: ExperimentConfig) -> None:
    """The attention options that hold for some kinds only (``impl``), checked against the run's own kind before
    its folder takes any file: a bad one is one line, and no folder is left of a run that never trained (a config
    checks the option's value alone, since ``--attention`` may change the kind after it is read)."""
    if cfg.batch.pack:
        for kind in parse_attention(cfg.model.attention):
            if not takes_packed(kind):
                raise InputError(f"batch.pack: the {str(kind)!r} mixer cannot take packed rows (it would mix tokens "
                                 "across documents); train it without batch.pack")
    options = cfg.model.attention_options or {}
    if "impl" not in options:
        return
    for kind in parse_attention(cfg.model.attention):  # each layer's kind (one, or one per layer)
        if isinstance(kind, Kind):
            biased = "vanilla" in kind and cfg.model.positions in BIAS_SCHEMES
            try:
                check_impl(kind, options["impl"], extra_bias=biased)
            except InputError as e:
                raise InputError(f"model.attention_options.{e}") from None


def run_experiment(cfg: ExperimentConfig, out_dir: str | Path, resume: bool = False,
                   progress: bool = True) -> RunRecord | Stopped:
    """Train (or resume) ``cfg`` in ``out_dir``, evaluate the best checkpoint on test, write ``result.json``.

    Works in one process or under ``torchrun`` (data sharded by rank; rank 0 locks the folder, writes
    every file and returns the same record on every rank); stopped by a signal, a :class:`Stopped` (where to
    resume from) instead of the run's record. A diverged training loss (see
    :class:`~synthesizer.training.loop.Diverged`) stops training and is reported as ``"diverged": true``
    with ``diverged_step`` and the metrics of the best checkpoint before it (if any).
    """
    if "max_steps" not in cfg.train:
        raise InputError("train.max_steps is required (the number of optimizer updates)")
    check_kind_options(cfg)
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
        return Run(cfg, folder, corpus, provenance, info, resume=resume, progress=progress,
                   pretrained=pretrained).train_and_report()
    finally:
        folder.release()


# a run stopped by one of these resumes later: it has no result yet
SIGNALS = ("SIGINT", "SIGTERM", "signal")


@dataclass
class Run:
    """One run while its folder is locked: what it trains on, where, and the steps that train and report it."""

    cfg: ExperimentConfig
    folder: RunFolder
    corpus: Corpus
    provenance: dict  # data.json's content
    info: dist.DistInfo
    resume: bool = False
    progress: bool = True
    pretrained: Pretrained | None = None

    @property
    def main(self) -> bool:
        return self.info.rank == 0

    def train_and_report(self) -> RunRecord | Stopped:
        """The tokenizer, the task, the model, training, then result.json (or, stopped by a signal, where
        to resume from)."""
        tokenizer = self.folder.tokenizer(self.cfg, self.corpus, self.resume, self.provenance)
        task = task_class(self.cfg)(self.cfg, self.corpus, tokenizer, self.info.rank, self.info.world_size)
        model = self.model(task, tokenizer)
        if self.main and self.corpus.label_names is not None:
            write_labels(self.folder.path, self.corpus.label_names)
        trainer = self.trainer(task, model)
        stopped, diverged_step = self.train(trainer)
        if stopped in SIGNALS:
            return Stopped(stopped=stopped, steps=trainer.step, checkpoint=str(self.folder.path / LAST))
        return self.report(task, model, trainer.step, diverged_step, stopped)

    def model(self, task: Task, tokenizer: Tokenizer) -> nn.Module:
        """The model, seeded; a fine-tuned classifier starts from the pretraining run's encoder."""
        pretrained = self.pretrained
        model_cfg = make_model_config(self.cfg, tokenizer, task, pretrained)
        source = pretrained.encoder_decoder() if pretrained is not None else None  # built before seeding: same init
        seed_everything(self.cfg.seed)
        model = build_model(task.family, model_cfg)
        if source is not None:
            if not isinstance(model, Classifier):
                raise InputError(f"init_from: a {self.cfg.task!r} model has no encoder to load")
            model.load_encoder(source)  # a resumed run then loads its own checkpoint over it
        if self.cfg.batch.pack:
            set_packed(model)  # the layers' path then names what a packed batch runs
        return model

    def trainer(self, task: Task, model: nn.Module) -> Trainer:
        """The Trainer: the task's loss, batches and checkpoint selection; evaluation records the mixture weights."""

        def evaluate_fn(m: nn.Module) -> dict:
            metrics = task.evaluate(m)
            weights = mixture_weights(m)
            if weights is not None:
                metrics["mixture_weights"] = weights
            return metrics

        out_dir = self.folder.path
        train_cfg = self.cfg.train_config(best_metric=task.select_metric, best_mode=task.select_mode,
                                          progress=self.progress)
        return Trainer(model, task.step_fn, task.train_batches, train_cfg, evaluate_fn=evaluate_fn, out_dir=out_dir,
                       tokenizer=str(out_dir / TOKENIZER_DIR), device=self.info.device,
                       reference_loss=task.uniform_loss())

    def train(self, trainer: Trainer) -> tuple[str, int | None]:
        """(why training stopped, the first diverged step or None); a diverged run is reported from the best
        checkpoint saved before it."""
        try:
            return trainer.train(resume=self.resume).stopped, None
        except Diverged as e:
            if self.main:
                warnings.warn(f"{self.folder.path}: training diverged at step {e.step} ({e}); reporting the best "
                              "checkpoint saved before it", stacklevel=4)
            return "diverged", e.step

    def report(self, task: Task, model: nn.Module, step: int, diverged_step: int | None, stopped: str) -> RunRecord:
        """result.json (rank 0 writes it; every rank returns it)."""
        if self.main:
            result = summarize(self.cfg, task, model, self.corpus, self.folder.path, step, diverged_step, stopped)
            if self.pretrained is not None:
                result["init_from"] = self.pretrained.record()
            result["provenance"] = self.provenance
            write_json(self.folder.result, result)
        dist.barrier()
        return json.loads(self.folder.result.read_text())
