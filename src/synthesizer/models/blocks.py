"""Transformer pieces shared by the models: embeddings with positions, FFN, pre-LN blocks, and the
bookkeeping every model needs (length checks, parameter counts per component)."""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..attention.cache import DecodingState
from ..attention.cross import CrossAttention, CrossAttentionCache, Packed
from ..attention.factory import build_mixer
from ..attention.masks import continued_positions
from ..attention.kinds import Kind
from ..attention.positions import BIAS_SCHEMES, LAYER_SCHEMES, position_bias
from ..errors import InputError
from .config import ModelConfig


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """(max_len, d_model): sin on even features, cos on odd ones (Vaswani et al.)."""
    pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)[:, : d_model // 2]
    return table


class Embeddings(nn.Module):
    """Tokens + absolute positions (+ segments), then dropout: ids (B, t) -> (B, t, d). Absolute
    positions are added with ``positions`` "learned" or "sinusoidal" only: the other schemes put
    positions into the attention (``attention/positions.py``), or nowhere ("none").

    ``start`` is the absolute position of the first id (incremental decoding).

    Token embeddings are drawn from N(0, 1/d) and multiplied by sqrt(d) (Vaswani et al., 2017, 3.4), so a
    token's identity enters the residual stream at unit scale, above what a block adds at init, while the
    tied output head sees weights of scale 1/sqrt(d) (logits of order 1). Why it matters: with the common
    N(0, 0.02) tokens and no scale, the first block's output drowns the token identities and a 2-layer
    vanilla model never learned associative recall; with this scale it did by about step 2000
    (docs/changes.md; the scales are tested in tests/models/test_blocks.py). Learned positions and
    segments keep N(0, 0.02).
    """

    def __init__(self, config: ModelConfig, segments: bool = False):
        super().__init__()
        self.token = nn.Embedding(config.vocab_size, config.d_model)
        self.token_scale = math.sqrt(config.d_model)
        self.position = nn.Embedding(config.max_len, config.d_model) if config.positions == "learned" else None
        table = sinusoidal_table(config.max_len, config.d_model) if config.positions == "sinusoidal" else None
        self.register_buffer("sinusoid", table, persistent=False)  # None without sinusoidal positions
        self.segment = nn.Embedding(config.n_segments, config.d_model) if segments else None
        self.drop = nn.Dropout(config.dropout)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        nn.init.normal_(self.token.weight, std=1.0 / self.token_scale)
        for table in (self.position, self.segment):
            if table is not None:
                nn.init.normal_(table.weight, std=0.02)
        self.reset_sinusoid()

    @torch.no_grad()
    def reset_sinusoid(self) -> None:
        """Recompute the sinusoid table (a buffer left out of the state_dict), where there is one."""
        if self.sinusoid is not None:
            self.sinusoid.copy_(sinusoidal_table(*self.sinusoid.shape).to(self.sinusoid.device, self.sinusoid.dtype))

    def forward(self, ids: Tensor | None, start: int = 0, segment_ids: Tensor | None = None, *,
                positions: Tensor | None = None, token_embeds: Tensor | None = None) -> Tensor:
        """``positions`` (B, t): each token's own position (left padding, packed documents), instead of
        start..start+t-1. ``token_embeds`` (B, t, d): rows of the token table given instead of ``ids``
        (HF's ``inputs_embeds``); they are scaled and get positions as looked-up ones do."""
        tokens = self.token(ids) if token_embeds is None else token_embeds
        x = tokens * self.token_scale
        if self.position is not None or self.sinusoid is not None:
            pos = positions if positions is not None else torch.arange(start, start + tokens.shape[1], device=tokens.device)
            x = x + (self.position(pos) if self.position is not None else self.sinusoid[pos])
        if segment_ids is not None:
            if self.segment is None:
                raise InputError("segment_ids given to a model built without segment embeddings")
            if segment_ids.shape != tokens.shape[:2]:
                raise InputError(f"segment_ids must have the shape of input_ids {tuple(tokens.shape[:2])}, got {tuple(segment_ids.shape)}")
            x = x + self.segment(segment_ids)
        return self.drop(x)


class FeedForward(nn.Module):
    """(B, t, d) -> (B, t, d): Linear, GELU, Linear, dropout."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc = nn.Linear(config.d_model, config.ffn_size)
        self.proj = nn.Linear(config.ffn_size, config.d_model)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(self.proj(F.gelu(self.fc(x))))


def attention_positions(config: ModelConfig, kind: Kind | str) -> str:
    """The scheme a self-attention layer of ``kind`` applies (``positions`` rope, relative or alibi, on a
    kind with a dot-product component), or "none": absolute embeddings are the embeddings' job, and a
    synthesizer component or a baseline keeps its own definition. With a kind per layer, exactly the
    layers with a dot-product component apply it."""
    uses = isinstance(kind, Kind) and "vanilla" in kind
    return config.positions if uses and config.positions in LAYER_SCHEMES else "none"


def self_attention(config: ModelConfig, kind: Kind | str, causal: bool) -> nn.Module:
    return build_mixer(kind, config.d_model, config.n_heads, config.max_len, causal=causal,
                       dropout=config.dropout, positions=attention_positions(config, kind), **config.attention_options)


def stack_position_bias(config: ModelConfig, kinds: Iterable[Kind | str], causal: bool) -> nn.Module | None:
    """The position bias a stack of layers of ``kinds`` shares (relative, alibi; ``attention/positions.py``),
    or None where no layer applies one: computed once per forward pass and handed to the layers that do."""
    uses = any(attention_positions(config, kind) in BIAS_SCHEMES for kind in kinds)
    return position_bias(config.positions, config.n_heads, causal, config.d_model) if uses else None


def bias_for(module: nn.Module | None, start: int, n: int, positions: Tensor | None = None,
             cached: Tensor | None = None) -> Tensor | None:
    """A stack's position bias (or None without one): rows start..start+n-1 against keys 0..start+n-1
    (H, n, start + n); with per-token ``positions`` (B, n), those rows against the ``cached`` positions
    (B, start) then theirs (B, H, n, start + n)."""
    if module is None:
        return None
    if positions is None:
        return module(start, n, start + n)
    keys = positions if cached is None else torch.cat([cached, positions], dim=1)
    return module(positions, keys)


def cached_positions(caches: list | None) -> Tensor | None:
    """The positions a stack's decoding caches hold (B, start), where its layers were given per-token
    positions; None where they count 0..start-1."""
    return getattr(caches[0], "positions", None) if caches else None


def token_positions(positions: Tensor | None, caches: list | None, t: int) -> Tensor | None:
    """The positions of t new tokens: as given, or on from each row's last cached one where the caches
    keep per-token positions, or None (start..start+t-1)."""
    cached = cached_positions(caches)
    if positions is None and cached is not None:
        return continued_positions(cached, t)
    return positions


def takes_positions(mixer: nn.Module, name: str = "positions") -> bool:
    """Whether a token mixer's forward takes per-token ``positions`` (the synthesizer layer and ``none``), or
    the ``documents`` of packed rows (the same two)."""
    return name in inspect.signature(mixer.forward).parameters


def set_packed(model: nn.Module, packed: bool = True) -> None:
    """Mark every self-attention layer of ``model`` as fed packed rows (or not): their ``path`` then names
    the kernel a packed forward pass runs (``attention/dispatch.py``, ``PER_TOKEN``). ValueError naming a
    baseline that cannot take packed rows (a convolution would mix the documents at their boundaries,
    Linformer's projection mixes every position)."""
    for name, module in model.named_modules():
        if isinstance(module, (EncoderBlock, DecoderBlock)):
            if packed and not takes_positions(module.attn, "documents"):
                raise InputError(f"{name}: the {module.kind!r} mixer cannot take packed rows (it would mix tokens "
                                 "across documents); train it without batch.pack")
            if hasattr(module.attn, "packed"):
                module.attn.packed = packed


class EncoderBlock(nn.Module):
    """Pre-LN block: ``x + attn(LN(x))``, then ``x + ffn(LN(x))``. Bidirectional in encoders and the
    classifier; the language model uses it with ``causal=True`` (and then a cache may be passed).
    ``kind``: its self-attention's (default: the config's one kind). The stack's position bias reaches
    its attention only where the layer applies one."""

    def __init__(self, config: ModelConfig, causal: bool = False, kind: Kind | str | None = None):
        super().__init__()
        kind = config.kind if kind is None else kind
        self.kind, self.takes_bias = str(kind), attention_positions(config, kind) in BIAS_SCHEMES
        self.ln_attn = nn.LayerNorm(config.d_model)
        self.attn = self_attention(config, kind, causal)
        self.ln_ffn = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: Tensor, padding_mask: Tensor | None = None, cache=None,
                position_bias: Tensor | None = None, positions: Tensor | None = None,
                documents: Tensor | None = None) -> Tensor:
        """``positions`` (B, t): each token's own; ``documents`` (B, t): packed rows' document ids."""
        extra = per_token_inputs(self.attn, position_bias if self.takes_bias else None, positions, documents)
        x = x + self.drop(self.attn(self.ln_attn(x), key_padding_mask=padding_mask, cache=cache, **extra))
        return x + self.ffn(self.ln_ffn(x))


def per_token_inputs(mixer: nn.Module, position_bias: Tensor | None, positions: Tensor | None,
                     documents: Tensor | None) -> dict:
    """The keyword arguments a block hands its self-attention: the position bias where it applies one, and
    per-token positions and documents where given; InputError where the mixer takes none (a convolution or
    Linformer: left padding or packed documents are not for them)."""
    extra = {} if position_bias is None else {"position_bias": position_bias}
    for name, value in (("positions", positions), ("documents", documents)):
        if value is None:
            continue
        if not takes_positions(mixer, name):
            raise InputError(f"the {type(mixer).__name__} mixer takes no per-token {name} (left padding, packed "
                             "documents): give its inputs right-padded, one sequence per row")
        extra[name] = value
    return extra


class DecoderLayerCache(DecodingState):
    """One decoder layer's decoding state: its self-attention cache and the projected memory."""

    def __init__(self, self_attn, cross: CrossAttentionCache):
        self.self_attn, self.cross = self_attn, cross

    @property
    def length(self) -> int:
        return self.self_attn.length

    @property
    def nbytes(self) -> int:
        return self.self_attn.nbytes + self.cross.nbytes

    def reorder(self, index: Tensor) -> None:
        self.self_attn.reorder(index)
        self.cross.reorder(index)

    def crop(self, length: int) -> None:
        """Keep the first ``length`` target positions (the projected memory stays)."""
        self.self_attn.crop(length)


class DecoderBlock(nn.Module):
    """Pre-LN decoder block: causal self-attention (of ``kind``, default the config's one kind),
    cross-attention to the memory, FFN."""

    def __init__(self, config: ModelConfig, kind: Kind | str | None = None):
        super().__init__()
        kind = config.kind if kind is None else kind
        self.kind, self.takes_bias = str(kind), attention_positions(config, kind) in BIAS_SCHEMES
        self.ln_attn = nn.LayerNorm(config.d_model)
        self.attn = self_attention(config, kind, causal=True)
        self.ln_cross = nn.LayerNorm(config.d_model)
        self.cross = CrossAttention(config.d_model, config.n_heads, config.max_len, config.cross_attention, config.dropout)
        self.ln_ffn = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config)
        self.drop = nn.Dropout(config.dropout)

    def new_cache(self) -> DecoderLayerCache:
        return DecoderLayerCache(self.attn.new_cache(), CrossAttentionCache())

    def forward(self, x: Tensor, memory: Tensor | None, memory_padding_mask: Tensor | None = None,
                padding_mask: Tensor | None = None, cache: DecoderLayerCache | None = None, start: int = 0,
                position_bias: Tensor | None = None, packed: "Packed | None" = None) -> Tensor:
        """x (B, t, d) target states at positions start..start+t-1; memory (B, s, d). ``packed``: the
        positions and documents of packed target and source rows."""
        tgt = (None, None) if packed is None else (packed.positions, packed.documents)
        extra = per_token_inputs(self.attn, position_bias if self.takes_bias else None, *tgt)
        x = x + self.drop(self.attn(self.ln_attn(x), key_padding_mask=padding_mask,
                                    cache=None if cache is None else cache.self_attn, **extra))
        x = x + self.drop(self.cross(self.ln_cross(x), memory, memory_padding_mask,
                                     cache=None if cache is None else cache.cross, start=start, packed=packed))
        return x + self.ffn(self.ln_ffn(x))


