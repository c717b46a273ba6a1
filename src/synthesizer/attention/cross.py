"""Encoder-decoder cross-attention: queries from the decoder, keys and values from the encoder memory.

Synthesizers replace self-attention only; cross-attention is ``vanilla`` (dot product) unless a model
asks for ``random``, whose logits ``R_h[t0:t0+t, :s]`` come from ``R: (H, L_tgt, L_src)``.
The memory's keys and values are computed once per source (``memory_kv``) and reused at every
decoding step; ``CrossAttentionCache.reorder`` follows beam search. Packed rows (``Packed``): target
document k of a row attends to source document k of the same row only (``masks.document_mask``), and the
random kind reads ``R`` at each token's position in its own document.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import InputError
from .cache import DecodingState
from .masks import allowed_keys, check_documents, check_padding_mask, document_mask, masked_softmax
from .random import xavier_per_head_
from .vanilla import split_heads

CROSS_KINDS = ("vanilla", "random")


@dataclass
class Packed:
    """Packed target rows against packed source rows: each target token's position in its own document and
    its document's id (B, t), the same for the source (memory) tokens (B, s). Target document k of a row
    pairs with source document k of that row (``data/packing.py`` lays them out so)."""

    positions: Tensor
    documents: Tensor
    memory_positions: Tensor
    memory_documents: Tensor


class CrossAttentionCache(DecodingState):
    """The memory projected once: ``keys`` (B, H, s, dh) or None (random), ``values`` (B, H, s, dh),
    ``padding`` (B, s) bool (True = padding) or None."""

    def __init__(self) -> None:
        self.keys: Tensor | None = None
        self.values: Tensor | None = None
        self.padding: Tensor | None = None

    @property
    def filled(self) -> bool:
        return self.values is not None

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.keys, self.values) if t is not None)

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (beam search)."""
        for name in ("keys", "values", "padding"):
            t = getattr(self, name)
            if t is not None:
                setattr(self, name, t.index_select(0, index))


