"""ExperimentConfig: one experiment (task, data, model, training, tokenizer, batching, evaluation) as a
dataclass that loads from YAML or JSON, takes ``a.b=value`` overrides and rejects unknown keys.

Every section is a :class:`Section`: the mapping as written (what ``to_dict`` and a run's
experiment.json keep), checked key by key here (an unknown key raises ValueError naming it and the
allowed keys) and value by value, when the config is built, by one dataclass per section: ``model``
by ``ModelConfig``, ``train`` by :class:`TrainOptions` (``TrainConfig`` plus ``label_smoothing``),
``data``, ``tokenizer``, ``batch`` and ``eval`` by :class:`DataOptions`, :class:`TokenizerOptions`,
:class:`BatchOptions` and :class:`EvalOptions` below. A section is read by attribute through its
dataclass (``cfg.train.lr``, ``cfg.batch.max_tokens``), so each value has one default: the field's.
A bad value raises ValueError naming the key (``train.lr``), the value and what is allowed, before
any data is read or any folder is written. ``synthesizer train --print-config`` shows every value.
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
from collections.abc import Iterator, Mapping
from typing import Any, Callable

from ..data.records import TASKS as DATA_TASKS
from ..data.span_corruption import N_SENTINELS
from ..errors import FieldError, InputError, path_component, positive_int
from ..models.config import ModelConfig, attention_text
from ..training.loop import TrainConfig

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"

PRETRAIN = "pretrain"  # span-corruption pretraining of the encoder-decoder (tasks/pretrain.py)
TASKS = (*DATA_TASKS, PRETRAIN)
# tasks whose encoder can start from a pretraining run (``init_from``)
INIT_FROM_TASKS = ("classification", "regression")

COLUMN_KEYS = ("text_column", "text_pair_column", "label_column", "source_column", "target_column", "turns_column")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive(section: str, options: Any, names: tuple[str, ...]) -> None:
    """Each of ``names`` on ``options`` is None or an integer >= 1."""
    for name in names:
        value = getattr(options, name)
        if value is not None:
            positive_int(f"{section}.{name}", value)


@dataclass
class DataOptions:
    """The ``data`` section: exactly one source (``corpus``, ``hub``, ``train``/``valid``/``test`` paths,
    or, for pretraining only, ``corpora``: a list of built-in corpora whose texts are pooled)."""

    corpus: str | None = None
    corpora: list | None = None
    hub: str | None = None
    train: str | None = None
    valid: str | None = None
    test: str | None = None
    columns: dict = field(default_factory=dict)
    name: str | None = None
    limit: int | None = None             # at most this many examples per split
    max_words: int | None = None         # keep only examples whose texts have at most this many words
    max_history: int | None = 3          # dialogue: turns of history per example
    data_files: Any = None               # hub: a file, a list of files or {split: file(s)}
    path: str | None = None              # hub: a local folder holding the data files

    def __post_init__(self) -> None:
        for name in ("corpus", "hub", "train", "valid", "test", "name", "path"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InputError(f"data.{name} must be a non-empty string, got {value!r}")
        if self.name is not None:  # the folder a comparison keeps the runs on this data in
            path_component("data.name", self.name)
        _positive("data", self, ("limit", "max_history", "max_words"))
        if self.corpora is not None and (not isinstance(self.corpora, list) or not self.corpora or not all(
                isinstance(c, str) and c.strip() for c in self.corpora)):
            raise InputError(f"data.corpora must be a non-empty list of corpus names, got {self.corpora!r}")
        files = self.data_files
        if files is not None and not isinstance(files, (str, list, dict)):
            raise InputError(f"data.data_files must be a file, a list of files or a mapping split -> file(s), got {files!r}")
        sources = [k for k in ("corpus", "corpora", "hub", "train") if getattr(self, k) is not None]
        if len(sources) != 1:
            raise InputError("config section 'data' needs exactly one of: corpus (a built-in corpus), hub (a hub "
                             "dataset), train/valid/test (local files) or corpora (pretraining: built-in corpora); "
                             f"got {', '.join(sources) or 'none'}")
        if self.train is not None:
            for split in ("valid", "test"):
                if getattr(self, split) is None:
                    raise InputError(f"data.{split} is missing: local files need train, valid and test paths")
        if not isinstance(self.columns, dict):
            raise InputError("data.columns must be a mapping such as {text_column: text}")
        for key, value in self.columns.items():
            if key not in COLUMN_KEYS:
                raise _unknown(key, "data.columns.", COLUMN_KEYS)
            if not isinstance(value, (str, int)) or isinstance(value, bool):
                raise InputError(f"data.columns.{key} must be a column name or index, got {value!r}")


@dataclass
class TokenizerOptions:
    """The ``tokenizer`` section (byte-level BPE trained on the train split)."""

    vocab_size: int = 8000
    min_frequency: int = 2

    def __post_init__(self) -> None:
        if not _is_int(self.vocab_size) or self.vocab_size < 262:
            raise InputError("tokenizer.vocab_size must be an integer >= 262 (6 special tokens + 256 bytes), "
                             f"got {self.vocab_size!r}")
        _positive("tokenizer", self, ("min_frequency",))


@dataclass
class BatchOptions:
    """The ``batch`` section. Lengths are checked against ``model.max_len``; a length left None is the
    task's, derived from ``model.max_len`` (lm: blocks of min(max_len, 256) tokens; pretraining: max_len;
    seq2seq: sources of max_len, targets of max_len - 1; classification: max_len).

    ``pack``: training batches of packed rows (``data/packing.py``): examples (lm: documents) placed
    several to a row of ``block_size`` (lm), ``max_src_len`` / ``max_tgt_len + 1`` (seq2seq) or
    ``max_len`` (classification) tokens, each at its own positions and attending to itself only; a batch
    holds ``max_tokens`` // (the row's tokens) rows (``max_sentences`` does not apply). Evaluation and
    generation stay one example per row."""

    max_tokens: int = 4096               # tokens per batch (padding included)
    max_sentences: int | None = None     # None: no cap on the examples per batch
    block_size: int | None = None
    max_src_len: int | None = None
    max_tgt_len: int | None = None
    max_len: int | None = None
    pack: bool = False                   # training rows of several examples (see above)

    def __post_init__(self) -> None:
        _positive("batch", self, tuple(f.name for f in dataclasses.fields(self) if f.name != "pack"))
        if not isinstance(self.pack, bool):
            raise InputError(f"batch.pack must be true or false, got {self.pack!r}")

    def check_lengths(self, model_max_len: int) -> None:
        for key in ("block_size", "max_src_len", "max_len"):
            value = getattr(self, key)
            if value is not None and value > model_max_len:
                raise InputError(f"batch.{key}={value!r} must be an integer in [1, model.max_len={model_max_len}]")
        if self.max_tgt_len is not None and self.max_tgt_len > model_max_len - 1:
            raise InputError(f"batch.max_tgt_len={self.max_tgt_len!r} must be an integer in [1, model.max_len - 1 = "
                             f"{model_max_len - 1}] (the decoder input also holds the start token)")


# The test metric a seq2seq run is judged by (its ``primary_metric``), per task: the first is the default,
# the generation metric of the task's papers; ``perplexity`` (teacher-forced, against a unigram model of the
# training targets) judges the model's fit where the generation metric favours a trivial output (chit-chat
# replies, where copying the history scores more BLEU-1 than any reply a small model writes).
SEQ2SEQ_METRICS = {"translation": ("bleu", "perplexity"), "summarization": ("rougeL", "perplexity"),
                   "dialogue": ("bleu1", "perplexity")}


@dataclass
class EvalOptions:
    """The ``eval`` section (decoding settings are for the seq2seq tasks)."""

    beam_size: int = 4
    length_penalty: float = 0.6          # beam search: scores divided by ((5 + n) / 6) ** length_penalty
    max_eval_examples: int | None = None  # None: the whole split
    max_new_tokens: int | None = None    # None: batch.max_tgt_len + 1
    batch_size: int = 64                 # sources decoded together
    metric: str | None = None  # seq2seq: the test metric the run is judged by (SEQ2SEQ_METRICS); None: the first

    def __post_init__(self) -> None:
        _positive("eval", self, ("beam_size", "max_eval_examples", "max_new_tokens", "batch_size"))
        lp = self.length_penalty
        if lp is not None and (isinstance(lp, bool) or not isinstance(lp, (int, float)) or not lp >= 0):
            raise InputError(f"eval.length_penalty must be a number >= 0, got {lp!r}")

    def check_metric(self, task: str) -> None:
        """ValueError unless ``metric`` is unset or one the ``task`` can be judged by."""
        if self.metric is None:
            return
        if task not in SEQ2SEQ_METRICS:
            raise InputError(f"eval.metric is for translation, summarization and dialogue; task {task!r} is judged "
                             f"by its own metric")
        if self.metric not in SEQ2SEQ_METRICS[task]:
            raise InputError(f"eval.metric must be one of {', '.join(SEQ2SEQ_METRICS[task])} for task {task!r}, "
                             f"got {self.metric!r}")


# Label smoothing of the token loss by task where the config leaves it unset: the paper's 0.1 for the
# generation tasks, none for span-corruption pretraining (whose targets are short spans) and the rest.
LABEL_SMOOTHING = {"translation": 0.1, "summarization": 0.1, "dialogue": 0.1}


@dataclass
class TrainOptions(TrainConfig):
    """The ``train`` section: the trainer's ``TrainConfig`` and the loss's label smoothing."""

    label_smoothing: float | None = None  # None: LABEL_SMOOTHING's value for the task (0 where it has none)

    def __post_init__(self) -> None:
        super().__post_init__()
        smoothing = self.label_smoothing
        if smoothing is not None and (isinstance(smoothing, bool) or not isinstance(smoothing, (int, float))
                                      or not 0.0 <= smoothing < 1.0):
            raise FieldError("label_smoothing", f"label_smoothing must be a number in [0, 1), got {smoothing!r}")


class Section(Mapping):
    """One config section: the mapping as written (``section["lr"]``, ``"lr" in section``, ``dict(section)``)
    and its values by attribute through the section's dataclass (``section.lr``), given or the field's
    default. Keys the config may not set (the model's sizes from the tokenizer, the trainer's own) are
    not attributes; a required key left unset raises when it is read."""

    def __init__(self, name: str, given: dict, typed: Any, keys: tuple[str, ...], required: tuple[str, ...] = ()):
        self._name, self._given, self._typed, self._keys, self._required = name, given, typed, keys, required

    def __getitem__(self, key: str) -> Any:
        return self._given[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._given)

    def __len__(self) -> int:
        return len(self._given)

    def __repr__(self) -> str:
        return repr(self._given)

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):  # private and special names (copy, pickle) are never config keys
            raise AttributeError(key)
        if key not in self._keys:
            raise AttributeError(f"config section {self._name!r} has no key {key!r}; keys: {', '.join(self._keys)}")
        if key in self._required and key not in self._given:
            raise InputError(f"{self._name}.{key} is required")
        return getattr(self._typed, key)

    def resolved(self) -> dict:
        """Every settable key with its value, given or default (what ``--print-config`` shows)."""
        return {key: getattr(self._typed, key) for key in self._keys
                if key in self._given or key not in self._required}


def _keys(options: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(options))


DATA_KEYS = _keys(DataOptions)
DATA_SOURCES = ("corpus", "corpora", "hub", "train", "valid", "test")
# set from the tokenizer and the data, never by hand
MODEL_DERIVED = ("vocab_size", "pad_id", "bos_id", "eos_id", "n_classes")
MODEL_KEYS = tuple(f.name for f in dataclasses.fields(ModelConfig) if f.name not in MODEL_DERIVED)
# seed is top-level; model selection is the task's choice; progress is a run_experiment argument
TRAIN_OWN = ("seed", "best_metric", "best_mode", "progress")
TRAIN_KEYS = tuple(f.name for f in dataclasses.fields(TrainOptions) if f.name not in TRAIN_OWN)
TOKENIZER_KEYS = _keys(TokenizerOptions)
BATCH_KEYS = _keys(BatchOptions)
EVAL_KEYS = _keys(EvalOptions)
SECTIONS = {"data": DATA_KEYS, "model": MODEL_KEYS, "train": TRAIN_KEYS, "tokenizer": TOKENIZER_KEYS,
            "batch": BATCH_KEYS, "eval": EVAL_KEYS}
TOP_KEYS = ("task", *SECTIONS, "seed", "init_from")

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _unknown(key: str, where: str, allowed: tuple[str, ...]) -> ValueError:
    close = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return InputError(f"unknown config key {where}{key!r}{hint}; allowed keys: {', '.join(allowed)}")


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
    shipped configs; ``seed`` seeds model init, data order and the trainer. ``init_from`` (classification,
    regression): the folder of a pretraining run whose tokenizer and encoder weights the model starts
    from (see ``tasks/pretrained.py``); its ``tokenizer`` section is then not used."""

    task: str
    data: Mapping  # each section is given as a dict and kept as a Section (read by attribute)
    model: Mapping = field(default_factory=dict)
    train: Mapping = field(default_factory=dict)
    tokenizer: Mapping = field(default_factory=dict)
    batch: Mapping = field(default_factory=dict)
    eval: Mapping = field(default_factory=dict)
    seed: int = 0
    init_from: str | None = None

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise InputError(f"unknown task {self.task!r}; allowed: {', '.join(TASKS)}")
        for name, allowed in SECTIONS.items():
            section = getattr(self, name)
            if section is None:
                section = {}
            if not isinstance(section, Mapping):
                raise InputError(f"config section {name!r} must be a mapping, got {type(section).__name__}")
            for key in section:
                if key not in allowed:
                    raise _unknown(key, f"{name}.", allowed)
            section = _numbers(dict(section))
            if name in ("tokenizer", "batch", "eval"):  # null there means "the default", as if not given
                section = {k: v for k, v in section.items() if v is not None}
            if name == "data":  # a null source is no source: `--set data.corpus=null --set data.hub=...` swaps it
                section = {k: v for k, v in section.items() if v is not None or k not in DATA_SOURCES}
            setattr(self, name, section)
        if not _is_int(self.seed):
            raise InputError(f"seed must be an integer, got {self.seed!r}")
        if self.init_from is not None:
            if not isinstance(self.init_from, str) or not self.init_from.strip():
                raise InputError(f"init_from must be the folder of a pretraining run, got {self.init_from!r}")
            if self.task not in INIT_FROM_TASKS:
                raise InputError(f"init_from is for the tasks {', '.join(INIT_FROM_TASKS)}, not {self.task!r}")
        self._check_values()

    # ------------------------------------------------------------------ checks
    def _check_values(self) -> None:
        """Build every section's dataclass once (the model with placeholder sizes), so a bad value fails
        here, before any data is read or any run folder is written; each section keeps its dataclass."""
        data = DataOptions(**self.data)
        if data.corpora is not None and self.task != PRETRAIN:
            raise InputError(f"data.corpora (a list of corpora) is for task 'pretrain' only; give data.corpus for "
                             f"task {self.task!r}")
        if data.corpus is not None and self.task == PRETRAIN:
            raise InputError(f"task 'pretrain' reads data.corpora, a list of built-in corpora (e.g. [{data.corpus}]), "
                             "not data.corpus")
        tokenizer = TokenizerOptions(**self.tokenizer)
        if self.task == PRETRAIN and tokenizer.vocab_size < 262 + N_SENTINELS:
            raise InputError(f"tokenizer.vocab_size must be an integer >= {262 + N_SENTINELS} for pretraining "
                             f"(6 special tokens + {N_SENTINELS} sentinels + 256 bytes), got {tokenizer.vocab_size!r}")
        evaluation = EvalOptions(**self.eval)
        evaluation.check_metric(self.task)
        model = _in_section("model", lambda: ModelConfig(vocab_size=1000, pad_id=0, bos_id=1, eos_id=2, **self.model))
        batch = BatchOptions(**self.batch)
        batch.check_lengths(model.max_len)
        train = _in_section("train", lambda: TrainOptions(**{"max_steps": 1, **self.train, "seed": self.seed}))
        typed = {"data": data, "model": model, "train": train, "tokenizer": tokenizer, "batch": batch,
                 "eval": evaluation}
        for name, keys in SECTIONS.items():
            setattr(self, name, Section(name, dict(getattr(self, name)), typed[name], keys,
                                        required=("max_steps",) if name == "train" else ()))

    def train_config(self, **fields: Any) -> TrainConfig:
        """The ``TrainConfig`` of the ``train`` section and ``seed`` (``fields`` add or replace fields);
        its errors name the key as ``train.<field>``."""
        train = {k: v for k, v in self.train.items() if k != "label_smoothing"}
        return _in_section("train", lambda: TrainConfig(**{**train, "seed": self.seed, **fields}))

    @property
    def label_smoothing(self) -> float:
        """``train.label_smoothing``, or the task's (LABEL_SMOOTHING) where it is unset."""
        given = self.train.label_smoothing
        return float(given if given is not None else LABEL_SMOOTHING.get(self.task, 0.0))

    def resolved(self) -> dict:
        """The config with every default filled in, section by section (``--print-config``)."""
        out: dict[str, Any] = {"task": self.task}
        out.update({name: getattr(self, name).resolved() for name in SECTIONS})
        out["train"]["label_smoothing"] = self.label_smoothing
        out.update(seed=self.seed, init_from=self.init_from)
        return out

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, data: dict, overrides: list[str] | None = None) -> "ExperimentConfig":
        if not isinstance(data, dict):
            raise InputError(f"an experiment config must be a mapping, got {type(data).__name__}")
        data = copy.deepcopy(data)
        for item in overrides or []:
            apply_override(data, item)
        for key in data:
            if key not in TOP_KEYS:
                raise _unknown(key, "", TOP_KEYS)
        if "task" not in data or "data" not in data:
            raise InputError("an experiment config needs 'task' and 'data'")
        return cls(**data)

    @classmethod
    def from_file(cls, path: str | Path, overrides: list[str] | None = None) -> "ExperimentConfig":
        """Load a YAML or JSON file (or a shipped config by name) and apply ``a.b=value`` overrides."""
        path = resolve_config(path)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:  # a ValueError, but not the project's: said here as bad input
            raise InputError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
        if path.suffix == ".json":
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
        else:
            import yaml

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as e:
                mark = getattr(e, "problem_mark", None)
                where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
                raise InputError(f"{where}: invalid YAML: {getattr(e, 'problem', None) or e}") from None
        try:
            return cls.from_dict(data or {}, overrides)
        except InputError as e:
            raise InputError(f"{path}: {e}") from None

    def to_dict(self) -> dict:
        """The config as written (sections hold only the keys given): what a run folder keeps."""
        return copy.deepcopy({f.name: dict(value) if isinstance(value := getattr(self, f.name), Mapping) else value
                              for f in dataclasses.fields(self)})

    def with_attention(self, kind: str | list) -> "ExperimentConfig":
        """A copy whose self-attention is ``kind``: one kind or a kind per layer (checked, canonical
        spelling: ``models.config.attention_text``)."""
        data = self.to_dict()
        data["model"]["attention"] = attention_text(kind)
        return ExperimentConfig(**data)

    @property
    def data_name(self) -> str:
        """The name the data goes by, the corpus's ``name`` once loaded: the built-in corpus, the pooled
        corpora joined by ``+``, the hub id, or ``data.name`` / the train file's stem for local files."""
        d = self.data
        if d.corpus is not None:
            return d.corpus
        if d.corpora is not None:  # pretraining on several corpora (data/pretraining.py names it so)
            return "+".join(d.corpora)
        if d.hub is not None:
            return d.hub
        return d.name or Path(d.train).name.split(".")[0]

    @property
    def attention(self) -> str:
        """The self-attention's canonical spelling: one kind, or the layers' kinds joined by ``,``."""
        return attention_text(self.model.attention)


