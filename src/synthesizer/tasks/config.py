"""ExperimentConfig: one experiment (task, data, model, training, tokenizer, batching, evaluation) as a
dataclass that loads from YAML or JSON, takes ``a.b=value`` overrides and rejects unknown keys.

Every section is a plain dict, checked key by key here (an unknown key raises ValueError naming it and
the allowed keys) and value by value by the objects built from it (``ModelConfig``, ``TrainConfig``).
Shipped configs live in ``synthesizer/configs/*.yaml`` and are found by name (``lm-sotu-small``).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..attention.factory import check_kind
from ..data.records import TASKS
from ..models.config import ModelConfig
from ..training.loop import TrainConfig

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"

DATA_KEYS = ("corpus", "hub", "train", "valid", "test", "columns", "name", "limit", "max_history",
             "data_files", "path")
COLUMN_KEYS = ("text_column", "text_pair_column", "label_column", "source_column", "target_column", "turns_column")
# set from the tokenizer and the data, never by hand
MODEL_DERIVED = ("vocab_size", "pad_id", "bos_id", "eos_id", "n_classes")
MODEL_KEYS = tuple(f.name for f in dataclasses.fields(ModelConfig) if f.name not in MODEL_DERIVED)
# seed is top-level; model selection is the task's choice; progress is a run_experiment argument
TRAIN_OWN = ("seed", "best_metric", "best_mode", "progress")
TRAIN_KEYS = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.name not in TRAIN_OWN) + ("label_smoothing",)
TOKENIZER_KEYS = ("vocab_size", "min_frequency")
BATCH_KEYS = ("max_tokens", "max_sentences", "block_size", "max_src_len", "max_tgt_len", "max_len")
EVAL_KEYS = ("beam_size", "length_penalty", "max_eval_examples", "max_new_tokens", "batch_size")
SECTIONS = {"data": DATA_KEYS, "model": MODEL_KEYS, "train": TRAIN_KEYS, "tokenizer": TOKENIZER_KEYS,
            "batch": BATCH_KEYS, "eval": EVAL_KEYS}
TOP_KEYS = ("task", *SECTIONS, "seed")

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _unknown(key: str, where: str, allowed: tuple[str, ...]) -> ValueError:
    close = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ValueError(f"unknown config key {where}{key!r}{hint}; allowed keys: {', '.join(allowed)}")


def _numbers(value: Any) -> Any:
    """YAML 1.1 reads ``1e-3`` as a string; turn such strings into floats (recursively)."""
    if isinstance(value, str) and _NUMBER.match(value.strip()) and not value.strip().lstrip("+-").isdigit():
        return float(value)
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    return value


def parse_value(text: str) -> Any:
    """The value of a command-line override: YAML scalar/list/dict syntax (``128``, ``true``, ``[1, 2]``)."""
    import yaml

    try:
        return _numbers(yaml.safe_load(text))
    except yaml.YAMLError:
        return text


@dataclass
class ExperimentConfig:
    """One experiment. ``task``: one of ``TASKS``; the sections are described in ``docs`` and in the
    shipped configs; ``seed`` seeds model init, data order and the trainer."""

    task: str
    data: dict
    model: dict = field(default_factory=dict)
    train: dict = field(default_factory=dict)
    tokenizer: dict = field(default_factory=dict)
    batch: dict = field(default_factory=dict)
    eval: dict = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}; allowed: {', '.join(TASKS)}")
        for name, allowed in SECTIONS.items():
            section = getattr(self, name)
            if section is None:
                section = {}
            if not isinstance(section, dict):
                raise ValueError(f"config section {name!r} must be a mapping, got {type(section).__name__}")
            for key in section:
                if key not in allowed:
                    raise _unknown(key, f"{name}.", allowed)
            setattr(self, name, _numbers(dict(section)))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        self._check_data()
        self._check_values()

    # ------------------------------------------------------------------ checks
    def _check_data(self) -> None:
        sources = [k for k in ("corpus", "hub", "train") if k in self.data]
        if len(sources) != 1:
            raise ValueError("config section 'data' needs exactly one of: corpus (a built-in corpus), hub (a hub "
                             f"dataset) or train/valid/test (local files); got {', '.join(sources) or 'none'}")
        if "train" in self.data:
            for split in ("valid", "test"):
                if split not in self.data:
                    raise ValueError(f"data.{split} is missing: local files need train, valid and test paths")
        columns = self.data.get("columns", {})
        if not isinstance(columns, dict):
            raise ValueError("data.columns must be a mapping such as {text_column: text}")
        for key in columns:
            if key not in COLUMN_KEYS:
                raise _unknown(key, "data.columns.", COLUMN_KEYS)

    def _check_values(self) -> None:
        """Build the objects once with placeholder sizes, so bad values fail before any data is read."""
        ModelConfig(vocab_size=1000, pad_id=0, bos_id=1, eos_id=2, **self.model)
        train = {k: v for k, v in self.train.items() if k != "label_smoothing"}
        TrainConfig(**{"max_steps": 1, **train})
        smoothing = self.train.get("label_smoothing", 0.0)
        if not isinstance(smoothing, (int, float)) or not 0.0 <= smoothing < 1.0:
            raise ValueError(f"train.label_smoothing must be in [0, 1), got {smoothing!r}")
        max_len = self.model.get("max_len", ModelConfig.max_len)
        for key in ("block_size", "max_src_len", "max_len"):
            value = self.batch.get(key)
            if value is not None and (not isinstance(value, int) or value < 1 or value > max_len):
                raise ValueError(f"batch.{key}={value!r} must be an integer in [1, model.max_len={max_len}]")
        tgt = self.batch.get("max_tgt_len")
        if tgt is not None and (not isinstance(tgt, int) or tgt < 1 or tgt > max_len - 1):
            raise ValueError(f"batch.max_tgt_len={tgt!r} must be an integer in [1, model.max_len - 1 = {max_len - 1}] "
                             "(the decoder input also holds the start token)")
        for key in ("max_tokens", "max_sentences", "beam_size", "max_eval_examples", "max_new_tokens", "batch_size"):
            value = self.batch.get(key, self.eval.get(key))
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{'batch' if key in self.batch else 'eval'}.{key} must be a positive integer, got {value!r}")
        vocab = self.tokenizer.get("vocab_size")
        if vocab is not None and (not isinstance(vocab, int) or vocab < 262):
            raise ValueError(f"tokenizer.vocab_size must be an integer >= 262 (6 special tokens + 256 bytes), got {vocab!r}")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, data: dict, overrides: list[str] | None = None) -> "ExperimentConfig":
        if not isinstance(data, dict):
            raise ValueError(f"an experiment config must be a mapping, got {type(data).__name__}")
        data = copy.deepcopy(data)
        for item in overrides or []:
            apply_override(data, item)
        for key in data:
            if key not in TOP_KEYS:
                raise _unknown(key, "", TOP_KEYS)
        if "task" not in data or "data" not in data:
            raise ValueError("an experiment config needs 'task' and 'data'")
        return cls(**data)

    @classmethod
    def from_file(cls, path: str | Path, overrides: list[str] | None = None) -> "ExperimentConfig":
        """Load a YAML or JSON file (or a shipped config by name) and apply ``a.b=value`` overrides."""
        path = resolve_config(path)
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
        else:
            import yaml

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as e:
                mark = getattr(e, "problem_mark", None)
                where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
                raise ValueError(f"{where}: invalid YAML: {getattr(e, 'problem', None) or e}") from None
        try:
            return cls.from_dict(data or {}, overrides)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    def to_dict(self) -> dict:
        return copy.deepcopy(dataclasses.asdict(self))

    def with_attention(self, kind: str) -> "ExperimentConfig":
        """A copy whose self-attention kind is ``kind`` (checked, canonical name)."""
        data = self.to_dict()
        data["model"]["attention"] = check_kind(kind)
        return ExperimentConfig(**data)

    @property
    def attention(self) -> str:
        return check_kind(self.model.get("attention", ModelConfig.attention))


def apply_override(data: dict, item: str) -> None:
    """Set ``data[a][b] = value`` for ``item = "a.b=value"`` (keys are checked later)."""
    if "=" not in item:
        raise ValueError(f"override {item!r} must look like key.sub=value")
    key, text = item.split("=", 1)
    parts = [p for p in key.strip().split(".")]
    if not all(parts):
        raise ValueError(f"override {item!r}: empty key part")
    node = data
    for i, part in enumerate(parts[:-1]):
        if part not in node or node[part] is None:
            node[part] = {}
        if not isinstance(node[part], dict):
            raise ValueError(f"override {item!r}: {'.'.join(parts[: i + 1])} is not a section")
        node = node[part]
    node[parts[-1]] = parse_value(text)


def shipped_configs() -> dict[str, Path]:
    """Name -> path of every config shipped with the package."""
    return {p.stem: p for p in sorted(CONFIG_DIR.glob("*.yaml"))}


def config_description(path: Path) -> str:
    """The first comment line of a shipped config (its one-line description)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return ""


def resolve_config(name_or_path: str | Path) -> Path:
    """A config file path, or the shipped config of that name; ValueError listing the shipped ones."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    shipped = shipped_configs()
    if str(name_or_path) in shipped:
        return shipped[str(name_or_path)]
    raise ValueError(f"config {str(name_or_path)!r}: no such file and no shipped config of that name; "
                     f"shipped configs: {', '.join(shipped)}")
