"""ModelConfig: one dataclass for every model, round-tripping exactly through dicts and JSON."""

from __future__ import annotations

import dataclasses
import difflib
import json
from dataclasses import dataclass, field

from ..attention.cross import CROSS_KINDS
from ..attention.factory import check_options, resolve_kind
from ..attention.kinds import Kind
from ..attention.positions import MODEL_POSITIONS
from ..errors import FieldError, positive_int

POSITIONS = MODEL_POSITIONS  # learned, sinusoidal, rope, relative, alibi, none
POOLINGS = ("mean", "first")
TOO_LONG_POLICIES = ("error", "truncate")


@dataclass
class ModelConfig:
    """Sizes and choices of a model; fields unused by a model family are ignored by it.

    ``attention`` is the self-attention kind (``"vanilla"``, ``"random+vanilla"``, ``"linformer"``...),
    with ``attention_options`` passed to it (``k``, ``fd_split``, ``dense_per_head``, ``mix_per_head``,
    ``impl`` for Synthesizers). ``n_encoder_layers``/``n_decoder_layers`` default to ``n_layers``;
    ``d_ff`` defaults to ``4 * d_model``. ``n_classes=1`` makes the classifier a regressor.
    ``pooling`` (classifier): ``"mean"`` over real tokens or ``"first"`` token.
    ``on_too_long``: ``"error"`` (ValueError) or ``"truncate"`` (keep the first ``max_len`` tokens, warn).
    ``positions``: ``"learned"`` or ``"sinusoidal"`` absolute embeddings added to the tokens; ``"rope"``,
    ``"relative"`` (T5's bucketed bias, one table per stack) or ``"alibi"`` on the dot-product
    component of the self-attention (synthesizer components keep their own positions); or ``"none"``.
    See ``attention/positions.py``.
    """

    vocab_size: int
    d_model: int = 256
    n_heads: int = 4
    n_layers: int = 4
    n_encoder_layers: int | None = None
    n_decoder_layers: int | None = None
    d_ff: int | None = None
    max_len: int = 512
    dropout: float = 0.1
    attention: str = "vanilla"
    cross_attention: str = "vanilla"
    attention_options: dict = field(default_factory=dict)
    positions: str = "learned"
    tie_embeddings: bool = True
    n_classes: int = 2
    n_segments: int = 2
    pooling: str = "mean"
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    on_too_long: str = "error"

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "max_len", "n_classes", "n_segments"):
            setattr(self, name, positive_int(name, getattr(self, name)))  # a numpy integer becomes an int
        for name in ("n_encoder_layers", "n_decoder_layers", "d_ff"):
            if getattr(self, name) is not None:
                setattr(self, name, positive_int(name, getattr(self, name)))
        if self.d_model % self.n_heads != 0:
            raise FieldError("d_model", f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; pick n_heads that divides d_model")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) or not 0.0 <= self.dropout < 1.0:
            raise FieldError("dropout", f"dropout must be a number in [0, 1), got {self.dropout!r}")
        if not isinstance(self.tie_embeddings, bool):
            raise FieldError("tie_embeddings", f"tie_embeddings must be true or false, got {self.tie_embeddings!r}")
        for name, value, allowed in (("positions", self.positions, POSITIONS), ("pooling", self.pooling, POOLINGS),
                                     ("on_too_long", self.on_too_long, TOO_LONG_POLICIES),
                                     ("cross_attention", self.cross_attention, CROSS_KINDS)):
            if value not in allowed:
                raise FieldError(name, f"{name}={value!r} is not allowed; allowed values: {', '.join(allowed)}")
        if not isinstance(self.attention_options, dict):
            raise FieldError("attention_options", f"attention_options must be a dict, got {type(self.attention_options).__name__}")
        kind = self.kind
        if isinstance(kind, Kind):  # a baseline's options are checked when it is built (it may not be importable here)
            check_options(kind, self.attention_options)
        for name in ("pad_id", "bos_id", "eos_id"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 0 <= value < self.vocab_size:
                raise FieldError(name, f"{name}={value!r} must be a token id in [0, vocab_size={self.vocab_size})")

    @property
    def kind(self) -> Kind | str:
        """``attention`` parsed once (a ``Kind``, or a baseline's name): what the blocks build their
        mixers from. Parsed again only if ``attention`` is changed."""
        cached = self.__dict__.get("_kind")
        if cached is None or cached[0] != self.attention:
            cached = (self.attention, resolve_kind(self.attention))
            self.__dict__["_kind"] = cached  # not a field: to_dict, equality and repr ignore it
        return cached[1]

    @property
    def encoder_layers(self) -> int:
        return self.n_encoder_layers or self.n_layers

    @property
    def decoder_layers(self) -> int:
        return self.n_decoder_layers or self.n_layers

    @property
    def ffn_size(self) -> int:
        return self.d_ff or 4 * self.d_model

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ModelConfig":
        """Build from a dict; an unknown key raises ValueError naming it and listing the valid keys."""
        if not isinstance(data, dict):
            raise ValueError(f"a model config must be a mapping of keys to values, got {type(data).__name__}")
        valid = [f.name for f in dataclasses.fields(cls)]
        for key in data:
            if key not in valid:
                close = difflib.get_close_matches(str(key), valid, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"unknown model config key {key!r}{hint}; valid keys: {', '.join(valid)}")
        if "vocab_size" not in data:
            raise ValueError("model config needs 'vocab_size'")
        return cls(**{k: (dict(v) if k == "attention_options" else v) for k, v in data.items()})

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ModelConfig":
        return cls.from_dict(json.loads(text))
