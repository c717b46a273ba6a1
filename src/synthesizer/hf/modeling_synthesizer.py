"""Hugging Face model classes around the project's own models.

Each class holds one project model as ``self.model`` (``LanguageModel``, ``EncoderDecoder`` or
``Classifier``) and adds only what ``transformers`` expects around it: HF argument names, the
``attention_mask`` convention (1 = keep, converted here to the project's True = padding), the loss
from ``labels`` (``num_items_in_batch`` honoured, as ``Trainer`` passes it), ``ModelOutput``s, the
decoding cache through the ``Cache`` API, and weight initialisation for ``from_pretrained``.
A run folder's weights are the wrapped model's ``state_dict`` with a ``model.`` prefix.

Inputs are left-aligned, as everywhere in the project: positions are absolute and random
synthesizer logits are indexed by them, so padding must be on the right. A left-padded
``attention_mask`` is refused (one line) rather than silently shifting every position.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import Cache, CacheLayerMixin
from transformers.modeling_outputs import (BaseModelOutput, BaseModelOutputWithPast, CausalLMOutputWithPast,
                                           Seq2SeqLMOutput, SequenceClassifierOutput)

from ..attention.masks import check_right_padded
from ..models.blocks import Embeddings
from ..models.classifier import Classifier
from ..models.lm import LanguageModel
from ..models.seq2seq import EncoderDecoder
from ..training.checkpoint import WEIGHTS_REVISION, revision_error
from .configuration_synthesizer import SynthesizerConfig

IGNORE_INDEX = -100  # HF's label for "no target here"


# ---------------------------------------------------------------------- the decoding cache
class SynthesizerCacheLayer(CacheLayerMixin):
    """One layer's decoding state, the project's own: an ``AttentionCache`` (V only for a pure
    synthesizer, K and V with vanilla) or, in a decoder, a ``DecoderLayerCache`` (that cache plus
    the projected memory). The attention layer fills it; this class answers HF's questions about it.

    Its length is the number of cached values: a pure synthesizer caches no keys, and HF's own
    layers measure the keys, which would report 0 and put every new token at position 0.
    """

    is_compileable = False
    is_croppable = False

    def __init__(self, state) -> None:  # no super().__init__(): keys/values are read from ``state``
        self.state, self.is_initialized = state, True

    def _attention_cache(self):
        return getattr(self.state, "self_attn", self.state)

    @property
    def keys(self) -> Tensor | None:
        """(B, H, t, dh) or None: the cached keys (None for a pure synthesizer)."""
        return self._attention_cache().keys

    @property
    def values(self) -> Tensor | None:
        """(B, H, t, dh) or None before the first step."""
        return self._attention_cache().values

    def lazy_initialization(self, key_states: Tensor, value_states: Tensor) -> None:
        pass

    def update(self, key_states: Tensor, value_states: Tensor, *args, **kwargs):
        raise NotImplementedError("a synthesizer layer appends to its own cache; it is not updated through Cache.update")

    def get_seq_length(self) -> int:
        return self.state.length

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.get_seq_length() + query_length, 0

    def get_max_length(self) -> int:
        return -1

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        if self.get_seq_length() > 0:
            self.state.reorder(beam_idx)

    def batch_select_indices(self, indices: Tensor) -> None:
        self.reorder_cache(torch.as_tensor(indices).flatten())

    def batch_repeat_interleave(self, repeats: int) -> None:
        values = self.values
        if values is not None:
            self.state.reorder(torch.arange(values.shape[0], device=values.device).repeat_interleave(repeats))

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("the synthesizer cache cannot be cropped (assisted decoding is not supported)")

    def reset(self) -> None:
        raise NotImplementedError("the synthesizer cache cannot be reset; start generation with a new one")

    def offload(self) -> None:  # the state lives where the model does
        pass

    def prefetch(self) -> None:
        pass

    @property
    def nbytes(self) -> int:
        return self.state.nbytes


class SynthesizerCache(Cache):
    """The project's per-layer decoding caches (``model.new_caches()``) behind HF's ``Cache`` API."""

    def __init__(self, states: list) -> None:
        super().__init__(layers=[SynthesizerCacheLayer(s) for s in states])

    @property
    def states(self) -> list:
        """The project caches, one per layer, as the project's models take them (``caches=``)."""
        return [layer.state for layer in self.layers]

    @property
    def nbytes(self) -> int:
        """Bytes of the cached keys and values (and projected memory, in a decoder)."""
        return sum(layer.nbytes for layer in self.layers)


