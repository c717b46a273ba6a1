"""Hugging Face model classes around the project's own models.

Each class holds one project model as ``self.model`` (``LanguageModel``, ``EncoderDecoder`` or
``Classifier``) and adds only what ``transformers`` expects around it: HF argument names, the
``attention_mask`` convention (1 = keep, converted here to the project's True = padding), the loss
from ``labels`` (``num_items_in_batch`` honoured, as ``Trainer`` passes it), ``ModelOutput``s or
tuples, hidden states and attention maps on request (``models.record``), ``inputs_embeds``, the
decoding cache through the ``Cache`` API (croppable, for assisted decoding), activation checkpointing
per block, and weight initialisation for ``from_pretrained``. A run folder's weights are the wrapped
model's ``state_dict`` with a ``model.`` prefix.

Inputs are left-aligned, as everywhere in the project: positions are absolute and random
synthesizer logits are indexed by them, so padding must be on the right. A left-padded
``attention_mask`` is refused (one line) rather than silently shifting every position.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import GenerationMixin, PreTrainedConfig, PreTrainedModel
from transformers.cache_utils import Cache, CacheLayerMixin
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.utils.deprecation import deprecate_kwarg
from transformers.modeling_outputs import (BaseModelOutput, BaseModelOutputWithPast, CausalLMOutputWithPast,
                                           Seq2SeqLMOutput, SequenceClassifierOutput)

from ..attention.masks import check_right_padded
from ..errors import InputError
from ..models.blocks import DecoderBlock, EncoderBlock, Embeddings
from ..models.classifier import Classifier
from ..models.lm import LanguageModel
from ..models.record import record
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

    @property
    def is_croppable(self) -> bool:
        """Every attention cache can be cut back, values-only or not (a convolution's window cannot)."""
        return hasattr(self._attention_cache(), "crop")

    def crop(self, tokens_to_remove: int) -> None:
        """Forget the last ``-tokens_to_remove`` positions (a negative count, as HF's layers take it)."""
        if tokens_to_remove > 0:
            raise InputError(f"crop takes a negative count of positions to remove, got {tokens_to_remove}")
        if not self.is_croppable:
            raise NotImplementedError(f"a {type(self._attention_cache()).__name__} cannot be cut back: the attention "
                                      f"kind keeps a fixed window, not every position (assisted decoding needs it)")
        if tokens_to_remove:
            self.state.crop(max(self.get_seq_length() + tokens_to_remove, 0))

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
def padding_mask(attention_mask: Tensor | None, length: int, positions: Tensor | None = None) -> Tensor | None:
    """HF's ``attention_mask`` (B, n_total), 1 = keep, -> the project's (B, length) bool, True = padding,
    for the last ``length`` positions (the new ones when a cache holds the rest); None when nothing is
    padded (in eager calls; traced ones always get the mask). Without per-token ``positions``, ValueError
    when a row has padding before a real token (left padding needs each row's own positions: see
    :func:`token_positions`; checked in eager calls, not under torch.compile/export)."""
    if attention_mask is None:
        return None
    if attention_mask.dim() != 2:
        raise InputError(f"attention_mask must have shape (batch, seq), got {tuple(attention_mask.shape)}")
    keep = attention_mask.bool()
    if positions is None:
        check_right_padded(~keep, "attention_mask")  # an eager call only: under torch.compile/export it is skipped
    pad = ~keep[:, -length:] if length else ~keep[:, :0]
    if torch.compiler.is_compiling():
        return pad  # no branch on the mask's values: export and compile trace one graph for every mask
    return pad if bool(pad.any()) else None


def token_positions(attention_mask: Tensor | None, position_ids: Tensor | None, length: int,
                    start: int) -> Tensor | None:
    """The positions of the last ``length`` tokens (B, length) when they are not ``start..start+length-1``:
    ``position_ids`` as given, or, for a left-padded ``attention_mask`` (a row's padding before its
    tokens), each row counted from its first real token, as HF's models count them; None otherwise, so
    that the usual batch-shared positions (and the fast kernels) serve. Under torch.compile/export the
    mask is not read (no branch on data): pass ``position_ids`` there for left-padded rows."""
    if position_ids is not None:
        positions = position_ids[:, -length:].long()
    elif attention_mask is None or torch.compiler.is_compiling():
        return None
    else:
        keep = attention_mask.bool()
        if not bool((~keep[:, :-1] & keep[:, 1:]).any()):  # no padding before a real token
            return None
        positions = (keep.long().cumsum(-1) - 1).clamp(min=0)[:, -length:]
    if not torch.compiler.is_compiling():
        default = torch.arange(start, start + length, device=positions.device)
        if positions.shape[1] == length and bool((positions == default).all()):
            return None
    return positions


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
        if bool((pad[:, 1:] & ~pad[:, :-1]).any()):  # padding after a real token: right padding
            raise InputError("prompts of different lengths go to generate left-padded (the tokenizer's "
                             "padding_side='left'): it appends after the last position of every row, so a "
                             "right-padded prompt would have padding before its new tokens")
    config = generation_config if generation_config is not None else model.generation_config
    new_tokens = kwargs.get("max_new_tokens", getattr(config, "max_new_tokens", None))
    if new_tokens is None and "max_length" not in kwargs and generation_config is None:
        return  # HF's default length (20): generate stops there, EOS may come first
    if ids is None and decoder_only:
        ids = kwargs.get("inputs_embeds")  # (B, n, d): a prompt of n positions
    start = ids.shape[1] if decoder_only and isinstance(ids, Tensor) else 1  # a decoder starts from one token
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
    raise InputError(f"{what} {start} + {asked}: {total} positions exceeds max_position_embeddings={limit}; "
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


def _one_input(input_ids: Tensor | None, inputs_embeds: Tensor | None, what: str = "input_ids") -> int:
    """The sequence length of the one input given: ``what`` (B, n) or ``inputs_embeds`` (B, n, d)."""
    if (input_ids is None) == (inputs_embeds is None):
        raise InputError(f"give exactly one of {what} and inputs_embeds")
    return (input_ids if input_ids is not None else inputs_embeds).shape[1]


def _states(recorded: dict[str, list[Tensor]], stack: str) -> tuple[Tensor, ...] | None:
    return tuple(recorded[stack]) if stack in recorded else None


def _returned(output, return_dict: bool):
    """The output as asked: the ``ModelOutput``, or (``return_dict=False``) its tuple of the fields set."""
    return output if return_dict else output.to_tuple()


# HF class -> the Auto class that loads it; classes that load each other's folders share a family
_AUTO_OF = {"SynthesizerModel": "AutoModel", "SynthesizerForCausalLM": "AutoModelForCausalLM",
            "SynthesizerForSeq2SeqLM": "AutoModelForSeq2SeqLM", "SynthesizerEncoderModel": "AutoModel",
            "SynthesizerForSequenceClassification": "AutoModelForSequenceClassification"}
_FAMILY_OF = {"SynthesizerModel": "lm", "SynthesizerForCausalLM": "lm", "SynthesizerForSeq2SeqLM": "seq2seq",
              "SynthesizerEncoderModel": "classifier", "SynthesizerForSequenceClassification": "classifier"}


def _saved_config(path, kwargs: dict) -> PreTrainedConfig | None:
    """The config ``from_pretrained`` will use: the one passed, or a local folder's config.json (None otherwise)."""
    config = kwargs.get("config")
    if isinstance(config, PreTrainedConfig):
        return config
    try:
        return SynthesizerConfig.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError):
        return None  # not a local folder: from_pretrained says what is wrong


def _saved_architecture(path, kwargs: dict) -> str | None:
    """The synthesizer class named first in the config's ``architectures`` (see ``_saved_config``), or None."""
    config = _saved_config(path, kwargs)
    return next((a for a in (getattr(config, "architectures", None) or []) if a in _FAMILY_OF), None)


class CheckpointedEncoderBlock(GradientCheckpointingLayer, EncoderBlock):
    """An ``EncoderBlock`` that HF's activation checkpointing can recompute (same weights and forward)."""


class CheckpointedDecoderBlock(GradientCheckpointingLayer, DecoderBlock):
    """A ``DecoderBlock`` that HF's activation checkpointing can recompute (same weights and forward)."""


def _checkpointable(model: nn.Module) -> nn.Module:
    """Turn every block of the project ``model`` into its checkpointable class, in place: with activation
    checkpointing on, training keeps each block's input only and recomputes the rest in the backward pass."""
    for module in model.modules():
        for plain, checkpointed in ((EncoderBlock, CheckpointedEncoderBlock), (DecoderBlock, CheckpointedDecoderBlock)):
            if type(module) is plain:
                module.__class__ = checkpointed
    return model


def _table_scales(model: nn.Module) -> dict[int, float]:
    """id of every table of the ``Embeddings`` in ``model`` -> the std the project draws it with
    (``Embeddings.reset_parameters``: tokens N(0, 1/d), learned positions and segments N(0, 0.02))."""
    scales = {}
    for m in model.modules():
        if isinstance(m, Embeddings):
            scales[id(m.token.weight)] = 1.0 / m.token_scale
            scales.update({id(table.weight): 0.02 for table in (m.position, m.segment) if table is not None})
    return scales


def _untie(model: nn.Module) -> None:
    """Give every parameter that the project model shares under a second name (a head or target table
    tied to the token embeddings) its own copy. HF's loader must see them apart, as in its own models
    until ``tie_weights``: shared from the start, a table missing from a checkpoint is neither reported
    missing nor initialised."""
    seen: set[int] = set()
    for module in model.modules():
        for name, param in list(module.named_parameters(recurse=False)):
            if id(param) in seen:
                setattr(module, name, nn.Parameter(param.detach().clone(), requires_grad=param.requires_grad))
            seen.add(id(param))


# ---------------------------------------------------------------------- base class
class SynthesizerPreTrainedModel(PreTrainedModel):
    """Weight initialisation as the project's constructors do it, for ``from_pretrained``: it builds
    the model without initialising, loads the checkpoint and initialises only what is left (missing
    weights, and the non-persistent sinusoid table, which no checkpoint holds).

    Every forward takes ``output_hidden_states`` and ``output_attentions`` (see ``models.record``: the
    embeddings, each block's output and the final normed states; each block's softmax attention map,
    which every Synthesizer kind has and a baseline without one refuses) and ``return_dict=False`` (a
    tuple of the output's fields that are set)."""

    config_class = SynthesizerConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _no_split_modules = ["EncoderBlock", "DecoderBlock", "CheckpointedEncoderBlock", "CheckpointedDecoderBlock"]

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """As ``PreTrainedModel.from_pretrained``; a ValueError for a folder of another model family (its
        ``architectures``), naming the Auto class that loads it; a CheckpointError for weights that another
        revision of synthesizer saved (``config.weights_revision``): they would load and give other outputs."""
        saved = _saved_architecture(pretrained_model_name_or_path, kwargs)
        if saved and _FAMILY_OF[saved] != _FAMILY_OF.get(cls.__name__, _FAMILY_OF[saved]):
            raise InputError(f"{pretrained_model_name_or_path} holds a {saved}, which {cls.__name__} cannot load "
                             f"(another model family); load it with {_AUTO_OF[saved]} or {saved}")
        loaded = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded  # (model, loading info) when asked for
        if model.config.weights_revision != WEIGHTS_REVISION:
            raise revision_error(pretrained_model_name_or_path, model.config.weights_revision)
        return loaded

    def save_pretrained(self, *args, **kwargs):
        # whatever these weights are, this revision's code reads them (another's are refused on loading)
        self.config.weights_revision = WEIGHTS_REVISION
        return super().save_pretrained(*args, **kwargs)

    def post_init(self) -> None:
        _checkpointable(self.model)
        _untie(self.model)  # HF ties them again (``_tied_weights_keys``), as it does its own models' tables
        super().post_init()

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
        # the tables of Embeddings (and a head tied to the token table) take the project's scales
        scales = _table_scales(self)
        tables = [t for t in own if id(t) in scales]
        for table in tables:
            if _fresh(table):
                nn.init.normal_(table, std=scales[id(table)])
        if not tables:
            module.reset_parameters()

    def resize_token_embeddings(self, *args, **kwargs) -> nn.Embedding:
        """As ``PreTrainedModel.resize_token_embeddings``; the wrapped model's config follows the new size."""
        embeddings = super().resize_token_embeddings(*args, **kwargs)
        self.model.config.vocab_size = self.config.vocab_size
        return embeddings

    def new_cache(self) -> SynthesizerCache:
        """An empty decoding cache: V only per layer for a pure synthesizer, K and V with vanilla."""
        return SynthesizerCache(self.model.new_caches())

    def _prepare_cache_for_generation(self, generation_config, model_kwargs: dict, *args, **kwargs) -> None:
        """``generate`` decodes with the project's caches instead of HF's key-value ``DynamicCache``."""
        if model_kwargs.get("cache") is not None or generation_config.use_cache is False:
            return
        model_kwargs["cache"] = self.new_cache()

    def _cache_states(self, cache: Cache | None, use_cache: bool | None) -> tuple[Cache | None, list | None]:
        if self.is_activation_checkpointing and self.training and torch.is_grad_enabled():
            if cache is not None or use_cache:  # a recomputed block would append to the cache twice
                warnings.warn("activation checkpointing recomputes each block: decoding without a cache", stacklevel=3)
            return None, None
        if cache is None and use_cache:
            cache = self.new_cache()
        if cache is not None and not isinstance(cache, SynthesizerCache):
            raise InputError(f"a synthesizer model decodes with a SynthesizerCache (model.new_cache()), got "
                             f"{type(cache).__name__}")
        return cache, None if cache is None else cache.states

    def _outputs(self, output_attentions: bool | None, output_hidden_states: bool | None,
                 return_dict: bool | None) -> tuple[bool, bool, bool]:
        """The three output options, each from the call or else from the config."""
        config = self.config
        return (config.output_attentions if output_attentions is None else output_attentions,
                config.output_hidden_states if output_hidden_states is None else output_hidden_states,
                config.return_dict if return_dict is None else return_dict)


# ---------------------------------------------------------------------- decoder-only
class SynthesizerModel(SynthesizerPreTrainedModel):
    """The bare causal stack (``AutoModel``): input_ids (B, n) -> final hidden states (B, n, d),
    after the last LayerNorm. Same weights (``model.*``) as ``SynthesizerForCausalLM``."""

    _tied_weights_keys = {"model.head.weight": "model.embed.token.weight"}

    def __init__(self, config: SynthesizerConfig):
        super().__init__(config)
        self.model = LanguageModel(config.to_model_config())
        self.post_init()

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """As ``SynthesizerPreTrainedModel.from_pretrained``; a classifier's folder gives its bare encoder,
        a ``SynthesizerEncoderModel`` (``AutoModel`` gives the base model of any head's checkpoint)."""
        if cls is SynthesizerModel and _saved_architecture(pretrained_model_name_or_path, kwargs) in (
                "SynthesizerForSequenceClassification", "SynthesizerEncoderModel"):
            return SynthesizerEncoderModel.from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed.token

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.embed.token = value

    @deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")  # its former name in HF
    def forward(self, input_ids: Tensor | None = None, attention_mask: Tensor | None = None, cache: Cache | None = None,
                use_cache: bool | None = None, inputs_embeds: Tensor | None = None,
                output_attentions: bool | None = None, output_hidden_states: bool | None = None,
                return_dict: bool | None = None, *, position_ids: Tensor | None = None,
                **kwargs) -> BaseModelOutputWithPast | tuple:
        """``inputs_embeds`` (B, n, d): rows of the token embeddings instead of ``input_ids``;
        ``position_ids`` (B, n), or a left-padded ``attention_mask``: each row's own positions."""
        attentions, hidden, return_dict = self._outputs(output_attentions, output_hidden_states, return_dict)
        n = _one_input(input_ids, inputs_embeds)
        cache, states = self._cache_states(cache, use_cache)
        positions = token_positions(attention_mask, position_ids, n, states[0].length if states else 0)
        with record(self.model, hidden, attentions) as seen:
            last = self.model.hidden_states(input_ids, padding_mask(attention_mask, n, positions), states,
                                            positions=positions, inputs_embeds=inputs_embeds)
        output = BaseModelOutputWithPast(last_hidden_state=last, cache=cache,
                                         hidden_states=_states(seen.hidden_states, "blocks"),
                                         attentions=_states(seen.attentions, "blocks"))
        return _returned(output, return_dict)


class SynthesizerEncoderModel(SynthesizerPreTrainedModel):
    """The classifier's bare encoder (what ``AutoModel`` loads from a classifier's folder): input_ids
    (B, n) (pairs: ``token_type_ids``) -> final hidden states (B, n, d), after the last LayerNorm, before
    pooling. Same weights (``model.*``) as ``SynthesizerForSequenceClassification`` but its head."""

    _keys_to_ignore_on_load_unexpected = [r"^model\.head\."]

    def __init__(self, config: SynthesizerConfig):
        super().__init__(config)
        self.model = Classifier(config.to_model_config())
        self.model.head = None  # the bare encoder: no classification head
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed.token

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.embed.token = value

    def forward(self, input_ids: Tensor | None = None, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, inputs_embeds: Tensor | None = None,
                output_attentions: bool | None = None, output_hidden_states: bool | None = None,
                return_dict: bool | None = None, **kwargs) -> BaseModelOutput | tuple:
        """``inputs_embeds`` (B, n, d): rows of the token embeddings instead of ``input_ids``."""
        attentions, hidden, return_dict = self._outputs(output_attentions, output_hidden_states, return_dict)
        n = _one_input(input_ids, inputs_embeds)
        with record(self.model, hidden, attentions) as seen:
            last, _ = self.model.encode(input_ids, padding_mask(attention_mask, n), token_type_ids,
                                        inputs_embeds=inputs_embeds)
        output = BaseModelOutput(last_hidden_state=last, hidden_states=_states(seen.hidden_states, "blocks"),
                                 attentions=_states(seen.attentions, "blocks"))
        return _returned(output, return_dict)


class SynthesizerForCausalLM(SynthesizerPreTrainedModel, GenerationMixin):
    """Decoder-only LM: input_ids (B, n) -> logits (B, n, vocab); ``labels`` (B, n) give the
    next-token loss (shifted inside, ``-100`` ignored) as HF causal LMs do, ``shift_labels`` (B, n)
    the targets already shifted (what sequence parallelism passes: each shard's next tokens)."""

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

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.model.head = value

    def generate(self, inputs: Tensor | None = None, generation_config=None, **kwargs):
        """``GenerationMixin.generate`` after :func:`check_generation`: a request it cannot finish is
        refused before the first token is decoded."""
        check_generation(self, inputs, generation_config, kwargs)
        return super().generate(inputs, generation_config, **kwargs)

    @deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")  # its former name in HF
    def forward(self, input_ids: Tensor | None = None, attention_mask: Tensor | None = None,
                labels: Tensor | None = None, cache: Cache | None = None, use_cache: bool | None = None, *,
                inputs_embeds: Tensor | None = None, output_attentions: bool | None = None,
                output_hidden_states: bool | None = None, return_dict: bool | None = None,
                num_items_in_batch: Tensor | int | None = None, shift_labels: Tensor | None = None,
                position_ids: Tensor | None = None, **kwargs) -> CausalLMOutputWithPast | tuple:
        """``position_ids`` (B, n), or a left-padded ``attention_mask``: each row's own positions (a batch
        of prompts of different lengths, left-padded, generates what each prompt generates alone); without
        them, positions count on from what the cache holds. ``inputs_embeds`` (B, n, d): rows of the
        token embeddings instead of ``input_ids``."""
        attentions, hidden, return_dict = self._outputs(output_attentions, output_hidden_states, return_dict)
        n = _one_input(input_ids, inputs_embeds)
        cache, states = self._cache_states(cache, use_cache)
        positions = token_positions(attention_mask, position_ids, n, states[0].length if states else 0)
        with record(self.model, hidden, attentions) as seen:
            logits = self.model(input_ids, padding_mask(attention_mask, n, positions), states, positions=positions,
                                inputs_embeds=inputs_embeds)
        loss = None
        if shift_labels is not None:
            loss = token_loss(logits, shift_labels, num_items_in_batch)
        elif labels is not None:
            loss = token_loss(logits[:, :-1], labels[:, 1:], num_items_in_batch)
        output = CausalLMOutputWithPast(loss=loss, logits=logits, cache=cache,
                                        hidden_states=_states(seen.hidden_states, "blocks"),
                                        attentions=_states(seen.attentions, "blocks"))
        return _returned(output, return_dict)


# ---------------------------------------------------------------------- encoder-decoder
class _Encoder:
    """What ``generate`` runs once on the source (``get_encoder()``): the EncoderDecoder's encoder.
    A plain object, so the encoder's weights stay registered once, under ``model.``."""

    main_input_name = "input_ids"

    def __init__(self, owner: "SynthesizerForSeq2SeqLM"):
        self._owner = owner

    def forward(self, input_ids: Tensor | None = None, attention_mask: Tensor | None = None,
                inputs_embeds: Tensor | None = None, output_attentions: bool | None = None,
                output_hidden_states: bool | None = None, return_dict: bool | None = None,
                **kwargs) -> BaseModelOutput | tuple:
        owner = self._owner
        attentions, hidden, return_dict = owner._outputs(output_attentions, output_hidden_states, return_dict)
        n = _one_input(input_ids, inputs_embeds)
        positions = token_positions(attention_mask, kwargs.get("position_ids"), n, 0)  # a left-padded source
        with record(owner.model, hidden, attentions) as seen:
            memory = owner.model.encode(input_ids, padding_mask(attention_mask, n, positions), positions=positions,
                                        inputs_embeds=inputs_embeds)
        output = BaseModelOutput(last_hidden_state=memory, hidden_states=_states(seen.hidden_states, "encoder"),
                                 attentions=_states(seen.attentions, "encoder"))
        return _returned(output, return_dict)

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

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        """The source table, and the target one too where they are one table (``tie_word_embeddings``)."""
        if self.model.tgt_embed.token is self.model.src_embed.token or self.config.tie_word_embeddings:
            self.model.tgt_embed.token = value
        self.model.src_embed.token = value

    def get_output_embeddings(self) -> nn.Linear:
        return self.model.head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.model.head = value

    def resize_token_embeddings(self, new_num_tokens: int | None = None, *args, **kwargs) -> nn.Embedding:
        """As ``PreTrainedModel.resize_token_embeddings``; untied, the decoder's own table is resized too."""
        embeddings = super().resize_token_embeddings(new_num_tokens, *args, **kwargs)
        target = self.model.tgt_embed.token
        if target.num_embeddings != embeddings.num_embeddings:
            self.model.tgt_embed.token = self._get_resized_embeddings(target, embeddings.num_embeddings)
        return embeddings

    def get_encoder(self, modality: str | None = None) -> _Encoder:
        return _Encoder(self)

    def generate(self, inputs: Tensor | None = None, generation_config=None, **kwargs):
        """``GenerationMixin.generate`` after :func:`check_generation`: a request it cannot finish is
        refused before the first token is decoded."""
        check_generation(self, inputs, generation_config, kwargs)
        return super().generate(inputs, generation_config, **kwargs)

    def shift_right(self, labels: Tensor) -> Tensor:
        """labels (B, t) -> decoder inputs (B, t): start token, then labels[:, :-1] (-100 as padding)."""
        start, pad = self.config.decoder_start_token_id, self.config.pad_token_id
        if start is None or pad is None:
            raise InputError("shifting labels into decoder inputs needs decoder_start_token_id and pad_token_id in "
                             "the config; set them, or give decoder_input_ids")
        shifted = labels.new_full(labels.shape, start)
        shifted[:, 1:] = labels[:, :-1]
        return shifted.masked_fill(shifted == IGNORE_INDEX, pad)

    @deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")  # its former name in HF
    def forward(self, input_ids: Tensor | None = None, attention_mask: Tensor | None = None,
                decoder_input_ids: Tensor | None = None, decoder_attention_mask: Tensor | None = None,
                *, encoder_outputs=None, labels: Tensor | None = None, cache: Cache | None = None,
                use_cache: bool | None = None, inputs_embeds: Tensor | None = None,
                decoder_inputs_embeds: Tensor | None = None, output_attentions: bool | None = None,
                output_hidden_states: bool | None = None, return_dict: bool | None = None,
                num_items_in_batch: Tensor | int | None = None, **kwargs) -> Seq2SeqLMOutput | tuple:
        """``inputs_embeds`` (B, s, d) / ``decoder_inputs_embeds`` (B, t, d): rows of the token
        embeddings instead of ``input_ids`` / ``decoder_input_ids``."""
        attentions, hidden, return_dict = self._outputs(output_attentions, output_hidden_states, return_dict)
        if encoder_outputs is None:
            if input_ids is None and inputs_embeds is None:
                raise InputError("give input_ids (the source), inputs_embeds or encoder_outputs")
            encoder_outputs = self.get_encoder()(input_ids, attention_mask, inputs_embeds=inputs_embeds,
                                                 output_attentions=attentions, output_hidden_states=hidden,
                                                 return_dict=True)
        elif not isinstance(encoder_outputs, BaseModelOutput):  # a tuple: (memory, hidden states, attentions)
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        memory = encoder_outputs[0]
        source = attention_mask if attention_mask is None else attention_mask[:, : memory.shape[1]]  # truncated?
        # a left-padded source was encoded at its own positions; its padding is only a key mask here
        src_pad = padding_mask(source, memory.shape[1], token_positions(source, None, memory.shape[1], 0))
        if decoder_input_ids is None and decoder_inputs_embeds is None:
            if labels is None:
                raise InputError("give decoder_input_ids, decoder_inputs_embeds or labels (shifted right into "
                                 "decoder inputs)")
            decoder_input_ids = self.shift_right(labels)
        t = _one_input(decoder_input_ids, decoder_inputs_embeds, "decoder_input_ids")
        cache, states = self._cache_states(cache, use_cache)
        tgt_pad = padding_mask(decoder_attention_mask, t)
        with record(self.model, hidden, attentions) as seen:
            logits = self.model.decode(decoder_input_ids, memory, src_pad, tgt_pad, states,
                                       inputs_embeds=decoder_inputs_embeds)
        loss = None if labels is None else token_loss(logits, labels, num_items_in_batch)
        output = Seq2SeqLMOutput(loss=loss, logits=logits, cache=cache,
                                 decoder_hidden_states=_states(seen.hidden_states, "decoder"),
                                 decoder_attentions=_states(seen.attentions, "decoder"),
                                 cross_attentions=_states(seen.attentions, "cross"),
                                 encoder_last_hidden_state=memory,
                                 encoder_hidden_states=encoder_outputs.hidden_states,
                                 encoder_attentions=encoder_outputs.attentions)
        return _returned(output, return_dict)


# ---------------------------------------------------------------------- classification
PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")


class SynthesizerForSequenceClassification(SynthesizerPreTrainedModel):
    """Encoder classifier: input_ids (B, n) (pairs: ``token_type_ids`` 0/1) -> logits (B, num_labels);
    ``num_labels=1`` regresses, logits (B, 1). The loss of ``labels`` follows ``config.problem_type``
    as HF's classifiers do: ``"regression"`` (MSE; targets (B,) or (B, num_labels)),
    ``"single_label_classification"`` (cross-entropy; class ids (B,)), ``"multi_label_classification"``
    (binary cross-entropy with logits; 0/1 targets (B, num_labels)); unset, it is read from
    ``num_labels`` and the labels' dtype (integer class ids: single label, floats: multi-label)."""

    def __init__(self, config: SynthesizerConfig):
        super().__init__(config)
        self.model = Classifier(config.to_model_config())
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed.token

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.embed.token = value

    def problem_type(self, labels: Tensor) -> str:
        """``config.problem_type``, or the one ``num_labels`` and the labels' dtype imply."""
        problem = self.config.problem_type
        if problem is None:
            if self.config.num_labels == 1:
                problem = "regression"
            elif labels.dtype in (torch.long, torch.int):
                problem = "single_label_classification"
            else:
                problem = "multi_label_classification"
        if problem not in PROBLEM_TYPES:
            raise InputError(f"problem_type={problem!r} is not allowed; allowed values: {', '.join(PROBLEM_TYPES)}")
        return problem

    def forward(self, input_ids: Tensor | None = None, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, labels: Tensor | None = None,
                inputs_embeds: Tensor | None = None, output_attentions: bool | None = None,
                output_hidden_states: bool | None = None, return_dict: bool | None = None,
                **kwargs) -> SequenceClassifierOutput | tuple:
        """``inputs_embeds`` (B, n, d): rows of the token embeddings instead of ``input_ids``."""
        attentions, hidden, return_dict = self._outputs(output_attentions, output_hidden_states, return_dict)
        n = _one_input(input_ids, inputs_embeds)
        with record(self.model, hidden, attentions) as seen:
            out = self.model(input_ids, padding_mask(attention_mask, n), token_type_ids, inputs_embeds=inputs_embeds)
        logits = out.unsqueeze(-1) if out.dim() == 1 else out  # a regressor's scores (B,) as (B, 1)
        loss = None
        if labels is not None:
            labels = labels.to(logits.device)
            problem = self.problem_type(labels)
            if problem == "regression":
                scores = logits.squeeze(-1) if self.config.num_labels == 1 else logits
                loss = F.mse_loss(scores.float(), labels.float().reshape(scores.shape))
            elif problem == "single_label_classification":
                loss = F.cross_entropy(logits.float().reshape(-1, self.config.num_labels), labels.long().reshape(-1),
                                       ignore_index=IGNORE_INDEX)
            else:
                loss = F.binary_cross_entropy_with_logits(logits.float(), labels.float())
        output = SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=_states(seen.hidden_states, "blocks"),
                                          attentions=_states(seen.attentions, "blocks"))
        return _returned(output, return_dict)


__all__ = ["CheckpointedDecoderBlock", "CheckpointedEncoderBlock", "SynthesizerCache", "SynthesizerCacheLayer",
           "SynthesizerEncoderModel", "SynthesizerForCausalLM", "SynthesizerForSeq2SeqLM",
           "SynthesizerForSequenceClassification",
           "SynthesizerModel", "SynthesizerPreTrainedModel"]
