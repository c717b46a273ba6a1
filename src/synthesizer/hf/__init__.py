"""Hugging Face ``transformers`` interop (the ``hf`` extra): ``import synthesizer.hf`` registers the
synthesizer models with ``AutoConfig``, ``AutoModel``, ``AutoModelForCausalLM``,
``AutoModelForSeq2SeqLM`` and ``AutoModelForSequenceClassification``.

``SynthesizerConfig`` (HF field names for the project's ``ModelConfig``) and three model classes
that wrap the project's own models: ``SynthesizerForCausalLM`` (``LanguageModel``),
``SynthesizerForSeq2SeqLM`` (``EncoderDecoder``), ``SynthesizerForSequenceClassification``
(``Classifier``); ``SynthesizerModel`` is the bare causal stack (``AutoModel``; of a classifier's
folder it gives ``SynthesizerEncoderModel``, the classifier's bare encoder). ``synthesizer.hf.convert`` turns
run folders into HF folders and back. Importing ``synthesizer`` alone never imports transformers.
"""

from __future__ import annotations

from transformers import (AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM,
                          AutoModelForSequenceClassification)

from .configuration_synthesizer import MODEL_TYPE, SynthesizerConfig
from .modeling_synthesizer import (SynthesizerCache, SynthesizerCacheLayer, SynthesizerEncoderModel, SynthesizerForCausalLM,
                                   SynthesizerForSeq2SeqLM, SynthesizerForSequenceClassification, SynthesizerModel,
                                   SynthesizerPreTrainedModel)

# project model family -> HF class, and back (the class named in a folder's config.json "architectures")
HF_CLASSES = {"lm": SynthesizerForCausalLM, "seq2seq": SynthesizerForSeq2SeqLM,
              "classifier": SynthesizerForSequenceClassification}


def _register() -> None:
    AutoConfig.register(MODEL_TYPE, SynthesizerConfig, exist_ok=True)
    for auto, cls in ((AutoModel, SynthesizerModel), (AutoModelForCausalLM, SynthesizerForCausalLM),
                      (AutoModelForSeq2SeqLM, SynthesizerForSeq2SeqLM),
                      (AutoModelForSequenceClassification, SynthesizerForSequenceClassification)):
        auto.register(SynthesizerConfig, cls, exist_ok=True)


_register()

__all__ = ["HF_CLASSES", "SynthesizerCache", "SynthesizerCacheLayer", "SynthesizerConfig", "SynthesizerEncoderModel",
           "SynthesizerForCausalLM",
           "SynthesizerForSeq2SeqLM", "SynthesizerForSequenceClassification", "SynthesizerModel",
           "SynthesizerPreTrainedModel"]
