"""SynthesizerConfig: the project's ModelConfig under Hugging Face field names.

One configuration serves the three model classes (causal LM, encoder-decoder, sequence
classification), as ``ModelConfig`` does. The HF names map onto the project's fields:

==========================  ======================  ==========================  ======================
HF field                    ModelConfig field       HF field                    ModelConfig field
==========================  ======================  ==========================  ======================
``vocab_size``              ``vocab_size``          ``attention``               ``attention``
``hidden_size``             ``d_model``             ``attention_options``       ``attention_options``
``num_attention_heads``     ``n_heads``             ``cross_attention``         ``cross_attention``
``num_hidden_layers``       ``n_layers``            ``position_embedding_type`` ``positions``
``num_encoder_layers``      ``n_encoder_layers``    ``tie_word_embeddings``     ``tie_embeddings``
``num_decoder_layers``      ``n_decoder_layers``    ``num_labels``              ``n_classes``
``intermediate_size``       ``d_ff``                ``type_vocab_size``         ``n_segments``
``max_position_embeddings`` ``max_len``             ``pad/bos/eos_token_id``    ``pad/bos/eos_id``
==========================  ======================  ==========================  ======================

``dropout``, ``pooling`` and ``on_too_long`` keep their names. ``pad/bos/eos_token_id`` may be None
(no such token) or lie outside the vocabulary, as in any HF config (see ``to_model_config``). ``attention`` is
stored in its canonical spelling (``"V+R"`` becomes ``"random+vanilla"``; a kind per layer,
``["random", "vanilla"]``, becomes ``"random,vanilla"``); every value is checked by building
the ``ModelConfig``, so a bad one raises the same ``ValueError`` the project's models raise.
"""

from __future__ import annotations

import dataclasses

from transformers import PreTrainedConfig

from ..models.config import ModelConfig, attention_text
from ..training.checkpoint import WEIGHTS_REVISION

MODEL_TYPE = "synthesizer"

# HF field -> ModelConfig field, for the fields whose names differ (num_labels is handled apart:
# it is a property of PreTrainedConfig)
_TO_PROJECT = {
    "vocab_size": "vocab_size", "hidden_size": "d_model", "num_attention_heads": "n_heads",
    "num_hidden_layers": "n_layers", "num_encoder_layers": "n_encoder_layers",
    "num_decoder_layers": "n_decoder_layers", "intermediate_size": "d_ff", "max_position_embeddings": "max_len",
    "dropout": "dropout", "attention": "attention", "cross_attention": "cross_attention",
    "attention_options": "attention_options", "position_embedding_type": "positions",
    "tie_word_embeddings": "tie_embeddings", "type_vocab_size": "n_segments", "pooling": "pooling",
    "pad_token_id": "pad_id", "bos_token_id": "bos_id", "eos_token_id": "eos_id", "on_too_long": "on_too_long",
}


# special token ids, which HF lets a config leave unset (None), and the project's defaults for them
_TOKEN_IDS = ("pad_id", "bos_id", "eos_id")
_PROJECT_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ModelConfig) if f.name in _TOKEN_IDS}


class SynthesizerConfig(PreTrainedConfig):
    """Configuration of ``SynthesizerForCausalLM``, ``SynthesizerForSeq2SeqLM`` and
    ``SynthesizerForSequenceClassification`` (defaults as ``ModelConfig``'s; ``vocab_size`` 8000).

    ``attention``: the self-attention kind (``"random"``, ``"dense+vanilla"``, ``"R+V"``, a baseline
    such as ``"linformer"``); ``attention_options``: its options (``k``, ``fd_split``,
    ``dense_per_head``, ``mix_per_head``, ``impl``). ``num_labels=1`` makes the classifier a regressor.
    """

    model_type = MODEL_TYPE

    vocab_size: int = 8000
    hidden_size: int = 256
    num_attention_heads: int = 4
    num_hidden_layers: int = 4
    num_encoder_layers: int | None = None
    num_decoder_layers: int | None = None
    intermediate_size: int | None = None
    max_position_embeddings: int = 512
    dropout: float | int = 0.1
    attention: str = "vanilla"
    attention_options: dict | None = None
    cross_attention: str = "vanilla"
    position_embedding_type: str = "learned"
    type_vocab_size: int = 2
    pooling: str = "mean"
    on_too_long: str = "error"
    # Declared, not inherited: the models tie the output projection to the token embeddings when set.
    tie_word_embeddings: bool = True
    use_cache: bool = True
    pad_token_id: int | None = 0
    bos_token_id: int | None = 1
    eos_token_id: int | None = 2
    decoder_start_token_id: int | None = None
    is_encoder_decoder: bool = False
    # How to read the weights saved beside this config (``training.checkpoint.WEIGHTS_REVISION``);
    # ``save_pretrained`` writes the current one, ``from_pretrained`` refuses any other.
    weights_revision: int = WEIGHTS_REVISION

    def __post_init__(self, **kwargs):
        self.attention = attention_text(self.attention)  # one kind, or a kind per layer joined by ','
        self.attention_options = dict(self.attention_options or {})
        if self.decoder_start_token_id is None:  # the project's decoder starts every target from BOS
            self.decoder_start_token_id = self.bos_token_id
        super().__post_init__(**kwargs)
        if self.num_labels == 1 and self.problem_type is None:
            self.problem_type = "regression"
        self.to_model_config()  # every value checked now, with the project's messages

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        if config_dict.get("model_type") == MODEL_TYPE and "weights_revision" not in config_dict:
            config_dict = {**config_dict, "weights_revision": 1}  # saved by 0.1.0, which recorded none
        return super().from_dict(config_dict, **kwargs)

    def to_model_config(self) -> ModelConfig:
        """The project's ``ModelConfig`` of these fields (ValueError naming a bad value). A special token
        id that is None here (no such token) or not a token of the vocabulary, both of which an HF config
        allows, takes ``ModelConfig``'s default there: only the project's own generation functions read
        those, never the HF classes (a list of end tokens: its first)."""
        fields = {ours: getattr(self, hf) for hf, ours in _TO_PROJECT.items()}
        for name in _TOKEN_IDS:
            if isinstance(fields[name], (list, tuple)):  # several end tokens (HF allows a list): the first
                fields[name] = fields[name][0] if fields[name] else None
            if not isinstance(fields[name], int) or not 0 <= fields[name] < self.vocab_size:
                fields[name] = _PROJECT_DEFAULTS[name]
        return ModelConfig(**fields, n_classes=self.num_labels)

    @classmethod
    def from_model_config(cls, config: ModelConfig, **kwargs) -> "SynthesizerConfig":
        """A SynthesizerConfig holding ``config``'s values (``kwargs``: further HF fields)."""
        values = config.to_dict()
        fields = {hf: values[ours] for hf, ours in _TO_PROJECT.items()}
        return cls(**fields, num_labels=config.n_classes, **kwargs)


__all__ = ["SynthesizerConfig"]
