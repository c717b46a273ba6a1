"""Models built from one ModelConfig: language model, encoder-decoder, classifier; and generation."""

from __future__ import annotations

from torch import nn

from ..errors import InputError
from .blocks import format_param_counts
from .classifier import Classifier
from .config import ModelConfig
from .generation import BeamOutput, GenerationOutput, beam_search, generate
from .lm import LanguageModel
from .record import Recording, record
from .seq2seq import EncoderDecoder

MODEL_FAMILIES = {"lm": LanguageModel, "seq2seq": EncoderDecoder, "classifier": Classifier}


def build_model(task_family: str, config: ModelConfig) -> nn.Module:
    """``"lm"`` -> LanguageModel, ``"seq2seq"`` -> EncoderDecoder, ``"classifier"`` -> Classifier."""
    if task_family not in MODEL_FAMILIES:
        raise InputError(f"unknown model family {task_family!r}; allowed: {', '.join(MODEL_FAMILIES)}")
    return MODEL_FAMILIES[task_family](config)


__all__ = ["BeamOutput", "Classifier", "EncoderDecoder", "GenerationOutput", "LanguageModel", "MODEL_FAMILIES",
           "ModelConfig", "Recording", "beam_search", "build_model", "format_param_counts", "generate", "record"]
