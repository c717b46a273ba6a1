"""The files of a run folder (``synthesizer train --out DIR``), their names and their plain readers.

::

    DIR/
      experiment.json   the experiment config (task, data, model, train), written first
      data.json         the data's provenance: corpus, origin, split and tokenizer hashes
      labels.json       a classifier's label names, {"labels": [...]}
      log.jsonl         one JSON record per line: "train" windows, "eval" points, "end"
      result.json       the finished run's metrics (its presence means: finished)
      tokenizer/        the tokenizer (data/tokenizer.py writes what is inside)
      step-00000400/    a checkpoint (training/checkpoint.py): model.safetensors, config.json,
                        trainer_state.pt, tokenizer/
      last, previous, best   symlinks to checkpoint folders

Standard library only, so every layer that writes or reads one of these files can import it.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path

from ..errors import InputError


EXPERIMENT_FILE = "experiment.json"
DATA_FILE = "data.json"
LABELS_FILE = "labels.json"
LOG_FILE = "log.jsonl"
RESULT_FILE = "result.json"
TOKENIZER_DIR = "tokenizer"
# A checkpoint folder's files; config.json is also the model config of a Hugging Face folder.
WEIGHTS_NAME = "model.safetensors"
CONFIG_NAME = "config.json"
STATE_NAME = "trainer_state.pt"
# A study made of several comparisons: the learning-rate protocol's folders (OUT/lr-RATE, OUT/tuned) and
# table, and the baselines study's (OUT/TASK/positions-SCHEME, OUT/TASK/matched-KIND, its choices)
LR_PREFIX, TUNED, TUNING_FILE = "lr-", "tuned", "tuning.json"
POSITIONS_PREFIX, MATCHED_PREFIX, STUDY_FILE = "positions-", "matched-", "study.json"


def group_key(task: str, data: str) -> str:
    """The group of a comparison's runs of one task and data, ``<task>-<data>``: the report's group and the
    comparison's ``runs/`` sub-folder."""
    return f"{task}-{data}"


# The symlinks to checkpoint folders: the newest, the one before it, the best by validation metric.
LAST, PREVIOUS, BEST = "last", "previous", "best"
LINKS = (LAST, PREVIOUS, BEST)
# The checkpoint folders they point to: step-%08d, with a .i suffix where that step was saved before.
STEP_PREFIX = "step-"


def is_hf_folder(path: str | os.PathLike) -> bool:
    """A folder with an HF ``config.json`` of model_type "synthesizer" (read without importing transformers).
    ValueError for a ``config.json`` that does not parse (a run folder has none: it is meant as an HF one). A run
    folder (it holds experiment.json) is never one, whatever else was written into it."""
    if (Path(path) / EXPERIMENT_FILE).is_file():
        return False
    config = Path(path) / CONFIG_NAME
    try:
        data = json.loads(config.read_text()) if config.is_file() else None
    except ValueError as e:  # cut short by a copy, or not text at all
        raise InputError(f"{config}: config.json is not valid JSON ({e})") from None
    except OSError:
        return False
    return isinstance(data, dict) and data.get("model_type") == "synthesizer"


def check_outside_runs(option: str, out: str | os.PathLike) -> None:
    """ValueError naming ``option`` where the folder ``out`` is a run folder or inside one (a folder holding
    experiment.json): other commands read a run folder, and files written into it (an exported model's
    config.json and weights) would be read in place of the run's own checkpoints."""
    out = Path(out).resolve()
    for folder in (out, *out.parents):
        if (folder / EXPERIMENT_FILE).is_file():
            where = "is the run folder" if folder == out else f"is inside the run folder {folder}"
            raise InputError(f"{option} {out} {where}, which other commands read; write to a folder of its own")


def json_safe(value):
    """``value`` with every NaN or infinity (not JSON) as None, at any depth: the one rule for what a run's or
    a comparison's files store where a number is not finite."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_json(path: Path, data: dict, *, compact: bool = False) -> None:
    """Write ``data`` (through :func:`json_safe`) to ``path`` whole or not at all (a temporary file beside it,
    then renamed); ``compact``: no indentation (results.json, which holds every curve and map)."""
    tmp = path.with_name(f".{path.name}.tmp")
    text = json.dumps(json_safe(data), allow_nan=False, **({"separators": (",", ":")} if compact else {"indent": 2}))
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> dict:
    """The JSON of a run folder's file; ValueError naming the file where it is not JSON in UTF-8 (a copy cut
    short, a file of another kind)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise InputError(f"{path}: not valid JSON ({e})") from None


def write_labels(run_dir: Path, names: list[str]) -> None:
    write_json(Path(run_dir) / LABELS_FILE, {"labels": list(names)})


def read_labels(run_dir: str | os.PathLike) -> list[str] | None:
    """A classifier run's label names; None for a run without labels.json."""
    path = Path(run_dir) / LABELS_FILE
    return read_json(path)["labels"] if path.is_file() else None


def read_result(run_dir: Path) -> dict | None:
    """The finished run's result.json; None while the run is not finished."""
    path = Path(run_dir) / RESULT_FILE
    return read_json(path) if path.exists() else None


def log_records(path: Path) -> list[dict]:
    """The records of a Trainer ``log.jsonl``, in order; a line cut short (a killed writer) is skipped."""
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def read_log(path: Path) -> dict:
    """Curve, mixture-weight history, train time and tokens/s from a Trainer ``log.jsonl``."""
    curve, history = [], []
    last_train_loss, elapsed, weighted, prev = None, 0.0, 0.0, 0.0
    for rec in log_records(path):
        kind = rec.get("kind")
        if kind == "train":
            last_train_loss = rec["loss"]
            dt = max(rec["elapsed"] - prev, 0.0)
            weighted += rec["tokens_per_s"] * dt
            prev = elapsed = rec["elapsed"]
        elif kind == "eval":
            point = {"step": rec["step"], "train_loss": last_train_loss}
            point.update({f"valid_{k}": v for k, v in rec.items()
                          if k not in ("kind", "step", "mixture_weights") and isinstance(v, (int, float))})
            curve.append(point)
            if "mixture_weights" in rec:
                history.append({"step": rec["step"], "layers": rec["mixture_weights"]})
        elif kind == "end":
            elapsed = max(elapsed, rec["elapsed"])
            prev = rec["elapsed"]
    return {"curve": curve, "mixture_weights": history, "train_time_s": elapsed,
            "train_tokens_per_s": weighted / elapsed if elapsed > 0 else 0.0}


def window_speed(log_path: Path) -> float | None:
    """Median training tokens/s over the log's windows (one per ``log_every`` steps).

    The runner's ``train_tokens_per_s`` divides by wall time that includes the evaluations and
    checkpoint saves falling inside a logging window; the median over windows is robust to those few
    windows, so variants are compared on training speed alone.
    """
    speeds = [float(rec["tokens_per_s"]) for rec in log_records(log_path)
              if rec.get("kind") == "train" and isinstance(rec.get("tokens_per_s"), (int, float))]
    return statistics.median(speeds) if speeds else None
