"""Run one experiment end to end: data -> tokenizer -> model -> Trainer -> best checkpoint -> test metrics.

Run folder written by :func:`run_experiment` (rank 0 only under ``torchrun``)::

    out_dir/
      .lock               held (flock) by the process training here; a second one is refused at once
      experiment.json     the ExperimentConfig, written first (resume checks it against the one given)
      data.json           where the data came from and content hashes of its splits and of the
                          tokenizer (see data/provenance.py), written first too: even a run that
                          crashed before its first checkpoint can be told apart from another
      tokenizer/          trained once on the train split, reused on resume
      labels.json         classification label names (index = class id)
      log.jsonl           the Trainer's train/eval records (eval records carry the mixture weights)
      step-*/ last best   checkpoints (see training/checkpoint.py)
      result.json         the summary below, written atomically at the end

``result.json`` (and the returned dict): task, data, attention, seed, config, test_metrics,
valid_metrics, baselines, primary_metric, higher_is_better, curve, mixture_weights, components,
params, train_time_s, train_tokens_per_s, steps, checkpoint, log, diverged, diverged_step (the first
update of the divergent stretch, or None), stopped, provenance (data.json's content), and per_example
(the test split's per-example statistics of the primary metric, in the split's order, where the task has
them: ``{"metric", "kind", "values"}``, see ``report.stats``; none for perplexity).

Resuming (``resume=True``) continues the run in ``out_dir`` only if it is the same run: the same
config, except the fields in ``RESUMABLE`` (more or fewer steps, time cap, logging, evaluation and
checkpoint cadence, and the ``eval`` section, which only changes what is measured), the same data
(content hashes of every split) and the same tokenizer file. Anything else is refused with one line
naming what differs. Without ``resume``, a folder holding a checkpoint is refused.
"""

from __future__ import annotations

import json
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..attention import registry
from ..attention.factory import check_kind, resolve_kind
from ..data.generated import GENERATED, fixed_tokenizer
from ..data.hub import load_hub
from ..data.pretraining import pretraining_corpus, text_corpus
from ..data.provenance import data_differences, data_provenance, file_hash, tokenizer_provenance
from ..runs.code import code_provenance
from ..data.records import SEQ2SEQ_TASKS, Corpus, DataError
from ..data.sources import load_corpus, load_files
from ..data.span_corruption import sentinel_tokens
from ..data.tokenizer import FILENAME as TOKENIZER_FILE, Tokenizer
from ..models import Classifier, EncoderDecoder, ModelConfig, build_model
from ..runs.files import (BEST, CONFIG_NAME, DATA_FILE, EXPERIMENT_FILE, LAST, LOG_FILE, RESULT_FILE, STATE_NAME,
                          TOKENIZER_DIR, json_safe, read_log, write_json, write_labels)
from ..training import distributed as dist
from ..training.checkpoint import (CheckpointError, corrupt, finished_checkpoint, load_model_weights,
                                   resolve_checkpoint)
from ..runs.lock import FolderLock
from ..training.loop import Diverged, Trainer, seed_everything
from .answer_lm import AnswerLMTask
from .base import Task
from .classification import ClassificationTask
from .config import PRETRAIN, ExperimentConfig, flatten_config
from .lm import LMTask
from .pretrain import PretrainTask
from .seq2seq import Seq2SeqTask

TASK_CLASSES: dict[str, type[Task]] = {"lm": LMTask, "classification": ClassificationTask,
                                       "regression": ClassificationTask, PRETRAIN: PretrainTask,
                                       **{t: Seq2SeqTask for t in SEQ2SEQ_TASKS}}
# config fields a resumed run may change (everything else must match the saved run): they decide how
# long to train and what is logged, evaluated and saved, not what each update does
RESUMABLE = ("train.max_steps", "train.max_minutes", "train.log_every", "train.eval_every", "train.save_every",
             "train.loggers", "train.compile", "eval.*")


def task_class(cfg: ExperimentConfig) -> type[Task]:
    """The task family of ``cfg``: its task's, or answer-scored LM for a generated diagnostic corpus."""
    spec = GENERATED.get(cfg.data.corpus)
    return AnswerLMTask if spec is not None and spec.answers and cfg.task == "lm" else TASK_CLASSES[cfg.task]