# ---------------------------------------------------------------------- shared helpers
def padding_mask(attention_mask: Tensor | None, length: int) -> Tensor | None:
    """HF's ``attention_mask`` (B, n_total), 1 = keep, -> the project's (B, length) bool, True = padding,
    for the last ``length`` positions (the new ones when a cache holds the rest); None when nothing is
    padded. ValueError when a row has padding before a real token (left padding)."""
    if attention_mask is None:
        return None
    if attention_mask.dim() != 2:
        raise ValueError(f"attention_mask must have shape (batch, seq), got {tuple(attention_mask.shape)}")
    keep = attention_mask.bool()
    check_right_padded(~keep, "attention_mask")
    pad = ~keep[:, -length:] if length else ~keep[:, :0]
    return pad if bool(pad.any()) else None


def check_generation(model: "SynthesizerPreTrainedModel", inputs: Tensor | None, generation_config, kwargs: dict) -> None:
    """What ``generate`` is asked, checked before it decodes anything: for a causal LM, prompts of one
    length (generate appends after the last position of every row, so a shorter, right-padded prompt
    would have padding before its new tokens); for both, the positions it would fill fit
    ``max_position_embeddings`` (the rule of the project's own generation). With
    ``on_too_long="truncate"`` the budget is cut to what fits instead, with a warning."""
    decoder_only = not model.config.is_encoder_decoder
    ids = inputs if inputs is not None else kwargs.get("input_ids")
    mask = kwargs.get("attention_mask")
    if decoder_only and mask is not None:
        pad = ~mask.bool()
        check_right_padded(pad, "attention_mask")
        if bool(pad.any()):
            raise ValueError("prompts given to generate must have the same length: it appends after the last "
                             "position of every row, so a right-padded prompt would have padding before its new "
                             "tokens; generate prompts of each length in a batch of their own")
    config = generation_config if generation_config is not None else model.generation_config
    new_tokens = kwargs.get("max_new_tokens", getattr(config, "max_new_tokens", None))
    if new_tokens is None and "max_length" not in kwargs and generation_config is None:
        return  # HF's default length (20): generate stops there, EOS may come first
    start = ids.shape[-1] if decoder_only and isinstance(ids, Tensor) else 1  # a decoder starts from one token
    limit = model.config.max_position_embeddings
    total = start + new_tokens if new_tokens is not None else kwargs.get("max_length", config.max_length)
    if total is None or total <= limit:
        return
    if model.config.on_too_long == "truncate":
        warnings.warn(f"generation stops at max_position_embeddings={limit} positions", stacklevel=3)
        kwargs["max_new_tokens"] = limit - start
        kwargs.pop("max_length", None)
        return
    what = "prompt length" if decoder_only else "the decoder's start token"
    asked = f"max_new_tokens={new_tokens}" if new_tokens is not None else f"max_length={total}"
    raise ValueError(f"{what} {start} + {asked}: {total} positions exceeds max_position_embeddings={limit}; "
                     f"ask for at most {limit - start} new tokens")


