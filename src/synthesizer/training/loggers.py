"""Loggers: where the Trainer's records go (``train.loggers``), each behind one interface.

``log.jsonl`` (:class:`JsonlLogger`, "jsonl") is the run's record: every train, eval, diverged and end
record whole, read back by ``result.json``, ``compare`` and the reports. It is always written, so
``train.loggers`` must name it. The other loggers take the same records as flat scalars
(:func:`scalars_of`):

* ``train/loss``, ``train/lr``, ``train/tokens_per_s`` every ``log_every`` steps;
* ``valid/<metric>`` at every evaluation, and the mixture weights (softmax of alpha) of a mixture
  kind as ``mixture/layer<i>/<component>`` (``mixture/layer<i>/head<h>/<component>`` per head);
  components are numbered in the kind's order (``random+vanilla``: 0 random, 1 vanilla).

A logger is any object with ``log(record)`` and ``close()`` (:class:`MetricLogger`), made by
``factory(out_dir, resume_step)``; a resumed run's logger drops or hides what a crashed run wrote
after ``resume_step``, the step of the checkpoint it starts from. Adding one (Weights & Biases,
MLflow) is one class here and one entry in :data:`LOGGERS`.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Callable, Protocol

from ..errors import FieldError
from ..runs.files import LOG_FILE

JSONL = "jsonl"


class MetricLogger(Protocol):
    def log(self, record: dict) -> None:
        """Record one Trainer record (``{"kind": "train" | "eval" | ..., "step": ..., ...}``)."""

    def close(self) -> None:
        """Flush and release what the logger holds."""


class JsonlLogger:
    """``out_dir/log.jsonl``, one JSON line per record, appended as it comes (readable while training).

    Opening it drops the records a crashed run wrote after ``resume_step`` (and a line cut short by
    the crash), so a resumed run's log reads straight.
    """

    def __init__(self, out_dir: Path, resume_step: int = 0):
        self.path = Path(out_dir) / LOG_FILE
        if self.path.exists():
            self._keep_until(resume_step)

    def _keep_until(self, step: int) -> None:
        lines = []
        with open(self.path) as f:
            for line in f:
                try:
                    if json.loads(line).get("step", 0) <= step:
                        lines.append(line)
                except json.JSONDecodeError:  # a line cut short by a crash
                    continue
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(lines))
        os.replace(tmp, self.path)

    def log(self, record: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")

    def close(self) -> None:
        """Nothing to release: every record is written when it comes."""


class TensorBoardLogger:
    """TensorBoard event files in ``out_dir/tensorboard/`` (the ``log`` extra's ``tensorboard``).

    ``resume_step``: the step of the checkpoint a resumed run starts from; events a crashed run
    wrote after it are hidden by TensorBoard (``purge_step``), as ``log.jsonl`` drops them.
    """

    def __init__(self, out_dir: Path, resume_step: int = 0):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(Path(out_dir) / "tensorboard"), purge_step=resume_step + 1 if resume_step else None)

    def log(self, record: dict) -> None:
        scalars = scalars_of(record)
        for name, value in scalars.items():
            self.writer.add_scalar(name, value, record["step"])
        if scalars:
            self.writer.flush()  # a record per eval or log_every steps: cheap, and readable while training

    def close(self) -> None:
        self.writer.close()


# name -> factory(out_dir, resume_step)
LOGGERS: dict[str, Callable[[Path, int], MetricLogger]] = {JSONL: JsonlLogger, "tensorboard": TensorBoardLogger}
# name -> the optional module its logger needs (see synthesizer.extras)
MODULES = {"tensorboard": "tensorboard"}


def require_loggers(names: list[str]) -> None:
    """ModuleNotFoundError naming the module a named logger needs and lacks, before training starts."""
    from ..extras import require

    require(*(MODULES[name] for name in names if name in MODULES))


def check_loggers(names) -> list[str]:
    """``names`` as a list, or ValueError naming the allowed loggers (``jsonl`` must be among them)."""
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise FieldError("loggers", f"loggers must be a list of logger names such as [jsonl, tensorboard], got {names!r}")
    for name in names:
        if name not in LOGGERS:
            raise FieldError("loggers", f"loggers: unknown logger {name!r}; allowed: {', '.join(LOGGERS)}")
    if JSONL not in names:
        raise FieldError("loggers", f"loggers must include {JSONL!r} (log.jsonl is the run's record, which its reports read), "
                         f"got {list(names)!r}")
    return list(dict.fromkeys(names))


def build_loggers(names: list[str], out_dir: Path, resume_step: int = 0) -> list[MetricLogger]:
    """The loggers named (jsonl among them), writing under ``out_dir``, resumed at ``resume_step``."""
    return [LOGGERS[name](out_dir, resume_step) for name in check_loggers(names)]


def scalars_of(record: dict) -> dict[str, float]:
    """The flat scalars of a Trainer record (see the module docstring); {} for records without any."""
    kind = record.get("kind")
    if kind == "train":
        return {f"train/{k}": float(record[k]) for k in ("loss", "lr", "tokens_per_s") if k in record}
    if kind != "eval":
        return {}
    out = {}
    for key, value in record.items():
        if key == "mixture_weights":
            out.update(_mixture(value))
        elif key not in ("kind", "step") and isinstance(value, (int, float)) and not isinstance(value, bool) \
                and math.isfinite(value):
            out[f"valid/{key}"] = float(value)
    return out


def _mixture(layers: list) -> dict[str, float]:
    """``mixture/layer<i>/<j>`` (or ``.../head<h>/<j>``) of the nested lists of ``mixture_weights``."""
    out = {}
    for i, layer in enumerate(layers):
        per_head = bool(layer) and isinstance(layer[0], list)
        for h, weights in enumerate(layer if per_head else [layer]):
            prefix = f"mixture/layer{i}/head{h}/" if per_head else f"mixture/layer{i}/"
            out.update({f"{prefix}{j}": float(w) for j, w in enumerate(weights)})
    return out


__all__ = ["JSONL", "LOGGERS", "MODULES", "JsonlLogger", "MetricLogger", "TensorBoardLogger", "build_loggers", "check_loggers",
           "require_loggers", "scalars_of"]