# ----------------------------------------------------------------------------- building blocks

def load_data(cfg: ExperimentConfig) -> Corpus:
    """The corpus named by ``cfg.data`` (built-in, hub or local files), checked against ``cfg.task``.

    Pretraining reads the texts of any data (``data.corpora``: several built-in corpora; local files
    are read as language-modelling text) as a text corpus (``data/pretraining.py``).
    """
    d = cfg.data
    max_words = d.get("max_words")
    if max_words is not None and (cfg.task == PRETRAIN or cfg.task == "lm"):
        raise ValueError(f"data.max_words keeps the short examples of an example corpus; a {cfg.task!r} run reads "
                         "documents, which it would drop whole: leave it out")
    # the length filter first, then the limit: data.limit examples of the short ones
    common = {"limit": None if max_words else d.get("limit")}
    if "max_history" in d:
        common["max_history"] = d["max_history"]
    if "corpora" in d:
        corpus = pretraining_corpus(d["corpora"], limit=d.get("limit"))
    elif "corpus" in d:
        corpus = load_corpus(d["corpus"], **common)
    elif "hub" in d:
        corpus = load_hub(d["hub"], data_files=d.get("data_files"), path=d.get("path"), **common)
    else:
        corpus = load_files("lm" if cfg.task == PRETRAIN else cfg.task, d["train"], d["valid"], d["test"],
                            name=d.get("name"), **d.get("columns", {}), **common)
    if cfg.task == PRETRAIN:
        corpus = text_corpus(corpus)
    elif corpus.task != cfg.task and not {corpus.task, cfg.task} <= {"translation", "summarization", "dialogue"}:
        raise ValueError(f"data {corpus.name!r} is a {corpus.task} corpus but task is {cfg.task!r}")
    if max_words:
        corpus = corpus.max_words(max_words).limit(d.get("limit"))
    for split in ("train", "valid", "test"):
        if not corpus.splits.get(split):
            short = f" after data.max_words={max_words} (no example that short)" if max_words else ""
            raise DataError(f"corpus {corpus.name!r} ({corpus.origin}): empty or missing {split!r} split{short}")
    return corpus


def components_of(kind: str) -> list[str]:
    parsed = resolve_kind(kind)  # a Kind, or a baseline's name
    return [parsed] if isinstance(parsed, str) else list(parsed)


def self_attention_layers(model: nn.Module) -> list[nn.Module]:
    """Every block's self-attention module (encoder first for an encoder-decoder)."""
    return [m for name, m in model.named_modules() if name.endswith(".attn")]


def mixture_weights(model: nn.Module) -> list | None:
    """softmax(alpha) of every self-attention layer as nested lists, or None if no layer mixes."""
    layers = []
    for m in self_attention_layers(model):
        w = m.mixture_weights() if hasattr(m, "mixture_weights") else None
        if w is None:
            return None
        layers.append([round(float(x), 6) for x in w] if w.dim() == 1 else [[round(float(x), 6) for x in h] for h in w])
    return layers or None


def param_summary(model: nn.Module) -> dict:
    counts = model.param_counts()
    components = registry.names()  # built-in and registered: every logits component counts
    logits = sum(v for k, v in counts.items() if k.startswith("attention.") and k.split(".", 1)[1] in components)
    return {"total": sum(counts.values()), "attention_logits": logits, "by_component": counts}


def make_model_config(cfg: ExperimentConfig, tokenizer: Tokenizer, task: Task,
                      pretrained: "Pretrained | None" = None) -> ModelConfig:
    """The model's config; a model that starts from ``pretrained`` keeps its ``max_len`` (the size of its
    position table and of the synthesizers' length-indexed weights), while ``cfg``'s ``model.max_len``
    still caps the inputs."""
    sizes = {"max_len": pretrained.model.max_len} if pretrained is not None else {}
    return ModelConfig(vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id, bos_id=tokenizer.bos_id,
                       eos_id=tokenizer.eos_id, **{**cfg.model, **task.model_fields(), **sizes})


