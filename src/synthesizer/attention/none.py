"""The ``none`` token mixer: each position keeps its own value, ``O_h = V_h``, then the output projection.

Not a synthesizer and no attention at all: there is no mixing between tokens, so the output at position i
depends on ``x_i`` alone. Trained beside the variants of a comparison, it is the floor a layer that
really uses its attention has to clear: a variant that does not clearly beat ``none`` does not use its
attention. Padding and causality hold by construction (no position ever sees another), and decoding
needs no state: its cache stores nothing but the number of positions seen, to enforce ``max_len``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..errors import InputError, positive_int
from .cache import DecodingState
from .masks import check_mixer_input, check_packed, check_positions, continued_positions


class NoneCache(DecodingState):
    """The decoding cache of :class:`NoMixing`: the count of positions decoded so far and, where the layer was
    given per-token positions, theirs (B, t), which a model reads to go on from each row's last one."""

    def __init__(self) -> None:
        self.length = 0
        self.positions: Tensor | None = None

    @property
    def nbytes(self) -> int:
        return 0

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions: only the count changes."""
        if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= self.length:
            raise InputError(f"crop length must be an int in [0, {self.length}] (the cached positions), got {length!r}")
        self.length = length
        if self.positions is not None:
            self.positions = self.positions[:, :length]

    def reorder(self, index: Tensor) -> None:
        """Beam search keeps batch rows ``index``: only the positions, where kept, move."""
        if self.positions is not None:
            self.positions = self.positions.index_select(0, index)


class NoMixing(nn.Module):
    """Token mixer ``y = out(value(x))`` applied to every position on its own.

    Args:
        d_model, n_heads, max_len, causal, dropout: as for ``SynthesizerAttention``; ``n_heads`` only has to
        divide ``d_model`` (the heads are the value's channel groups, and keeping ``V_h`` per head is the
        same as keeping ``V``); ``dropout`` has nothing to act on (there are no attention weights) and is
        kept for the shared constructor.
    Input ``x``: (batch, seq, d_model); ``key_padding_mask``: (batch, seq) bool, True = padding (checked,
    otherwise unused: no real position reads a padded one).
    """

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, dropout: float = 0.0):
        super().__init__()
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("max_len", max_len)):
            positive_int(name, value)
        if d_model % n_heads != 0:
            raise InputError(f"d_model={d_model} is not divisible by n_heads={n_heads}; pick n_heads that divides d_model")
        if not 0.0 <= dropout < 1.0:
            raise InputError(f"dropout must be in [0, 1), got {dropout!r}")
        self.d_model, self.n_heads, self.max_len = d_model, n_heads, max_len
        self.causal, self.dropout = causal, dropout
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)

    def param_counts(self) -> dict[str, int]:
        """Trainable parameters: values and output only (nothing decides where to attend)."""
        return {"values_output": sum(p.numel() for m in (self.value, self.out) for p in m.parameters())}

    def new_cache(self) -> NoneCache:
        """An empty decoding cache (causal or not: with no mixing, decoding step by step is always exact)."""
        return NoneCache()

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None, cache: NoneCache | None = None,
                positions: Tensor | None = None, documents: Tensor | None = None) -> Tensor:
        """x (B, t, d) -> (B, t, d). With ``cache``, x holds the next t positions after those decoded.
        ``positions`` (B, t), each token's own, change nothing here (no token reads another); a cache keeps them.
        ``documents`` (B, t), packed rows' document ids, are checked and need nothing more: no token reads another."""
        check_mixer_input(x, self.d_model, self.max_len, key_padding_mask, None if cache is None else cache.length)
        check_packed(x, positions, documents, cache)
        b, t, _ = x.shape
        start = 0 if cache is None else cache.length
        if positions is not None:
            check_positions(positions, b, t, self.max_len)
        if cache is not None:
            if positions is None and cache.positions is not None:
                positions = continued_positions(cache.positions, t)
            if positions is not None:
                old = cache.positions if cache.positions is not None else torch.arange(start).expand(b, -1)
                cache.positions = torch.cat([old.to(positions.device), positions], dim=1)
            cache.length = start + t
        return self.out(self.value(x))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, max_len={self.max_len}, causal={self.causal}"
