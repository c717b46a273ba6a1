"""One training loop for every task: the task supplies a loss, the loop does the rest.

A task gives the :class:`Trainer`

* ``step_fn(model, batch) -> (loss_sum, n_tokens)``: the loss *summed* over the batch's tokens (or
  examples) and how many there were. The loop backpropagates the sums and divides the gradient by
  the token count of the whole global batch (all accumulation steps on all ranks), so one big
  batch, gradient accumulation and DDP all give the same update. ``step_fn`` must run the model
  through ``model(...)`` (its forward), since under DDP that is what synchronises gradients.
* ``train_batches(epoch, skip) -> iterable of batches`` for this rank: ``epoch`` seeds the order,
  the first ``skip`` batches of that epoch must be left out (they were consumed before a resume).
  Batches flow on across epoch ends; every rank must yield the same number of batches per epoch.
* optionally ``evaluate_fn(model) -> dict of metrics``, run on rank 0 under ``torch.no_grad()``.

It handles the optimizer and schedule, clipping, accumulation, bf16 autocast on CUDA, DDP, seeding,
JSON-lines logs (and the metric loggers of ``loggers.py``), ``torch.compile`` (``compiled.py``), a
progress bar, best/last checkpoints and exact resumption, also after SIGINT or SIGTERM (the current
step finishes, ``last`` is saved, ``train`` returns).

Divergence: the loop raises :class:`Diverged` (see its docstring for the rule) before the optimizer
applies the update that revealed it; no checkpoint is written after the loss first crossed the
threshold, so neither ``last`` nor ``best`` is ever a diverged step.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import signal
import sys
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from ..errors import FieldError, InputError, os_error_line, positive_int
from ..runs.files import LAST
from . import distributed as dist_utils
from .checkpoint import (CheckpointError, TokenizerSaver, capture_rng_state, intact_checkpoints, load_checkpoint,
                         point_last, resolve_checkpoint, restore_rng_state, save_checkpoint, step_of)
from .compiled import compile_model
from .loggers import MetricLogger, build_loggers, check_loggers, require_loggers
from .optim import SCHEDULES, build_optimizer, build_scheduler

StepFn = Callable[[nn.Module, Any], "tuple[Tensor, Tensor | int]"]
BatchesFn = Callable[[int, int], Iterable]
EvaluateFn = Callable[[nn.Module], "dict[str, float]"]

# consecutive updates above the divergence threshold that stop a run (one spike is not divergence)
DIVERGENCE_PATIENCE = 3


class Diverged(RuntimeError):
    """The training loss diverged; ``step`` is the first update of the divergent stretch.

    Rule: with ``reference`` = the larger of the loss of the run's first update (an untrained model)
    and the task's uniform-predictor loss (ln V for tokens, ln K for K classes, when it has one), the
    run has diverged when the training loss (per token, over the global batch) is not finite, or is
    above ``divergence_factor * reference`` for ``DIVERGENCE_PATIENCE`` consecutive updates (or from
    some update until the last one). A healthy run stays below its untrained loss after its first
    steps, so twice that, three updates in a row, cannot happen to it.
    """

    def __init__(self, message: str, step: int, loss: float):
        super().__init__(message)
        self.step, self.loss = step, loss


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and every GPU)."""
    import numpy as np  # the training extra's: imported here so that reading a config needs no extra

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def to_device(batch: Any, device: torch.device) -> Any:
    """Move tensors inside (nested) dicts, lists, tuples and dataclasses, or anything with ``.to``."""
    if isinstance(batch, Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return type(batch)((k, to_device(v, device)) for k, v in batch.items())
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(to_device(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        return dataclasses.replace(batch, **{f.name: to_device(getattr(batch, f.name), device)
                                             for f in dataclasses.fields(batch) if f.init})
    if hasattr(batch, "to"):
        return batch.to(device)
    return batch


@dataclass
class TrainConfig:
    """Optimisation and bookkeeping settings (steps count optimizer updates)."""

    max_steps: int
    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    warmup_steps: int = 0
    schedule: str = "inverse_sqrt"          # one of SCHEDULES
    schedule_steps: int | None = None        # length of the cosine decay; default max_steps
    min_lr_ratio: float = 0.0                # cosine floor, as a fraction of lr
    grad_accum: int = 1                      # micro-batches per update (per rank)
    clip_norm: float | None = 1.0            # None or 0 disables clipping
    eval_every: int = 0                      # 0: evaluate only at the end
    save_every: int = 0                      # 0: save when evaluating and at the end
    log_every: int = 10
    best_metric: str | None = None           # key of evaluate_fn's dict that picks ``best``
    best_mode: str = "min"                   # "min" or "max"
    # early stopping at a target: stop once an evaluation gives ``stop_metric`` at or above ``stop_at``
    # (at or below with stop_mode "min"), e.g. accuracy 0.99 (Zoology's rule for recall)
    stop_metric: str | None = None
    stop_at: float | None = None
    stop_mode: str = "max"
    seed: int = 0
    max_minutes: float | None = None         # wall-clock cap on training, summed over resumes
    amp: bool | None = None                  # bf16 autocast; None: on CUDA only
    deterministic: bool = True               # deterministic kernels while training on CPU
    find_unused_parameters: bool = False     # DDP option for models with branches left unused
    progress: bool = True                    # tqdm bar on rank 0 when stderr is a terminal
    divergence_factor: float | None = 2.0    # see Diverged; None disables the rule (a non-finite loss still stops)
    loggers: list = field(default_factory=lambda: ["jsonl"])  # see loggers.py; jsonl (log.jsonl) is always one
    compile: bool = False                    # torch.compile the training forward (see compile_model)

    def __post_init__(self):
        """Type and range of every field; a ValueError starts with the field name and says what is allowed."""
        for name in ("max_steps", "grad_accum", "log_every"):
            positive_int(name, getattr(self, name))
        for name, low in (("warmup_steps", 0), ("eval_every", 0), ("save_every", 0), ("seed", -2**63)):
            _check_int(name, getattr(self, name), low)
        if self.schedule_steps is not None:
            positive_int("schedule_steps", self.schedule_steps)
        _check_number("lr", self.lr, "> 0", lambda v: v > 0)
        _check_number("weight_decay", self.weight_decay, ">= 0", lambda v: v >= 0)
        _check_number("min_lr_ratio", self.min_lr_ratio, "in [0, 1]", lambda v: 0 <= v <= 1)
        if self.clip_norm is not None:
            _check_number("clip_norm", self.clip_norm, ">= 0 or null (0 and null disable clipping)", lambda v: v >= 0)
        if self.max_minutes is not None:
            _check_number("max_minutes", self.max_minutes, "> 0 or null", lambda v: v > 0)
        if self.divergence_factor is not None:
            _check_number("divergence_factor", self.divergence_factor, "> 1 or null", lambda v: v > 1)
        betas = self.betas
        if (not isinstance(betas, (list, tuple)) or len(betas) != 2
                or not all(_is_number(b) and 0 <= b < 1 for b in betas)):
            raise FieldError("betas", f"betas must be two numbers in [0, 1) such as [0.9, 0.98], got {betas!r}")
        self.betas = tuple(float(b) for b in betas)
        for name, allowed in (("schedule", SCHEDULES), ("best_mode", ("min", "max")), ("stop_mode", ("min", "max"))):
            if getattr(self, name) not in allowed:
                raise FieldError(name, f"{name}={getattr(self, name)!r} is not allowed; allowed: {', '.join(allowed)}")
        self.loggers = check_loggers(self.loggers)
        for name in ("deterministic", "find_unused_parameters", "progress", "amp", "compile"):
            value = getattr(self, name)
            if not isinstance(value, bool) and not (name == "amp" and value is None):
                allowed = "true, false or null (on CUDA only)" if name == "amp" else "true or false"
                raise FieldError(name, f"{name} must be a boolean ({allowed}), got {value!r}")
        if self.best_metric is not None and not isinstance(self.best_metric, str):
            raise FieldError("best_metric", f"best_metric must be a metric name or null, got {self.best_metric!r}")
        if self.stop_metric is not None and not isinstance(self.stop_metric, str):
            raise FieldError("stop_metric", f"stop_metric must be a metric name or null, got {self.stop_metric!r}")
        if self.stop_at is not None:
            _check_number("stop_at", self.stop_at, "(the target of stop_metric) or null", lambda v: True)
        if (self.stop_metric is None) != (self.stop_at is None):
            raise FieldError("stop_at", "stop_at and stop_metric go together: early stopping needs both stop_metric and stop_at (or neither)")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_int(name: str, value, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise FieldError(name, f"{name} must be an integer >= {low}, got {value!r}")


def _check_number(name: str, value, allowed: str, ok: Callable[[float], bool]) -> None:
    if not _is_number(value) or not math.isfinite(value) or not ok(value):
        raise FieldError(name, f"{name} must be a number {allowed}, got {value!r}")


@dataclass
class TrainResult:
    step: int
    stopped: str                 # "max_steps", "max_minutes", "target" (stop_at reached), "SIGINT" or "SIGTERM"
    loss: float | None           # training loss of the last update
    metrics: dict = field(default_factory=dict)   # last evaluation
    best_metric: float | None = None
    checkpoint: Path | None = None


class Trainer:
    """Train ``model`` with ``step_fn`` on ``train_batches``; see the module docstring for the contract.

    Args:
        out_dir: run folder for checkpoints (``last``, ``best``) and ``log.jsonl``; ``None`` keeps
            nothing on disk.
        model_config: dict written as ``config.json``; default: ``model.config`` if it is a dataclass.
        tokenizer: file, folder or saver callable stored in every checkpoint's ``tokenizer/``.
        device: default: the process's GPU under CUDA, else CPU.
        reference_loss: the loss of a uniform predictor (ln of the vocabulary or class count), if the
            task has one; it sets a floor on the divergence threshold (see :class:`Diverged`).
    Call :meth:`train` (``resume=True`` continues ``out_dir/last``). Under ``torchrun``, call
    :func:`~synthesizer.training.distributed.init_distributed` first; the model is wrapped in DDP here.
    """

    def __init__(self, model: nn.Module, step_fn: StepFn, train_batches: BatchesFn, config: TrainConfig, *,
                 evaluate_fn: EvaluateFn | None = None, out_dir: str | os.PathLike | None = None,
                 model_config: dict | None = None, tokenizer: str | os.PathLike | TokenizerSaver | None = None,
                 device: str | torch.device | None = None, reference_loss: float | None = None):
        if config.best_metric is not None and evaluate_fn is None:
            raise ValueError(f"best_metric={config.best_metric!r} needs an evaluate_fn")
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.step_fn, self.train_batches, self.evaluate_fn = step_fn, train_batches, evaluate_fn
        self.config = config
        self.out_dir = Path(out_dir) if out_dir is not None else None
        if model_config is None and dataclasses.is_dataclass(getattr(model, "config", None)):
            model_config = dataclasses.asdict(model.config)
        self.model_config = model_config or {}
        self.tokenizer = tokenizer
        require_loggers(config.loggers)  # a missing package stops the run now, not when training starts
        self.optimizer = build_optimizer(model, config.lr, config.weight_decay, config.betas)
        self.scheduler = build_scheduler(self.optimizer, config.warmup_steps,
                                         config.schedule_steps or config.max_steps, config.schedule,
                                         config.min_lr_ratio)
        self.ddp_model = dist_utils.wrap_model(model, self.device, config.find_unused_parameters)
        if config.compile:  # only the training forward: checkpoints and evaluation use self.model, plain names
            self.ddp_model = compile_model(self.ddp_model, self.device)
        self.use_amp = config.amp if config.amp is not None else self.device.type == "cuda"
        # position: optimizer steps done, and where the batch stream stands
        self.step, self.epoch, self.batch_in_epoch = 0, 0, 0
        self.best_metric: float | None = None
        self.elapsed_before = 0.0
        self._batches = None
        self._signal: int | None = None
        # divergence watch: the untrained loss (kept in checkpoints) and the current stretch above threshold
        self.reference_loss = reference_loss
        self.first_loss: float | None = None
        self._above, self._above_since = 0, None
        self._loggers: list[MetricLogger] = []  # log.jsonl and the others, open during train() on rank 0

    # -- batches ---------------------------------------------------------------------------

    def _next_batch(self):
        while True:
            if self._batches is None:
                self._batches = iter(self.train_batches(self.epoch, self.batch_in_epoch))
            try:
                batch = next(self._batches)
            except StopIteration:
                if self.batch_in_epoch == 0:
                    raise InputError(f"train_batches(epoch={self.epoch}, skip=0) yielded no batches") from None
                self.epoch, self.batch_in_epoch, self._batches = self.epoch + 1, 0, None
                continue
            self.batch_in_epoch += 1
            return batch

    # -- one update ------------------------------------------------------------------------

    def _autocast(self):
        if not self.use_amp:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    def _train_step(self) -> tuple[float, int, str | None]:
        """One optimizer update over ``grad_accum`` micro-batches.

        Returns (loss per token, global tokens, ``None`` or why all ranks stop: "signal" or "max_minutes").
        Sets ``self.lr`` to the learning rate this update used.
        """
        cfg, model = self.config, self.ddp_model
        model.train()
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        n_tokens = torch.zeros((), dtype=torch.float64, device=self.device)
        for i in range(cfg.grad_accum):
            batch = to_device(self._next_batch(), self.device)
            last = i == cfg.grad_accum - 1
            # gradients are all-reduced once, on the last micro-batch
            sync = model.no_sync() if isinstance(model, DistributedDataParallel) and not last else nullcontext()
            with sync:
                with self._autocast():
                    loss, count = self.step_fn(model, batch)
                if loss.ndim != 0:
                    raise ValueError(f"step_fn must return a scalar loss sum, got shape {tuple(loss.shape)}")
                loss.float().backward()
            loss_sum += loss.detach().double()
            n_tokens += torch.as_tensor(count, device=self.device).double()
        # one collective for loss, tokens and the stop vote, so all ranks agree on when to stop
        # a signal that arrived during this update stops the run after it
        out_of_time = self.config.max_minutes is not None and self._elapsed() >= self.config.max_minutes * 60
        votes = torch.tensor([float(self._signal is not None), float(out_of_time)], dtype=torch.float64, device=self.device)
        stats = dist_utils.all_reduce_sum(torch.cat([loss_sum.view(1), n_tokens.view(1), votes]))
        global_loss, global_tokens, signal_votes, time_votes = stats.tolist()
        if global_tokens <= 0:
            raise InputError(f"step {self.step + 1}: the global batch has no tokens (step_fn returned n_tokens=0)")
        # every rank sees the same global loss, so all stop together; raised before the update is applied
        self._watch_divergence(global_loss / global_tokens)
        # DDP averaged the per-rank sums; turn that into the sum over the global batch / its tokens
        scale = dist_utils.get_world_size() / global_tokens
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        torch._foreach_mul_(grads, scale)
        if cfg.clip_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm)
        self.lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        stop = "signal" if signal_votes > 0 else "max_minutes" if time_votes > 0 else None
        return global_loss / global_tokens, int(global_tokens), stop

    def _threshold(self) -> float | None:
        factor = self.config.divergence_factor
        if factor is None or self.first_loss is None:
            return None
        return factor * max(self.first_loss, self.reference_loss or 0.0)

    def _watch_divergence(self, loss: float) -> None:
        """Apply the rule of :class:`Diverged` to the loss of update ``self.step + 1``."""
        step = self.step + 1
        if not math.isfinite(loss):
            raise Diverged(f"training loss is {loss} at step {step}", self._above_since or step, loss)
        if self.first_loss is None:
            self.first_loss = loss
        threshold = self._threshold()
        if threshold is None or loss <= threshold:
            self._above, self._above_since = 0, None
            return
        self._above, self._above_since = self._above + 1, self._above_since or step
        if self._above >= DIVERGENCE_PATIENCE:
            raise Diverged(f"training loss {loss:.4g} above {threshold:.4g} ({self.config.divergence_factor:g} x the "
                           f"reference loss) for {self._above} updates since step {self._above_since}",
                           self._above_since, loss)

    # -- evaluation and checkpoints --------------------------------------------------------

    def _reached_target(self, metrics: dict) -> bool:
        """Whether this evaluation reached the early-stopping target (``stop_metric``, ``stop_at``)."""
        cfg = self.config
        if cfg.stop_metric is None or cfg.stop_at is None or not metrics:
            return False
        if cfg.stop_metric not in metrics:
            raise InputError(f"stop_metric {cfg.stop_metric!r} is not among the evaluation metrics: "
                             f"{', '.join(sorted(metrics))}")
        value = metrics[cfg.stop_metric]
        return value >= cfg.stop_at if cfg.stop_mode == "max" else value <= cfg.stop_at

    def evaluate(self) -> dict:
        """Run ``evaluate_fn`` on rank 0 without disturbing the training RNG streams."""
        metrics: dict = {}
        if self.evaluate_fn is not None and dist_utils.is_main():
            rng = capture_rng_state()
            self.model.eval()
            with torch.no_grad(), self._autocast():
                metrics = dict(self.evaluate_fn(self.model))
            self.model.train()
            restore_rng_state(rng)
        dist_utils.barrier()
        return metrics

    def _improved(self, metrics: dict) -> bool:
        name = self.config.best_metric
        if name is None or not metrics:
            return False
        if name not in metrics:
            raise InputError(f"best_metric {name!r} is not among the evaluation metrics: {', '.join(sorted(metrics))}")
        value = float(metrics[name])
        if math.isnan(value):
            return False
        if self.best_metric is None or (value < self.best_metric if self.config.best_mode == "min" else value > self.best_metric):
            self.best_metric = value
            return True
        return False

    def save(self, best: bool = False) -> Path | None:
        """Write ``last`` (and ``best``) on rank 0; every rank must call this (RNG states are gathered)."""
        rng_states = dist_utils.all_gather_object(capture_rng_state())
        path = None
        if self.out_dir is not None and dist_utils.is_main():
            extra = {
                "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                "best_metric": self.best_metric, "elapsed": self._elapsed(),
                "world_size": dist_utils.get_world_size(), "first_loss": self.first_loss,
                "train_config": json.dumps(dataclasses.asdict(self.config)),
            }
            path = save_checkpoint(self.out_dir, self.model, self.optimizer, self.scheduler, self.step,
                                   extra=extra, config=self.model_config, tokenizer=self.tokenizer,
                                   best=best, rng_states=rng_states)
        dist_utils.barrier()
        return path

    def _resume(self) -> bool:
        """Load the newest checkpoint that reads back whole (``last``, else ``previous`` or ``best``)."""
        if self.out_dir is None:
            raise ValueError("resume=True needs an out_dir")
        candidates = intact_checkpoints(self.out_dir)
        if not candidates:
            return False
        failures = []
        for folder in candidates:
            try:
                state = load_checkpoint(folder, self.model, self.optimizer, self.scheduler, rank=dist_utils.get_rank())
                break
            except CheckpointError as e:
                failures.append(str(e))
        else:
            raise CheckpointError(f"{self.out_dir}: no intact checkpoint to resume from: {'; '.join(failures)}")
        if failures and dist_utils.is_main():
            warnings.warn(f"{failures[0]}; resuming from the older checkpoint {folder.name} (step {state['step']}) "
                          "instead", stacklevel=3)
            point_last(self.out_dir, folder)  # the damaged one is no longer pointed to, so the next save prunes it
        extra = state["extra"]
        self.step, self.epoch, self.batch_in_epoch = state["step"], extra["epoch"], extra["batch_in_epoch"]
        self.best_metric, self.elapsed_before = extra["best_metric"], extra["elapsed"]
        self.first_loss = extra.get("first_loss")
        if extra.get("world_size", 1) != dist_utils.get_world_size():
            warnings.warn(f"resuming a run saved with {extra.get('world_size')} processes on "
                          f"{dist_utils.get_world_size()}: the data order will differ from an uninterrupted run")
        return True

    # -- logging ---------------------------------------------------------------------------

    def _log(self, record: dict) -> None:
        """Hand ``record`` to the loggers (rank 0 holds them, while train() runs)."""
        for logger in self._loggers:
            logger.log(record)

    def _close_loggers(self) -> None:
        loggers, self._loggers = self._loggers, []
        for logger in loggers:
            logger.close()

    def _write_failed(self, error: OSError) -> OSError:
        """One line for a run folder that refused a write mid-run, after trying to checkpoint the steps
        since the last save (the log may be all that is refused): what failed, and what is kept."""
        kept = "no checkpoint was tried (several processes, or the loss above the divergence threshold)"
        if dist_utils.get_world_size() == 1 and not self._above:  # save() waits for every rank
            try:
                path = self.save()
                kept = f"saved checkpoint {path.name} (step {self.step})"
            except (OSError, CheckpointError) as e:
                last = intact_checkpoints(self.out_dir)
                kept = (f"could not save a checkpoint either ({type(e).__name__}); the last one kept is "
                        + (f"{last[0].name} (step {step_of(last[0])})" if last else "none"))
        return OSError(f"training stopped at step {self.step}: {os_error_line(error)}; {kept}; once the folder "
                       "takes writes again, continue with --resume")

    def _elapsed(self) -> float:
        return self.elapsed_before + (time.perf_counter() - self._start)

    # -- signals ---------------------------------------------------------------------------

    def _install_signal_handlers(self) -> dict:
        previous = {}

        def handler(signum, frame):
            self._signal = signum
            # a second signal acts as it did before training
            signal.signal(signum, previous[signum] if previous[signum] is not None else signal.SIG_DFL)

        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[signum] = signal.signal(signum, handler)
            except ValueError:  # not the main thread: signals cannot be caught here
                break
        return previous

    def _signalled(self) -> bool:
        """Whether a signal reached any rank (every rank asks at the same point of the run)."""
        votes = torch.tensor([float(self._signal is not None)], dtype=torch.float64, device=self.device)
        return dist_utils.all_reduce_sum(votes).item() > 0

    def _signal_name(self) -> str:
        return signal.Signals(self._signal).name if self._signal is not None else "signal"

    # -- the loop --------------------------------------------------------------------------

    def train(self, resume: bool = False) -> TrainResult:
        """Run until ``max_steps``, ``max_minutes`` or a signal; save ``last`` and return."""
        cfg = self.config
        main = dist_utils.is_main()
        if self.out_dir is not None:
            if not resume and (self.out_dir / LAST).exists():  # checked on every rank: none may hang
                raise InputError(f"{str(self.out_dir)!r} already holds a checkpoint; pass resume=True to "
                                 "continue it, or choose another out_dir")
            self.out_dir.mkdir(parents=True, exist_ok=True)
        dist_utils.barrier()
        if not (resume and self._resume()):
            seed_everything(cfg.seed + dist_utils.get_rank())
        if self.step >= cfg.max_steps:  # a finished run resumed: nothing to do
            dist_utils.barrier()
            return TrainResult(self.step, "max_steps", None, {}, self.best_metric, self.out_dir and resolve_checkpoint(self.out_dir))
        self._batches, self._signal = None, None
        deterministic_before = torch.are_deterministic_algorithms_enabled()
        if cfg.deterministic and self.device.type == "cpu":
            torch.use_deterministic_algorithms(True, warn_only=True)
        previous_handlers = self._install_signal_handlers()
        self._start = time.perf_counter()
        bar = None
        if cfg.progress and main and sys.stderr.isatty():
            from tqdm.auto import tqdm
            bar = tqdm(total=cfg.max_steps, initial=self.step, unit="step", dynamic_ncols=True)
        if self.out_dir is not None and main:
            self._loggers = build_loggers(cfg.loggers, self.out_dir, self.step)
        try:
            self._loop(bar)
            stopped, loss, metrics, path = self._outcome
            self._log({"kind": "end", "step": self.step, "stopped": stopped, "elapsed": self._elapsed()})
        except Diverged as e:
            self._log({"kind": "diverged", "step": e.step, "loss": e.loss, "reason": str(e)})
            raise
        except OSError as e:  # the run folder stopped taking writes (made read-only, disk full ...)
            if self.out_dir is None:
                raise
            raise self._write_failed(e) from None
        finally:
            self._close_loggers()
            for signum, handler in previous_handlers.items():
                signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
            torch.use_deterministic_algorithms(deterministic_before)
            if bar is not None:
                bar.close()
        return TrainResult(self.step, stopped, loss, metrics, self.best_metric, path)

    def _loop(self, bar) -> None:
        """The update loop of :meth:`train`; leaves ``(stopped, loss, metrics, checkpoint)`` in ``self._outcome``.

        While the loss is above the divergence threshold (``self._above``), nothing is evaluated or
        saved: a checkpoint of a step that may turn out diverged must never become ``last`` or ``best``.
        """
        cfg = self.config
        loss, metrics, stopped, path = None, {}, "max_steps", None
        window_tokens, window_loss, window_steps, window_start = 0, 0.0, 0, time.perf_counter()
        while self.step < cfg.max_steps:
            loss, tokens, stop = self._train_step()
            window_tokens, window_loss, window_steps = window_tokens + tokens, window_loss + loss, window_steps + 1
            now = time.perf_counter()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{window_tokens / max(now - window_start, 1e-9):.0f}",
                                refresh=False)
            if self.step % cfg.log_every == 0 or self.step == cfg.max_steps:
                self._log({"kind": "train", "step": self.step, "epoch": self.epoch,
                           "loss": window_loss / window_steps, "lr": self.lr,
                           "tokens_per_s": window_tokens / max(now - window_start, 1e-9),
                           "elapsed": self._elapsed()})
                window_tokens, window_loss, window_steps, window_start = 0, 0.0, 0, now
            if stop == "signal":  # another rank may have been the one signalled
                stopped = self._signal_name()
                break
            if stop == "max_minutes":
                stopped = stop
                break
            if self._above:
                continue
            evaluate_now = cfg.eval_every and self.step % cfg.eval_every == 0 and self.step < cfg.max_steps
            if evaluate_now:
                metrics = self.evaluate()
                self._log({"kind": "eval", "step": self.step, **metrics})
                path = self.save(best=self._improved(metrics))
                if self._reached_target(metrics):
                    stopped = "target"
                    break
            elif cfg.save_every and self.step % cfg.save_every == 0:
                path = self.save()
        if self._above and stopped in ("max_steps", "max_minutes"):
            # the run ended inside a stretch above the threshold: it cannot be reported as healthy
            raise Diverged(f"training ended with the loss above {self._threshold():.4g} since step "
                           f"{self._above_since}", self._above_since, loss)
        if stopped in ("max_steps", "max_minutes"):
            metrics = self.evaluate() if self.evaluate_fn is not None else {}
            if metrics:
                self._log({"kind": "eval", "step": self.step, **metrics})
            path = self.save(best=self._improved(metrics))
            if self._signalled():  # during the final evaluation or save: stopped, not lost; a resume only reports it
                stopped = self._signal_name()
        elif not self._above:  # a stop by signal inside a suspect stretch resumes from the checkpoint before it
            path = self.save()
        self._outcome = (stopped, loss, metrics, path)