def token_loss(logits: Tensor, labels: Tensor, num_items_in_batch: Tensor | int | None = None) -> Tensor:
    """Cross-entropy of logits (B, t, V) against labels (B, t) (``IGNORE_INDEX`` = no target): the mean
    over targets, or their sum divided by ``num_items_in_batch`` (what ``Trainer`` passes so that
    gradient accumulation and several processes weigh every token alike)."""
    flat, target = logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1).to(logits.device)
    if num_items_in_batch is None:
        return F.cross_entropy(flat, target, ignore_index=IGNORE_INDEX)
    total = F.cross_entropy(flat, target, ignore_index=IGNORE_INDEX, reduction="sum")
    if torch.is_tensor(num_items_in_batch):
        num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch


def _fresh(t: Tensor | None) -> bool:
    """Whether ``t`` still needs initialising (``from_pretrained`` flags what it loaded)."""
    return t is not None and not getattr(t, "_is_hf_initialized", False)


# ---------------------------------------------------------------------- base class
class SynthesizerPreTrainedModel(PreTrainedModel):
    """Weight initialisation as the project's constructors do it, for ``from_pretrained``: it builds
    the model without initialising, loads the checkpoint and initialises only what is left (missing
    weights, and the non-persistent sinusoid table, which no checkpoint holds)."""

    config_class = SynthesizerConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False
    _no_split_modules = ["EncoderBlock", "DecoderBlock"]

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """As ``PreTrainedModel.from_pretrained``; a CheckpointError for weights that another revision of
        synthesizer saved (``config.weights_revision``): they would load and give other outputs."""
        model = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        if model.config.weights_revision != WEIGHTS_REVISION:
            raise revision_error(pretrained_model_name_or_path, model.config.weights_revision)
        return model

    def save_pretrained(self, *args, **kwargs):
        # whatever these weights are, this revision's code reads them (another's are refused on loading)
        self.config.weights_revision = WEIGHTS_REVISION
        return super().save_pretrained(*args, **kwargs)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Each module's own ``reset_parameters`` (every module of the project, and torch's layers, has
        one: a registered component brings its own), where a tensor it holds was not loaded."""
        if isinstance(module, Embeddings):
            if _fresh(module.token.weight):
                module.reset_parameters()  # the project's rule (token scale); the sinusoids come with it
            else:
                module.reset_sinusoid()
            return
        own = [*module.parameters(recurse=False),
               *(b for name, b in module.named_buffers(recurse=False) if name not in module._non_persistent_buffers_set)]
        if not any(_fresh(t) for t in own) or not hasattr(module, "reset_parameters"):
            return
        # a head tied to the token embeddings leaves that table to Embeddings (its scale)
        tied = {id(m.token.weight) for m in self.modules() if isinstance(m, Embeddings)}
        if not any(id(t) in tied for t in own):
            module.reset_parameters()

    def new_cache(self) -> SynthesizerCache:
        """An empty decoding cache: V only per layer for a pure synthesizer, K and V with vanilla."""
        return SynthesizerCache(self.model.new_caches())

    def _prepare_cache_for_generation(self, generation_config, model_kwargs: dict, *args, **kwargs) -> None:
        """``generate`` decodes with the project's caches instead of HF's key-value ``DynamicCache``."""
        if model_kwargs.get("cache") is not None or generation_config.use_cache is False:
            return
        model_kwargs["cache"] = self.new_cache()

    def _cache_states(self, cache: Cache | None, use_cache: bool | None) -> tuple[Cache | None, list | None]:
        if cache is None and use_cache:
            cache = self.new_cache()
        if cache is not None and not isinstance(cache, SynthesizerCache):
            raise ValueError(f"a synthesizer model decodes with a SynthesizerCache (model.new_cache()), got "
                             f"{type(cache).__name__}")
        return cache, None if cache is None else cache.states


# ---------------------------------------------------------------------- decoder-only
class SynthesizerModel(SynthesizerPreTrainedModel):
    """The bare causal stack (``AutoModel``): input_ids (B, n) -> final hidden states (B, n, d),
    after the last LayerNorm. Same weights (``model.*``) as ``SynthesizerForCausalLM``."""

    _tied_weights_keys = {"model.head.weight": "model.embed.token.weight"}

    def __init__(self, config: SynthesizerConfig):
        super().__init__(config)
        self.model = LanguageModel(config.to_model_config())
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed.token

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.embed.token = value

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, cache: Cache | None = None,
                use_cache: bool | None = None, return_dict: bool | None = None, **kwargs) -> BaseModelOutputWithPast:
        cache, states = self._cache_states(cache, use_cache)
        hidden = self.model.hidden_states(input_ids, padding_mask(attention_mask, input_ids.shape[1]), states)
        return BaseModelOutputWithPast(last_hidden_state=hidden, cache=cache)


class SynthesizerForCausalLM(SynthesizerPreTrainedModel, GenerationMixin):
    """Decoder-only LM: input_ids (B, n) -> logits (B, n, vocab); ``labels`` (B, n) give the
    next-token loss (shifted inside, ``-100`` ignored) as HF causal LMs do."""

    def __init__(self, config: SynthesizerConfig):
        super().__init__(config)
        self.model = LanguageModel(config.to_model_config())
        self.post_init()

    _tied_weights_keys = {"model.head.weight": "model.embed.token.weight"}

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed.token

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.embed.token = value

    def get_output_embeddings(self) -> nn.Linear:
        return self.model.head

    def generate(self, inputs: Tensor | None = None, generation_config=None, **kwargs):
        """``GenerationMixin.generate`` after :func:`check_generation`: a request it cannot finish is
        refused before the first token is decoded."""
        check_generation(self, inputs, generation_config, kwargs)
        return super().generate(inputs, generation_config, **kwargs)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, labels: Tensor | None = None,
                cache: Cache | None = None, use_cache: bool | None = None, return_dict: bool | None = None,
                num_items_in_batch: Tensor | int | None = None, **kwargs) -> CausalLMOutputWithPast:
        """``position_ids`` and other HF extras are accepted and unused: positions are absolute,
        counted from what the cache holds."""
        cache, states = self._cache_states(cache, use_cache)
        logits = self.model(input_ids, padding_mask(attention_mask, input_ids.shape[1]), states)
        loss = None
        if labels is not None:
            loss = token_loss(logits[:, :-1], labels[:, 1:], num_items_in_batch)
        return CausalLMOutputWithPast(loss=loss, logits=logits, cache=cache)


# ---------------------------------------------------------------------- encoder-decoder
class _Encoder:
    """What ``generate`` runs once on the source (``get_encoder()``): the EncoderDecoder's encoder.
    A plain object, so the encoder's weights stay registered once, under ``model.``."""

    main_input_name = "input_ids"

    def __init__(self, owner: "SynthesizerForSeq2SeqLM"):
        self._owner = owner

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, **kwargs) -> BaseModelOutput:
        memory = self._owner.model.encode(input_ids, padding_mask(attention_mask, input_ids.shape[1]))
        return BaseModelOutput(last_hidden_state=memory)

    __call__ = forward