# ----------------------------------------------------------------------------- starting from a pretraining run

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
                "task": self.cfg.task, "data": _data_label(self.cfg), "attention": check_kind(self.model.attention)}

    def encoder_decoder(self) -> EncoderDecoder:
        model = EncoderDecoder(self.model)
        load_model_weights(self.checkpoint, model)
        return model


def _data_label(cfg: ExperimentConfig) -> str:
    d = cfg.data
    return "+".join(d["corpora"]) if "corpora" in d else str(d.get("corpus") or d.get("hub") or d.get("train"))


def pretrained_run(cfg: ExperimentConfig) -> Pretrained:
    """Check that ``cfg.init_from`` is a pretraining run whose encoder fits ``cfg``'s model; ValueError
    (one line naming what does not fit) otherwise. Uses its ``best`` checkpoint, else ``last``."""
    where = f"init_from={cfg.init_from}"
    run_dir = Path(cfg.init_from)
    if not (run_dir / EXPERIMENT_FILE).is_file():
        raise DataError(f"{where}: not a run folder (no experiment.json); give the --out folder of a pretraining run")
    source = load_config(run_dir)
    if task_class(source).family != "seq2seq":
        raise ValueError(f"{where}: a {source.task!r} run has no encoder-decoder to start from; give a pretraining "
                         f"run (task {PRETRAIN!r})")
    try:
        checkpoint = finished_checkpoint(run_dir)
    except FileNotFoundError:
        checkpoint = None
    if checkpoint is None or not (checkpoint / CONFIG_NAME).is_file():
        raise DataError(f"{where}: no checkpoint yet (no 'best' or 'last' folder); finish or resume that run first")
    model = ModelConfig.from_dict(json.loads((checkpoint / CONFIG_NAME).read_text()))
    pretrained_kind, kind = check_kind(model.attention), cfg.attention
    if pretrained_kind != kind:
        raise ValueError(f"{where}: pretrained with attention {pretrained_kind!r}, but model.attention is {kind!r}; "
                         "fine-tune with the attention it was pretrained with")
    mine = ModelConfig(vocab_size=model.vocab_size, **{k: v for k, v in cfg.model.items() if k != "attention"},
                       attention=model.attention)
    differ = [f"model.{k.replace('encoder_layers', 'n_layers').replace('ffn_size', 'd_ff')}={getattr(mine, k)!r} "
              f"(pretrained: {getattr(model, k)!r})" for k in ENCODER_FIELDS if getattr(mine, k) != getattr(model, k)]
    if differ:
        raise ValueError(f"{where}: the encoder does not fit: {', '.join(differ)}; use the pretrained sizes")
    if mine.max_len > model.max_len:
        raise ValueError(f"{where}: model.max_len={mine.max_len} is longer than the pretrained model's "
                         f"{model.max_len}; set model.max_len to at most {model.max_len}")
    return Pretrained(run_dir, checkpoint, model, source)


def _resumable(key: str) -> bool:
    return key in RESUMABLE or f"{key.split('.')[0]}.*" in RESUMABLE


def _check_resume(cfg: ExperimentConfig, data: dict, out_dir: Path, resume: bool) -> None:
    """Refuse to start in a folder holding a run (without resume) or to resume a different run (one line)."""
    if not resume and (out_dir / LAST).exists():
        raise ValueError(f"{out_dir} already holds a trained run; pass resume (--resume) to continue it, "
                         "or choose another output folder (--out)")
    if not resume:
        return
    differ = []
    saved = out_dir / EXPERIMENT_FILE
    if saved.exists():
        before, now = flatten_config(json.loads(saved.read_text())), flatten_config(cfg.to_dict())
        for key in sorted(set(before) | set(now)):
            if before.get(key) != now.get(key) and not _resumable(key):
                differ.append(f"{key} ({before.get(key, 'unset')!r} before, {now.get(key, 'unset')!r} now)")
    record = out_dir / DATA_FILE
    if record.exists():
        saved_data = json.loads(record.read_text())
        differ += data_differences(saved_data.get("data", {}), data)
        token_file = out_dir / TOKENIZER_DIR / TOKENIZER_FILE
        expected = (saved_data.get("tokenizer") or {}).get("sha256")
        if expected and token_file.is_file() and file_hash(token_file) != expected:
            differ.append(f"the tokenizer file {token_file} (changed since the run started)")
    if differ:
        raise ValueError(f"cannot resume {out_dir}: it holds a different run: {'; '.join(differ)}; only "
                         f"{', '.join(RESUMABLE)} may change on resume; choose another output folder (--out)")


