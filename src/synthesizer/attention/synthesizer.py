"""SynthesizerAttention: every Synthesizer variant and their mixtures in one self-attention layer.

Logits per component (see the spec), mixed as ``S = sum_c softmax(alpha)_c S_c``, then masked
softmax, dropout, ``P V`` per head and the output projection. The reference path materialises S;
the fast paths in ``fast.py`` compute the same function without it, and ``dispatch`` picks one.
"""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .cache import AttentionCache
from .dense import DenseLogits
from .dispatch import IMPLS, choose_path, running_path
from .factorized import FactorizedDenseLogits, FactorizedRandomLogits
from .chunked import blockwise_attention
from . import fused_bias
from .fast import fused_attention, shared_attention
from .kinds import parse_kind
from .masks import check_padding_mask, combined_mask, masked_softmax
from .random import RandomLogits
from .vanilla import VanillaLogits, split_heads


class SynthesizerAttention(nn.Module):
    """Self-attention whose logits come from any set of Synthesizer components.

    Args:
        d_model, n_heads: width and number of heads (``d_model % n_heads == 0``).
        max_len: longest sequence accepted; random and dense logits are sized by it.
        kind: ``"vanilla"``, ``"dense"``, ``"random"``, ``"fixed_random"``, ``"factorized_dense"``,
            ``"factorized_random"`` (aliases V, D, R, Rfix, FD, FR) or a ``+``-joined mixture. A
            mixture's components are put in one canonical order whatever the order written (random,
            fixed_random, factorized_random, dense, factorized_dense, vanilla): ``"vanilla+R"`` builds
            the ``"random+vanilla"`` layer, and ``alpha[c]`` always weighs ``components[c]``, so a
            state_dict loads into a layer of the same components however either kind was spelled.
        causal: mask keys after the query (decoders); enables incremental decoding.
        dropout: dropout on the attention weights, a real number in [0, 1).
        k: rank of ``factorized_random``. fd_split: ``a`` in ``L = a * b`` for ``factorized_dense``.
        dense_per_head: one ``W2, b2`` per head for ``dense``. mix_per_head: one alpha per head.
        impl: ``"auto"`` (the dispatcher picks a fast path) or ``"reference"``; the fast path names
            ``"shared"``, ``"fused"``, ``"fused_bias"``, ``"blockwise"`` force one where it applies.
            ``path`` says which one a forward pass in the layer's current mode and device runs.
    Input ``x``: (batch, seq, d_model); ``key_padding_mask``: (batch, seq) bool, True = padding.
    An empty batch or sequence gives an empty output, (0, seq, d_model) or (batch, 0, d_model).
    """

    def __init__(self, d_model: int, n_heads: int, max_len: int, kind: str = "dense+vanilla", causal: bool = False,
                 dropout: float = 0.0, *, k: int = 8, fd_split: int | None = None, dense_per_head: bool = False,
                 mix_per_head: bool = False, impl: str = "auto"):
        super().__init__()
        d_model, n_heads, max_len, k = (_positive_int(name, value) for name, value in
                                        (("d_model", d_model), ("n_heads", n_heads), ("max_len", max_len), ("k", k)))
        fd_split = None if fd_split is None else _positive_int("fd_split", fd_split)
        for name, value in (("causal", causal), ("dense_per_head", dense_per_head), ("mix_per_head", mix_per_head)):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be True or False, got {value!r}")
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}; pick n_heads that divides d_model")
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be a real number in [0, 1), got {dropout!r}")
        dropout = float(dropout)
        if not isinstance(impl, str) or impl not in IMPLS:
            raise ValueError(f"impl must be one of {', '.join(IMPLS)}, got {impl!r}")
        self.d_model, self.n_heads, self.max_len = d_model, n_heads, max_len
        self.causal, self.dropout, self.impl = causal, dropout, impl
        self.components = parse_kind(kind)
        self.kind = "+".join(self.components)
        self.logit_modules = nn.ModuleDict({c: self._build(c, k, fd_split, dense_per_head) for c in self.components})
        n_mix = len(self.components)
        self.alpha = nn.Parameter(torch.zeros(n_heads, n_mix) if mix_per_head else torch.zeros(n_mix)) if n_mix > 1 else None
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        if impl not in ("auto", "reference") and choose_path(self.components, impl) != impl:
            raise ValueError(f"impl={impl!r} does not apply to kind {self.kind!r}; use 'auto' or 'reference'")

    def _build(self, component: str, k: int, fd_split: int | None, dense_per_head: bool) -> nn.Module:
        d, h, L = self.d_model, self.n_heads, self.max_len
        if component == "vanilla":
            return VanillaLogits(d, h)
        if component == "dense":
            return DenseLogits(d, h, L, per_head=dense_per_head)
        if component in ("random", "fixed_random"):
            return RandomLogits(h, L, trainable=component == "random")
        if component == "factorized_random":
            return FactorizedRandomLogits(h, L, k)
        return FactorizedDenseLogits(d, h, L, fd_split)

    # ------------------------------------------------------------------ public helpers
    def mixture_weights(self) -> Tensor | None:
        """softmax(alpha): (components,) or (heads, components) for mixtures, None otherwise."""
        return None if self.alpha is None else torch.softmax(self.alpha.detach(), dim=-1)

    def param_counts(self) -> dict[str, int]:
        """Trainable parameters per logits component, the mixture's alpha, and values + output."""
        count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
        counts = {c: count(m) for c, m in self.logit_modules.items()}
        counts["mixture"] = 0 if self.alpha is None else self.alpha.numel()
        counts["values_output"] = count(self.value) + count(self.out)
        return counts

    def new_cache(self) -> AttentionCache:
        """An empty decoding cache; pass it as ``cache=`` and feed new positions step by step."""
        if not self.causal:
            raise ValueError("incremental decoding needs causal=True: a bidirectional layer sees future tokens")
        return AttentionCache()

    @property
    def path(self) -> str:
        """The computation a full forward pass runs now: it follows ``train()``/``eval()`` (dropout
        sends ``fused_bias`` to ``blockwise`` in training) and the parameters' device."""
        return running_path(self.components, self.impl, training=self.training, dropout=self.dropout,
                            device=self.value.weight.device)

    # ------------------------------------------------------------------ forward
    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None, cache: AttentionCache | None = None) -> Tensor:
        """x (B, t, d) -> (B, t, d). With ``cache``, x holds the next t positions after those cached."""
        start = self._check(x, key_padding_mask, cache)
        if cache is not None:
            return self._decode(x, key_padding_mask, cache, start)
        path = self.path  # the same decision that ``path`` reports
        if path == "reference":
            probs, v = self._reference_weights(x, key_padding_mask, 0, None)
            if self.training and self.dropout > 0:
                probs = F.dropout(probs, self.dropout)
            return self.out(self._merge(probs @ v))
        v = split_heads(self.value(x), self.n_heads)
        if path == "shared":
            heads = shared_attention(self._shared_logits(x.shape[1]), v, key_padding_mask, self.causal, self.dropout, self.training)
        else:
            q, k, bias = self._features(x)
            if path == "fused":
                heads = fused_attention(q, k, v, key_padding_mask, self.causal, self.dropout, self.training)
            elif path == "fused_bias":
                heads = self._merge(fused_bias.fused_bias_attention(q, k, v, bias, key_padding_mask, self.causal))
            else:
                heads = self._merge(blockwise_attention(q, k, v, bias, key_padding_mask, self.causal, self.dropout, self.training))
        return self.out(heads)

    def attention_weights(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """The attention probabilities (B, H, n, n), rows summing to 1 (0 for fully masked rows)."""
        self._check(x, key_padding_mask, None)
        probs, _ = self._reference_weights(x, key_padding_mask, 0, None)
        return probs.expand(x.shape[0], -1, -1, -1)

    # ------------------------------------------------------------------ internals
    def _check(self, x: Tensor, key_padding_mask: Tensor | None, cache: AttentionCache | None) -> int:
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (batch, seq, d_model={self.d_model}), got {tuple(x.shape)}")
        start = 0 if cache is None else cache.length
        if start + x.shape[1] > self.max_len:
            what = f"seq={x.shape[1]}" if cache is None else f"cached {start} + new {x.shape[1]} positions"
            raise ValueError(f"{what} exceeds max_len={self.max_len} of this layer; build it with a larger max_len")
        check_padding_mask(key_padding_mask, x.shape[0], x.shape[1])
        return start

    def _weights(self) -> list[Tensor | float]:
        """Mixture weight of each component, broadcastable to (1, H, 1, 1)."""
        if self.alpha is None:
            return [1.0]
        w = torch.softmax(self.alpha, dim=-1)
        return [w[..., c].reshape(1, -1, 1, 1) for c in range(len(self.components))]

    def _reference_weights(self, x: Tensor, padding: Tensor | None, start: int, cache: AttentionCache | None) -> tuple[Tensor, Tensor]:
        """Materialised probabilities (B|1, H, t, n_keys) and the values (B, H, n_keys, dh)."""
        t = x.shape[1]
        v = split_heads(self.value(x), self.n_heads)
        keys = self.logit_modules["vanilla"].keys(x) if "vanilla" in self.logit_modules else None
        if cache is not None:
            v, keys, padding = cache.append(v, keys, padding)
        n_keys = start + t
        logits = None
        for w, (name, module) in zip(self._weights(), self.logit_modules.items()):
            if name == "vanilla":
                s = module.logits(module.queries(x), keys)
            elif name in ("dense", "factorized_dense"):
                s = module.logits(x, n_keys)
            else:
                s = module.logits(start, t, n_keys)
            s = s if self.alpha is None else w * s  # a lone component needs no weighting pass
            logits = s if logits is None else logits + s
        mask = combined_mask(t, n_keys, self.causal, padding, x.device, start)
        return masked_softmax(logits, mask), v

    def _decode(self, x: Tensor, padding: Tensor | None, cache: AttentionCache, start: int) -> Tensor:
        probs, v = self._reference_weights(x, padding, start, cache)
        if self.training and self.dropout > 0:
            probs = F.dropout(probs, self.dropout)
        return self.out(self._merge(probs @ v))

    def _shared_logits(self, n: int) -> Tensor:
        """Mixed logits of input-independent components: (H, n, n)."""
        logits = None
        for w, module in zip(self._weights(), self.logit_modules.values()):
            s = module.logits(0, n, n)
            s = s if self.alpha is None else w * s
            logits = s if logits is None else logits + s
        return logits[0]

    def _features(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """Concatenated q, k features (B, H, n, sum d_c) and the shared random bias (H, n, n) or None."""
        b, n, _ = x.shape
        qs, ks, bias = [], [], None
        for w, (name, module) in zip(self._weights(), self.logit_modules.items()):
            if name == "vanilla":
                q, k = module.queries(x), module.keys(x)
            elif name == "dense":
                q, k = module.features(x)
            elif name == "factorized_random":
                q, k = module.features(b, n)
            else:  # random, fixed_random: an additive term shared by the batch
                s = (w * module.logits(0, n, n))[0]
                bias = s if bias is None else bias + s
                continue
            qs.append(q * w if isinstance(w, Tensor) else q)
            ks.append(k)
        q, k = (qs[0], ks[0]) if len(qs) == 1 else (torch.cat(qs, dim=-1), torch.cat(ks, dim=-1))
        return q, k, bias

    def _merge(self, heads: Tensor) -> Tensor:
        """(B, H, t, dh) -> (B, t, H*dh)."""
        b, h, t, dh = heads.shape
        return heads.transpose(1, 2).reshape(b, t, h * dh)

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, d_model={self.d_model}, n_heads={self.n_heads}, max_len={self.max_len}, causal={self.causal}, path={self.path!r}"


def _positive_int(name: str, value: object) -> int:
    """``value`` as an int if it is an integer >= 1 (a bool is not); ValueError naming the option otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