class SynthesizerForSeq2SeqLM(SynthesizerPreTrainedModel, GenerationMixin):
    """Encoder-decoder: input_ids (B, s) and decoder_input_ids (B, t) -> logits (B, t, vocab).

    ``labels`` (B, t) are the targets (the project's ``target + [eos]``); without
    ``decoder_input_ids`` they are shifted right behind ``decoder_start_token_id`` (BOS), which
    gives the project's ``[bos] + target`` decoder input.
    """

    def __init__(self, config: SynthesizerConfig):
        config.is_encoder_decoder = True
        super().__init__(config)
        self.model = EncoderDecoder(config.to_model_config())
        self.post_init()

    _tied_weights_keys = {"model.tgt_embed.token.weight": "model.src_embed.token.weight",
                          "model.head.weight": "model.src_embed.token.weight"}

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.src_embed.token

    def get_output_embeddings(self) -> nn.Linear:
        return self.model.head

    def get_encoder(self, modality: str | None = None) -> _Encoder:
        return _Encoder(self)

    def generate(self, inputs: Tensor | None = None, generation_config=None, **kwargs):
        """``GenerationMixin.generate`` after :func:`check_generation`: a request it cannot finish is
        refused before the first token is decoded."""
        check_generation(self, inputs, generation_config, kwargs)
        return super().generate(inputs, generation_config, **kwargs)

    def shift_right(self, labels: Tensor) -> Tensor:
        """labels (B, t) -> decoder inputs (B, t): start token, then labels[:, :-1] (-100 as padding)."""
        shifted = labels.new_full(labels.shape, self.config.decoder_start_token_id)
        shifted[:, 1:] = labels[:, :-1]
        return shifted.masked_fill(shifted == IGNORE_INDEX, self.config.pad_token_id)

    def forward(self, input_ids: Tensor | None = None, attention_mask: Tensor | None = None,
                decoder_input_ids: Tensor | None = None, decoder_attention_mask: Tensor | None = None,
                *, encoder_outputs=None, labels: Tensor | None = None, cache: Cache | None = None,
                use_cache: bool | None = None, return_dict: bool | None = None,
                num_items_in_batch: Tensor | int | None = None, **kwargs) -> Seq2SeqLMOutput:
        if encoder_outputs is None:
            if input_ids is None:
                raise ValueError("give input_ids (the source) or encoder_outputs")
            encoder_outputs = self.get_encoder()(input_ids, attention_mask)
        memory = encoder_outputs[0]
        src_pad = padding_mask(attention_mask, memory.shape[1]) if attention_mask is not None else None
        if src_pad is not None and attention_mask.shape[1] != memory.shape[1]:  # the source was truncated
            src_pad = padding_mask(attention_mask[:, : memory.shape[1]], memory.shape[1])
        if decoder_input_ids is None:
            if labels is None:
                raise ValueError("give decoder_input_ids or labels (shifted right into decoder inputs)")
            decoder_input_ids = self.shift_right(labels)
        cache, states = self._cache_states(cache, use_cache)
        tgt_pad = padding_mask(decoder_attention_mask, decoder_input_ids.shape[1])
        logits = self.model.decode(decoder_input_ids, memory, src_pad, tgt_pad, states)
        loss = None if labels is None else token_loss(logits, labels, num_items_in_batch)
        return Seq2SeqLMOutput(loss=loss, logits=logits, cache=cache, encoder_last_hidden_state=memory)