class CrossAttention(nn.Module):
    """Multi-head cross-attention.

    Args:
        d_model, n_heads: width and heads. max_len: longest target (and, unless ``max_src_len`` is
            given, source) sequence; only the ``random`` kind is sized by them.
        kind: ``"vanilla"`` or ``"random"``. dropout: on the attention weights.
    Shapes: ``x`` (B, t, d) decoder states, ``memory`` (B, s, d), ``memory_padding_mask`` (B, s) bool.
    ``attention_maps``: None, or a list to which every forward pass appends the attention probabilities
    it used, (B, H, t, s) (``models.record`` sets it).
    """

    def __init__(self, d_model: int, n_heads: int, max_len: int, kind: str = "vanilla", dropout: float = 0.0,
                 max_src_len: int | None = None):
        super().__init__()
        if kind not in CROSS_KINDS:
            raise InputError(f"unknown cross-attention kind {kind!r}; allowed: {', '.join(CROSS_KINDS)}")
        if d_model % n_heads != 0:
            raise InputError(f"d_model={d_model} is not divisible by n_heads={n_heads}; pick n_heads that divides d_model")
        self.d_model, self.n_heads, self.kind, self.dropout = d_model, n_heads, kind, dropout
        self.max_len, self.max_src_len = max_len, max_src_len or max_len
        self.attention_maps: list[Tensor] | None = None
        if kind == "vanilla":
            self.query = nn.Linear(d_model, d_model)
            self.key = nn.Linear(d_model, d_model)
        else:
            self.r = nn.Parameter(torch.empty(n_heads, self.max_len, self.max_src_len))
            self.reset_parameters()  # before the value and output layers: the random stream of earlier releases
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)

    def reset_parameters(self) -> None:
        """The random kind's R (the projections are ``nn.Linear`` layers, which reset themselves)."""
        if self.kind != "vanilla":
            xavier_per_head_(self.r)

    def memory_kv(self, memory: Tensor, memory_padding_mask: Tensor | None = None) -> CrossAttentionCache:
        """Project the memory (B, s, d) once; the result serves every decoding step."""
        if memory.dim() != 3 or memory.shape[-1] != self.d_model:
            raise InputError(f"memory must have shape (batch, src_len, d_model={self.d_model}), got {tuple(memory.shape)}")
        if memory.shape[1] > self.max_src_len:
            raise InputError(f"source length {memory.shape[1]} exceeds max_len={self.max_src_len} of this cross-attention")
        check_padding_mask(memory_padding_mask, memory.shape[0], memory.shape[1])
        cache = CrossAttentionCache()
        cache.values = split_heads(self.value(memory), self.n_heads)
        cache.keys = split_heads(self.key(memory), self.n_heads) if self.kind == "vanilla" else None
        cache.padding = memory_padding_mask
        return cache

    def forward(self, x: Tensor, memory: Tensor | None = None, memory_padding_mask: Tensor | None = None,
                cache: CrossAttentionCache | None = None, start: int = 0, packed: Packed | None = None) -> Tensor:
        """x (B, t, d) -> (B, t, d). ``start``: position of x's first row in the target (random kind).

        With an empty ``cache`` the memory's K/V are computed and stored in it; with a filled one,
        ``memory`` is not needed. ``packed``: packed target and source rows (full passes only).
        """
        if packed is not None and cache is not None:
            raise InputError("packed rows are for full forward passes; decoding with a cache takes one sequence per row")
        if cache is None or not cache.filled:
            if memory is None:
                raise InputError("cross-attention needs the encoder memory (or a filled CrossAttentionCache)")
            kv = self.memory_kv(memory, memory_padding_mask)
            if cache is not None:
                cache.keys, cache.values, cache.padding = kv.keys, kv.values, kv.padding
        else:
            kv = cache
        b, t, _ = x.shape
        if start + t > self.max_len:
            raise InputError(f"target positions {start}..{start + t - 1} exceed max_len={self.max_len} of this cross-attention")
        padding = kv.padding
        documents = None
        if packed is not None:
            check_documents(packed.documents, b, t)
            check_documents(packed.memory_documents, b, kv.values.shape[2], "memory_documents")
            documents = (packed.documents, packed.memory_documents)
            padding = padding if padding is not None else packed.memory_documents.new_zeros(
                packed.memory_documents.shape, dtype=torch.bool)
        # The masks' one rule: a source made only of padding gives zeros (mask: True = may attend).
        allowed, empty = (None, None) if padding is None else allowed_keys(padding, False, t, documents=documents)
        p = self.dropout if self.training else 0.0
        scale = 1.0 / math.sqrt(self.d_model // self.n_heads)
        if self.kind == "vanilla" and self.attention_maps is None:
            q = split_heads(self.query(x), self.n_heads)
            heads = F.scaled_dot_product_attention(q, kv.keys, kv.values, attn_mask=allowed, dropout_p=p, scale=scale)
        else:  # the probabilities materialised: the random kind's always, vanilla's when they are recorded
            if self.kind == "vanilla":
                logits = split_heads(self.query(x), self.n_heads) @ kv.keys.transpose(-2, -1) * scale
            elif packed is not None:  # R at each token's position in its own document: (B, H, t, s)
                logits = self.r[:, packed.positions.unsqueeze(-1), packed.memory_positions.unsqueeze(-2)].transpose(0, 1)
            else:
                logits = self.r[:, start : start + t, : kv.values.shape[2]].unsqueeze(0)
            probs = masked_softmax(logits, None if padding is None else ~allowed)
            if self.attention_maps is not None:
                probs = probs.expand(b, -1, -1, -1)
                self.attention_maps.append(probs)
            if p > 0:
                probs = F.dropout(probs, p)
            heads = probs @ kv.values
        if empty is not None:
            heads = heads.masked_fill(empty, 0.0)
        return self.out(heads.transpose(1, 2).reshape(b, t, self.d_model))

    def param_counts(self) -> dict[str, int]:
        return {"total": sum(p.numel() for p in self.parameters())}

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, d_model={self.d_model}, n_heads={self.n_heads}"