# ---------------------------------------------------------------------- shared model bookkeeping
def fit_length(config: ModelConfig, ids: Tensor, *others: Tensor | None, start: int = 0, what: str = "input") -> tuple:
    """Check ``start + ids.shape[1] <= max_len``: raise ValueError, or cut ``ids`` and ``others`` to
    fit with a warning when ``config.on_too_long == "truncate"``."""
    if ids.dim() != 2:
        raise InputError(f"{what} ids must have shape (batch, seq), got {tuple(ids.shape)}")
    n = start + ids.shape[1]
    if n <= config.max_len:
        return (ids, *others)
    if config.on_too_long != "truncate" or start >= config.max_len:
        raise InputError(f"{what} length {n} exceeds max_len={config.max_len}; shorten it, build the model with a "
                         f"larger max_len, or set on_too_long='truncate'")
    keep = config.max_len - start
    warnings.warn(f"{what} length {n} exceeds max_len={config.max_len}: keeping the first {config.max_len} positions",
                  stacklevel=3)
    return (ids[:, :keep], *(None if t is None else t[:, :keep] for t in others))


def count_params(model: nn.Module, groups: dict[str, Iterable[nn.Module]], mixers: Iterable[nn.Module]) -> dict[str, int]:
    """Parameters per component; each parameter is counted once (tied weights go to the first group).

    ``mixers``' own ``param_counts()`` (per Synthesizer component, summed over layers) become
    ``attention.<component>``; anything they leave out is ``attention.other``.
    """
    seen: set[int] = set()

    def take(modules: Iterable[nn.Module]) -> int:
        total = 0
        for m in modules:
            for p in m.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    total += p.numel()
        return total

    counts: dict[str, int] = {}
    groups = dict(groups)
    counts["embeddings"] = take(groups.pop("embeddings", []))
    for mixer in mixers:
        own = mixer.param_counts() if hasattr(mixer, "param_counts") else {}
        for name, value in own.items():
            counts[f"attention.{name}"] = counts.get(f"attention.{name}", 0) + value
        other = take([mixer]) - sum(own.values())
        if other:
            counts["attention.other"] = counts.get("attention.other", 0) + other
    for name, modules in groups.items():
        counts[name] = take(modules)
    rest = sum(p.numel() for p in model.parameters() if id(p) not in seen)
    if rest:
        counts["other"] = rest
    return counts