def _open_run_folder(cfg: ExperimentConfig, corpus: Corpus, out_dir: Path, resume: bool) -> dict:
    """Rank 0, holding the folder's lock: check ``out_dir`` may hold this run, then write experiment.json
    and data.json before anything else. Returns data.json's content."""
    data = data_provenance(corpus)
    _check_resume(cfg, data, out_dir, resume)
    record = out_dir / DATA_FILE
    saved = json.loads(record.read_text()) if resume and record.exists() else {}
    # the code of the run's first start; a resume with other code is recorded beside it
    code, now = saved.get("code") or code_provenance(), code_provenance()
    provenance = {"data": data, "tokenizer": saved.get("tokenizer"), "code": code}
    if now != code:
        provenance["code_resumed"] = now
    write_json(out_dir / EXPERIMENT_FILE, cfg.to_dict())
    write_json(record, provenance)
    return provenance


def _tokenizer(cfg: ExperimentConfig, corpus: Corpus, out_dir: Path, resume: bool, provenance: dict) -> Tokenizer:
    """Train the tokenizer on the train split once per run folder (rank 0), reuse it on resume.

    A pretraining tokenizer also holds the span-corruption sentinels; a run that starts from a
    pretraining run (``init_from``) copies that run's tokenizer instead of training one.

    Rank 0 records the saved file's hash in data.json (and in ``provenance``, which it updates).
    """
    folder = out_dir / TOKENIZER_DIR
    if dist.is_main():
        if not (resume and (folder / TOKENIZER_FILE).exists()):
            if cfg.init_from is not None:
                folder.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(Path(cfg.init_from) / TOKENIZER_DIR / TOKENIZER_FILE, folder / TOKENIZER_FILE)
            else:
                if cfg.data.corpus in GENERATED:  # a fixed word-level vocabulary (see data/generated.py)
                    tok = fixed_tokenizer(GENERATED[cfg.data.corpus].vocab)
                else:
                    extra = sentinel_tokens() if cfg.task == PRETRAIN else ()
                    tok = Tokenizer.train(corpus.texts("train"), vocab_size=cfg.tokenizer.vocab_size,
                                          min_frequency=cfg.tokenizer.min_frequency, extra_special=extra)
                tok.save(folder)
        provenance["tokenizer"] = tokenizer_provenance(folder / TOKENIZER_FILE)
        write_json(out_dir / DATA_FILE, provenance)
    dist.barrier()
    return Tokenizer.load(folder)


# ----------------------------------------------------------------------------- the runner

def run_experiment(cfg: ExperimentConfig, out_dir: str | Path, resume: bool = False, progress: bool = True) -> dict:
    """Train (or resume) ``cfg`` in ``out_dir``, evaluate the best checkpoint on test, write ``result.json``.

    Works in one process or under ``torchrun`` (data sharded by rank; rank 0 locks the folder, writes
    every file and returns the same dict on every rank). A diverged training loss (see
    :class:`~synthesizer.training.loop.Diverged`) stops training and is reported as ``"diverged": true``
    with ``diverged_step`` and the metrics of the best checkpoint before it (if any).
    """
    out_dir = Path(out_dir)
    if "max_steps" not in cfg.train:
        raise ValueError("train.max_steps is required (the number of optimizer updates)")
    pretrained = pretrained_run(cfg) if cfg.init_from is not None else None  # refused before any folder is made
    info = dist.init_distributed()
    existed, lock = out_dir.exists(), FolderLock(out_dir)
    dist.on_main(lambda: bool(lock.acquire()))  # a second process is refused here, before reading any data
    try:
        corpus = load_data(cfg)
        provenance = dist.on_main(lambda: _open_run_folder(cfg, corpus, out_dir, resume))
    except BaseException:
        lock.release()
        if not existed and info.rank == 0:  # the folder is ours and holds nothing yet
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    try:
        return _train_and_report(cfg, corpus, out_dir, resume, progress, info, provenance, pretrained)
    finally:
        lock.release()