def flatten_config(config: dict) -> dict:
    """``{"train.lr": 0.001, "model.d_model": 16, "seed": 0, ...}`` of a config dict (``to_dict()``)."""
    out = {}
    for key, value in config.items():
        if isinstance(value, dict) and key != "seed":
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def _in_section(section: str, build: Callable[[], Any]) -> Any:
    """``build()``, with its errors naming the section: a field's (``lr must ...``) as ``train.lr must ...``,
    any other as ``train: ...``."""
    try:
        return build()
    except FieldError as e:
        raise e.within(section) from None
    except InputError as e:
        raise InputError(f"{section}: {e}") from None


def apply_override(data: dict, item: str) -> None:
    """Set ``data[a][b] = value`` for ``item = "a.b=value"`` (keys are checked later)."""
    if "=" not in item:
        raise InputError(f"override {item!r} must look like key.sub=value")
    key, text = item.split("=", 1)
    parts = [p for p in key.strip().split(".")]
    if not all(parts):
        raise InputError(f"override {item!r}: empty key part")
    node = data
    for i, part in enumerate(parts[:-1]):
        if part not in node or node[part] is None:
            node[part] = {}
        if not isinstance(node[part], dict):
            raise InputError(f"override {item!r}: {'.'.join(parts[: i + 1])} is not a section")
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
    raise InputError(f"config {str(name_or_path)!r}: no such file and no shipped config of that name; "
                     f"shipped configs: {', '.join(shipped)}")