def stack_param_counts(model: nn.Module) -> dict[str, int]:
    """``count_params`` for a model made of ``embed``, ``blocks`` (each with ``attn``, ``ffn``,
    ``ln_attn``, ``ln_ffn``), ``ln_f`` and ``head``: the language model and the classifier."""
    norms = [m for b in model.blocks for m in (b.ln_attn, b.ln_ffn)] + [model.ln_f]
    groups = {"embeddings": [model.embed], "ffn": [b.ffn for b in model.blocks], "norms": norms, "head": [model.head]}
    if model.position_bias is not None:
        groups["position_bias"] = [model.position_bias]
    return count_params(model, groups, [b.attn for b in model.blocks])


def layer_param_counts(stacks: dict[str, Iterable[nn.Module]]) -> list[dict]:
    """Per self-attention layer, stack by stack (``stacks``: {name of the blocks' list: its blocks}):
    ``{"layer": "blocks.2", "kind": "vanilla", "params": its attention's parameters, "path": the
    kernel its synthesizer layer runs (``SynthesizerAttention.path``), None for a baseline}``."""
    return [{"layer": f"{stack}.{i}", "kind": block.kind, "params": sum(p.numel() for p in block.attn.parameters()),
             "path": getattr(block.attn, "path", None)}
            for stack, blocks in stacks.items() for i, block in enumerate(blocks)]


def format_param_counts(counts: dict[str, int], layers: list[dict] | None = None) -> str:
    """A plain-text table: component, parameters, share of the total; then, given ``layers``
    (:func:`layer_param_counts`), one line per attention layer: its kind and parameters."""
    total = sum(counts.values())
    width = max(len(k) for k in [*counts, "total"])
    lines = [f"{'component':<{width}}  {'params':>12}  {'share':>6}"]
    for name, value in counts.items():
        lines.append(f"{name:<{width}}  {value:>12,}  {100 * value / max(total, 1):>5.1f}%")
    lines.append(f"{'total':<{width}}  {total:>12,}  100.0%")
    if layers:
        width = max(len(layer["layer"]) for layer in layers)
        lines += ["", f"{'attention':<{width}}  {'params':>12}  kind"]
        lines += [f"{layer['layer']:<{width}}  {layer['params']:>12,}  {layer['kind']}" for layer in layers]
    return "\n".join(lines)