def _train_and_report(cfg: ExperimentConfig, corpus: Corpus, out_dir: Path, resume: bool, progress: bool,
                      info: dist.DistInfo, provenance: dict, pretrained: Pretrained | None = None) -> dict:
    main = info.rank == 0
    tokenizer = _tokenizer(cfg, corpus, out_dir, resume, provenance)
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

    result_path = out_dir / RESULT_FILE
    if main:
        result = _summarize(cfg, task, model, corpus, out_dir, trainer.step, diverged_step, stopped)
        if pretrained is not None:
            result["init_from"] = pretrained.record()
        result["provenance"] = provenance
        write_json(result_path, result)
    dist.barrier()
    return json.loads(result_path.read_text())


def _summarize(cfg: ExperimentConfig, task: Task, model: nn.Module, corpus: Corpus, out_dir: Path, step: int,
               diverged_step: int | None, stopped: str) -> dict:
    """Evaluate the best checkpoint (valid and test; ``last`` if ``best`` is missing or damaged) and
    assemble the result dict."""
    checkpoint, link = None, None
    for which in (BEST, LAST):
        try:
            load_model_weights(resolve_checkpoint(out_dir, which), model)
        except FileNotFoundError:
            continue
        except CheckpointError as e:
            warnings.warn(f"{e}; trying the next checkpoint", stacklevel=2)
            continue
        checkpoint, link = out_dir / which, which
        break
    valid_metrics, test_metrics, per_example = {}, {}, None
    if checkpoint is not None:
        model.eval()
        valid_metrics = task.metrics(model, "valid")
        test_metrics = task.metrics(model, "test")
        per_example = task.per_example("test")  # what a comparison's bootstrap resamples
    log = read_log(out_dir / LOG_FILE)
    kind = cfg.attention
    return {
        "task": cfg.task, "data": corpus.name, "attention": kind, "seed": cfg.seed, "config": cfg.to_dict(),
        "test_metrics": json_safe(test_metrics), "valid_metrics": json_safe(valid_metrics),
        "baselines": task.baselines("test"),
        "primary_metric": task.primary_metric, "higher_is_better": task.higher_is_better,
        "curve": log["curve"], "mixture_weights": log["mixture_weights"], "components": components_of(kind),
        "params": param_summary(model), "train_time_s": log["train_time_s"],
        "train_tokens_per_s": log["train_tokens_per_s"], "steps": step,
        "checkpoint": str(out_dir / link) if link is not None else None,
        "log": str(out_dir / LOG_FILE), "diverged": diverged_step is not None, "diverged_step": diverged_step,
        "stopped": stopped,
        **({"per_example": per_example} if per_example else {}),
    }


# ----------------------------------------------------------------------------- loading a trained run

def load_config(run_dir: str | Path) -> ExperimentConfig:
    path = Path(run_dir) / EXPERIMENT_FILE
    if not path.is_file():
        raise DataError(f"{run_dir}: not a run folder (no experiment.json); give the --out folder of a training run")
    return ExperimentConfig.from_dict(json.loads(path.read_text()))


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
        raise ValueError(f"split must be 'valid' or 'test', got {split!r}")
    model, tokenizer, cfg = load_trained(run_dir, which)
    return evaluate_model(model, tokenizer, cfg, split)


def evaluate_model(model: nn.Module, tokenizer: Tokenizer, cfg: ExperimentConfig, split: str = "test") -> dict:
    """Metrics of ``model`` on ``split`` (``valid`` or ``test``) of the data ``cfg`` names (NaN/inf as None)."""
    if split not in ("valid", "test"):
        raise ValueError(f"split must be 'valid' or 'test', got {split!r}")
    task = task_class(cfg)(cfg, load_data(cfg), tokenizer)
    return json_safe(task.metrics(model, split))