# ---------------------------------------------------------------------- classification
class SynthesizerForSequenceClassification(SynthesizerPreTrainedModel):
    """Encoder classifier: input_ids (B, n) (pairs: ``token_type_ids`` 0/1) -> logits (B, num_labels);
    ``num_labels=1`` regresses, logits (B, 1). ``labels``: class ids (B,), or targets (B,) for regression."""

    def __init__(self, config: SynthesizerConfig):
        super().__init__(config)
        self.model = Classifier(config.to_model_config())
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed.token

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None,
                labels: Tensor | None = None, return_dict: bool | None = None,
                **kwargs) -> SequenceClassifierOutput:
        out = self.model(input_ids, padding_mask(attention_mask, input_ids.shape[1]), token_type_ids)
        logits = out.unsqueeze(-1) if out.dim() == 1 else out  # a regressor's scores (B,) as (B, 1)
        loss = None
        if labels is not None:
            if self.config.num_labels == 1:
                loss = F.mse_loss(logits.squeeze(-1).float(), labels.to(logits.device).float())
            else:
                loss = F.cross_entropy(logits.float(), labels.to(logits.device).long(), ignore_index=IGNORE_INDEX)
        return SequenceClassifierOutput(loss=loss, logits=logits)


__all__ = ["SynthesizerCache", "SynthesizerCacheLayer", "SynthesizerForCausalLM", "SynthesizerForSeq2SeqLM",
           "SynthesizerForSequenceClassification", "SynthesizerModel", "SynthesizerPreTrainedModel"]
