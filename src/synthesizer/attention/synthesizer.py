"""SynthesizerAttention: every Synthesizer variant and their mixtures in one self-attention layer.

Logits per component (see the spec; the components come from ``registry``), mixed as
``S = sum_c softmax(alpha)_c S_c``, then masked softmax, dropout, ``P V`` per head and the output
projection. ``dispatch`` picks a kernel from ``ops`` by the components' forms; the layer hands it
what its components produce for that kernel (``ops.Scores``) and merges the heads it returns.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import InputError, positive_int
from . import registry
from .cache import AttentionCache
from .dispatch import KERNELS, check_impl, running_path
from .forms import BIAS
from .kinds import Kind, parse_kind
from .masks import check_mixer_input, check_packed, check_positions, check_right_padded, continued_positions
from .ops import Scores, reference
from .positions import BIAS_SCHEMES, LAYER_SCHEMES
from .vanilla import split_heads


class SynthesizerAttention(nn.Module):
    """Self-attention whose logits come from any set of Synthesizer components.

    Args:
        d_model, n_heads: width and number of heads (``d_model % n_heads == 0``).
        max_len: longest sequence accepted; random and dense logits are sized by it.
        kind: ``"vanilla"``, ``"dense"``, ``"random"``, ``"fixed_random"``, ``"factorized_dense"``,
            ``"factorized_random"`` (aliases V, D, R, Rfix, FD, FR), a component added with
            ``register_component``, or a ``+``-joined mixture; or a parsed ``Kind``. A mixture's
            components are put in one canonical order whatever the order written (random,
            fixed_random, factorized_random, dense, factorized_dense, vanilla, then registered ones):
            ``"vanilla+R"`` builds the ``"random+vanilla"`` layer, and ``alpha[c]`` always weighs
            ``components[c]``, so a state_dict loads into a layer of the same components however
            either kind was spelled.
        causal: mask keys after the query (decoders); enables incremental decoding.
        dropout: dropout on the attention weights, a real number in [0, 1).
        k: rank of ``factorized_random``. fd_split: ``a`` in ``L = a * b`` for ``factorized_dense``.
        dense_per_head: one ``W2, b2`` per head for ``dense``. (These three go to every component's
        factory that takes them.) mix_per_head: one alpha per head.
        positions: ``"none"`` (the layer adds no position information: a model's absolute embeddings,
            if any, come with x), or a scheme of the dot-product component (``positions.py``):
            ``"rope"`` (rotary queries and keys), ``"relative"`` or ``"alibi"`` (an additive bias,
            handed to ``forward`` as ``position_bias``: a model computes it once for all its layers).
            The synthesizer components keep their own definition; a kind without ``vanilla`` takes
            ``"none"`` only.
        impl: ``"auto"`` (the dispatcher picks a fast path) or ``"reference"``; the fast path names
            ``"shared"``, ``"fused"``, ``"wide_qk"``, ``"fused_bias"``, ``"blockwise"``,
            ``"sdpa_bias"``, ``"factorized_dense"`` force one where it applies, and so do the opt-in GPU paths
            ``"triton"`` (needs triton; see docs/gpu.md) and ``"flex"`` (FlexAttention, torch >= 2.6).
            ``path`` says which one a forward pass in the layer's current mode and device runs.
    Input ``x``: (batch, seq, d_model); ``key_padding_mask``: (batch, seq) bool, True = padding;
    ``position_bias`` (with ``positions="relative"``/``"alibi"``): (H, seq, seq), or (H, t, start + t)
    when decoding t positions after ``start`` cached ones ((B, H, ...) with per-token positions).

    Per-token positions: ``forward(x, ..., positions=P)`` with ``P`` (batch, seq) ints in [0, max_len)
    gives each token its own position, so each row's positions may start anywhere: left-padded rows
    (the padding first, the real tokens from position 0) and rows that hold several documents, each
    restarting at 0. Every component reads its logits at those positions (``R[P_i, P_j]``, dense's
    ``W2[P_j]``, rotary angles), on the reference path; the causal mask stays by index. A decoding
    cache keeps the positions, and new tokens given none continue each row from its last one.
    Packed rows: ``forward(x, ..., positions=P, documents=D)`` with ``D`` (batch, seq) ints, each token's
    document (``data/packing.py``); a token attends only to keys of its own document (the block-diagonal
    ``masks.document_mask``, causal within it where the layer is), so each document gets what it gets
    alone. Per-token inputs run a kernel of ``dispatch.PER_TOKEN`` (``fused``, where it applies) or the
    reference; set ``packed = True`` on a layer that is fed packed rows (``models.blocks.set_packed``), and
    ``path`` names the kernel such a forward pass runs.
    ``attention_maps``: None, or a list to which every forward pass appends the attention probabilities
    it used, (B, H, t, start + t); the pass then runs the reference kernel, which materialises them
    (``models.record`` sets it).
    An empty batch or sequence gives an empty output, (0, seq, d_model) or (batch, 0, d_model).
    """

    def __init__(self, d_model: int, n_heads: int, max_len: int, kind: str | Kind = "dense+vanilla", causal: bool = False,
                 dropout: float = 0.0, *, k: int = 8, fd_split: int | None = None, dense_per_head: bool = False,
                 mix_per_head: bool = False, positions: str = "none", impl: str = "auto"):
        super().__init__()
        d_model, n_heads, max_len, k = (positive_int(name, value) for name, value in
                                        (("d_model", d_model), ("n_heads", n_heads), ("max_len", max_len), ("k", k)))
        fd_split = None if fd_split is None else positive_int("fd_split", fd_split)
        for name, value in (("causal", causal), ("dense_per_head", dense_per_head), ("mix_per_head", mix_per_head)):
            if not isinstance(value, bool):
                raise InputError(f"{name} must be True or False, got {value!r}")
        if d_model % n_heads != 0:
            raise InputError(f"d_model={d_model} is not divisible by n_heads={n_heads}; pick n_heads that divides d_model")
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or not 0.0 <= dropout < 1.0:
            raise InputError(f"dropout must be a real number in [0, 1), got {dropout!r}")
        dropout = float(dropout)
        self.d_model, self.n_heads, self.max_len = d_model, n_heads, max_len
        self.causal, self.dropout, self.impl = causal, dropout, impl
        self.attention_maps: list[Tensor] | None = None
        self.packed = False  # fed packed rows (per-token positions and documents): what ``path`` reports
        self.components = parse_kind(kind)  # a Kind: the component names in the canonical order
        self.kind = str(self.components)
        if positions != "none" and positions not in LAYER_SCHEMES:
            raise InputError(f"positions must be one of none, {', '.join(LAYER_SCHEMES)}, got {positions!r}")
        if positions != "none" and "vanilla" not in self.components:
            raise InputError(f"positions={positions!r} applies to the dot-product component, and kind {self.kind!r} "
                             "has none; use positions='none'")
        self.positions = positions
        self.biased = positions in BIAS_SCHEMES  # forward takes a position bias for vanilla's logits
        check_impl(self.components, impl, extra_bias=self.biased)
        options = {"k": k, "fd_split": fd_split, "dense_per_head": dense_per_head, "rotary": positions == "rope"}
        self.logit_modules = nn.ModuleDict({c: registry.spec(c).build(d_model, n_heads, max_len, **options)
                                            for c in self.components})
        n_mix = len(self.components)
        self.alpha = nn.Parameter(torch.zeros(n_heads, n_mix) if mix_per_head else torch.zeros(n_mix)) if n_mix > 1 else None
        self.reset_parameters()
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        if impl in KERNELS:  # an opt-in path's missing package: said now, not at the first forward
            KERNELS[impl].require()
        # Ask for the path once now, eagerly: a kernel's one-off check that its op works (fused_bias's
        # probe) then never first runs inside a torch.compile'd forward, where it is a graph break.
        self.path  # noqa: B018

    def reset_parameters(self) -> None:
        """alpha at zero: equal mixture weights at the start (the components and projections reset
        themselves)."""
        if self.alpha is not None:
            with torch.no_grad():
                self.alpha.zero_()

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
            raise InputError("incremental decoding needs causal=True: a bidirectional layer sees future tokens")
        return AttentionCache()

    @property
    def path(self) -> str:
        """The computation a full forward pass of ``max_len`` positions runs now (``path_at`` for another
        length): it follows ``train()``/``eval()`` (dropout sends ``fused_bias`` to ``blockwise`` in training),
        the parameters' device, with ``impl="auto"`` the measured dispatch table, and, where the layer is fed
        packed rows (``packed``), which kernels take per-token inputs."""
        return self.path_at(self.max_len)

    def path_at(self, seq: int) -> str:
        """The computation a full forward pass of ``seq`` positions runs now."""
        return self._running_path(self.packed, seq)

    def _running_path(self, per_token: bool, seq: int | None = None) -> str:
        path = running_path(self.components, self.impl, training=self.training, dropout=self.dropout,
                            device=self.value.weight.device, extra_bias=self.biased, per_token=per_token, seq=seq,
                            width=self.d_model)
        # a registered feature component that offers no features at per-token positions: the reference
        if per_token and path != "reference" and not all(callable(getattr(m, "features_at", None))
                                                         for m in self.logit_modules.values()):
            return "reference"
        return path

    # ------------------------------------------------------------------ forward
    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None, cache: AttentionCache | None = None,
                position_bias: Tensor | None = None, positions: Tensor | None = None,
                documents: Tensor | None = None) -> Tensor:
        """x (B, t, d) -> (B, t, d). With ``cache``, x holds the next t positions after those cached.
        ``documents`` (B, t): packed rows' document ids, with their ``positions``."""
        if positions is None and cache is not None and cache.positions is not None:
            positions = continued_positions(cache.positions, x.shape[1])
        start = self._check(x, key_padding_mask, cache, position_bias, positions)
        check_packed(x, positions, documents, cache)
        if positions is not None and cache is None and self.attention_maps is None:
            path = self._running_path(per_token=True, seq=x.shape[1])
            if path != "reference":
                kernel = KERNELS[path]
                v = split_heads(self.value(x), self.n_heads)
                scores = self._scores(kernel.NEEDS, x, position_bias=position_bias, positions=positions)
                scores.documents = documents
                heads = kernel.attend(scores, v, key_padding_mask, self.causal, self.dropout, self.training)
                return self.out(self._merge(heads))
        if positions is not None:
            return self._at_positions(x, key_padding_mask, cache, position_bias, positions, start, documents)
        if cache is not None or self.attention_maps is not None:
            return self._decode(x, key_padding_mask, cache, start, position_bias)
        kernel = KERNELS[self.path_at(x.shape[1])]  # the same decision that ``path_at`` reports
        v = split_heads(self.value(x), self.n_heads)
        heads = kernel.attend(self._scores(kernel.NEEDS, x, position_bias=position_bias), v, key_padding_mask,
                              self.causal, self.dropout, self.training)
        return self.out(self._merge(heads))

    def attention_weights(self, x: Tensor, key_padding_mask: Tensor | None = None,
                          position_bias: Tensor | None = None, positions: Tensor | None = None,
                          documents: Tensor | None = None) -> Tensor:
        """The attention probabilities (B, H, n, n), rows summing to 1 (0 for fully masked rows)."""
        self._check(x, key_padding_mask, None, position_bias, positions)
        check_packed(x, positions, documents, None)
        if positions is not None:
            logits = self._logits_at(x, positions, positions, None, position_bias)
        else:
            logits = self._scores("logits", x, position_bias=position_bias).logits
        probs = reference.probabilities(logits, key_padding_mask, self.causal, documents=documents)
        return probs.expand(x.shape[0], -1, -1, -1)

    def component_logits(self, x: Tensor, position_bias: Tensor | None = None) -> dict[str, Tensor]:
        """Each component's logits (B or 1, H, n, n) with its mixture weight folded in, by component name;
        their sum is what the layer softmaxes (masks not applied). A mixture weight scales logits, so how
        far a component's logits spread along a row, not its weight, says how much it shapes that row."""
        self._check(x, None, None, position_bias, None)
        return dict(self._weighted_logits(x, position_bias=position_bias))

    # ------------------------------------------------------------------ internals
    def _check(self, x: Tensor, key_padding_mask: Tensor | None, cache: AttentionCache | None,
               position_bias: Tensor | None = None, positions: Tensor | None = None) -> int:
        check_mixer_input(x, self.d_model, self.max_len, key_padding_mask, None if cache is None else cache.length)
        start = 0 if cache is None else cache.length
        if self.biased:
            want = (self.n_heads, x.shape[1], start + x.shape[1])
            shape = None if position_bias is None else tuple(position_bias.shape)
            if shape != want and not (positions is not None and shape == (x.shape[0], *want)):
                per_token = f" or (batch, heads, rows, keys) = {(x.shape[0], *want)}" if positions is not None else ""
                raise InputError(f"a layer with positions={self.positions!r} needs position_bias of shape (heads, rows, "
                                 f"keys) = {want}{per_token}, got {shape or 'none'}")
        elif position_bias is not None:
            raise InputError(f"position_bias given to a layer with positions={self.positions!r}; only 'relative' and "
                             "'alibi' layers take one")
        if positions is not None:
            check_positions(positions, x.shape[0], x.shape[1], self.max_len)
            return start  # each row's own positions: padding may come first (left padding)
        if cache is not None and cache.padding is not None and bool(cache.padding.any()):
            # padding cached earlier, before the new (real) positions, is left padding as well
            new = key_padding_mask if key_padding_mask is not None else cache.padding.new_zeros(x.shape[:2])
            check_right_padded(torch.cat([cache.padding, new], dim=1))
        else:
            check_right_padded(key_padding_mask)
        return start

    def _weights(self) -> list[Tensor | float]:
        """Mixture weight of each component, broadcastable to (1, H, 1, 1)."""
        if self.alpha is None:
            return [1.0]
        w = torch.softmax(self.alpha, dim=-1)
        return [w[..., c].reshape(1, -1, 1, 1) for c in range(len(self.components))]

    def _decode(self, x: Tensor, padding: Tensor | None, cache: AttentionCache | None, start: int,
                position_bias: Tensor | None) -> Tensor:
        """The next t positions on the reference kernel (all n positions without a cache). The cache keeps
        the values of every position and the keys of the component that needs them (vanilla), and hands
        them to its logits."""
        v = split_heads(self.value(x), self.n_heads)
        keys = None
        if cache is not None:
            v, keys, padding = cache.append(v, self._keys(x, start), padding)
        return self._attend_logits(self._scores("logits", x, start, keys, position_bias).logits, v, padding, start)

    def _at_positions(self, x: Tensor, padding: Tensor | None, cache: AttentionCache | None,
                      position_bias: Tensor | None, positions: Tensor, start: int,
                      documents: Tensor | None = None) -> Tensor:
        """The forward pass with per-token positions, on the reference kernel (a full pass, or the next t
        tokens of a cache, which keeps their positions; ``documents``: packed rows', full passes only)."""
        v = split_heads(self.value(x), self.n_heads)
        keys, key_positions = None, positions
        if cache is not None:
            v, keys, padding = cache.append(v, self._keys(x, positions), padding, positions)
            key_positions = cache.positions
        logits = self._logits_at(x, positions, key_positions, keys, position_bias)
        return self._attend_logits(logits, v, padding, start, documents)

    def _attend_logits(self, logits: Tensor, v: Tensor, padding: Tensor | None, start: int,
                       documents: Tensor | None = None) -> Tensor:
        """The reference kernel on materialised logits of rows start..; with ``attention_maps`` set, the
        probabilities are appended to it (in the graph: gradients reach them)."""
        if self.attention_maps is None:
            heads = reference.attend(Scores(logits=logits, start=start, documents=documents), v, padding, self.causal,
                                     self.dropout, self.training)
        else:
            probs = reference.probabilities(logits, padding, self.causal, start, documents)
            probs = probs.expand(v.shape[0], -1, -1, -1)
            self.attention_maps.append(probs)
            heads = (F.dropout(probs, self.dropout) if self.training and self.dropout > 0 else probs) @ v
        return self.out(self._merge(heads))

    def _logits_at(self, x: Tensor, rows: Tensor, key_positions: Tensor, keys: Tensor | None,
                   position_bias: Tensor | None) -> Tensor:
        """(B, H, t, n): the mixed logits of the tokens of x at positions ``rows`` (B, t) against the keys
        at ``key_positions`` (B, n) (``keys``: the cached keys of vanilla, or None for x's own)."""
        mixed = self.alpha is not None
        total = None
        for w, name, module in zip(self._weights(), self.components, self.logit_modules.values()):
            if not callable(getattr(module, "logits_at", None)):
                raise InputError(f"attention component {name!r} takes no per-token positions (its module has no "
                                 "logits_at(x, rows, key_positions)); call the layer without positions=")
            cached = registry.spec(name).cached_keys
            s = module.logits_at(x, rows, key_positions, keys=keys) if cached else module.logits_at(x, rows, key_positions)
            if position_bias is not None and name == "vanilla":
                s = s + position_bias
            s = w * s if mixed else s
            total = s if total is None else total + s
        return total

    def _weighted_logits(self, x: Tensor, start: int = 0, keys: Tensor | None = None,
                         position_bias: Tensor | None = None) -> Iterator[tuple[str, Tensor]]:
        """Each component's logits (B|1, H, t, start + t) for rows start..start+t-1, its mixture weight
        folded in (``position_bias`` joins vanilla's); their sum is the layer's logits."""
        mixed, weights = self.alpha is not None, self._weights()
        # The keys come first, before any component's logits: the autograd graph then sums the
        # gradient of x in the same order as it always did (bit for bit the same numbers).
        keys = self._keys(x) if keys is None else keys
        n_keys = start + x.shape[1]
        for w, name, module in zip(weights, self.components, self.logit_modules.values()):
            cached = keys is not None and registry.spec(name).cached_keys
            s = module.logits(x, start, n_keys, keys=keys) if cached else module.logits(x, start, n_keys)
            if position_bias is not None and name == "vanilla":
                s = s + position_bias
            yield name, (w * s if mixed else s)  # a lone component needs no weighting pass

    def _keys(self, x: Tensor, start: int | Tensor = 0) -> Tensor | None:
        """(B, H, t, dh) keys of the component that pairs rows with earlier positions (vanilla), or None;
        x holds positions start..start+t-1 (rotary keys are rotated by them)."""
        keyed = next((c for c in self.components if registry.spec(c).cached_keys), None)
        return None if keyed is None else self.logit_modules[keyed].keys(x, start)

    def _scores(self, needs: str, x: Tensor, start: int = 0, keys: Tensor | None = None,
                position_bias: Tensor | None = None, positions: Tensor | None = None) -> Scores:
        """What the components give the kernel (see ``ops.Scores``): "logits" (B|1, H, t, start + t)
        for rows start..start+t-1, mixture weights folded in (``keys``: the cached keys of all start + t
        positions, for the component that needs them); "features": q, k (B, H, n, sum d_c) concatenated
        over the feature components (each weighted in q, by the component itself where it ``folds_weight``,
        or in k where its k is shared by the batch; one component's weight is handed over as ``q_weight``)
        and the bias components' terms (weight, B (H, n, n));
        "bias": the terms of every component. ``position_bias`` joins vanilla's logits (as a term with
        vanilla's weight where the kernel takes terms). ``positions`` (B, n): the features of each token at its
        own position (``features_at``; a ``PER_TOKEN`` kernel's "features" only)."""
        if needs == "logits":
            total = None
            for _, s in self._weighted_logits(x, start, keys, position_bias):
                total = s if total is None else total + s
            return Scores(logits=total, start=start)
        mixed = self.alpha is not None
        weights = self._weights()
        items = zip(weights, self.components, self.logit_modules.values())
        n = x.shape[1]
        terms, features = [], []
        for w, name, module in items:
            weight = w.reshape(-1) if mixed else None  # one value, or one per head
            # an additive term shared by the batch, its weight kept apart ("bias": every component is
            # input-independent and offers one)
            if needs == "bias" or registry.spec(name).form == BIAS:
                terms.append((weight, module.bias(n)))
            else:
                # a component that folds its weight into q (vanilla: into its projection) gets it there
                folds = weight is not None and getattr(module, "folds_weight", False)
                given = {"weight": weight} if folds else {}
                q, k = module.features(x, **given) if positions is None else module.features_at(x, positions, **given)
                features.append((None if folds else weight, q, k))
            if position_bias is not None and name == "vanilla":
                terms.append((weight, position_bias))
        if needs == "bias":
            return Scores(terms=tuple(terms))
        if len(features) == 1:  # the kernel weights q itself, so no weighted copy of q is made
            q_weight, q, k = features[0]
            return Scores(q=q, k=k, q_weight=q_weight, terms=tuple(terms))
        # Each component's mixture weight on the cheaper side of its product: keys shared by the batch (an
        # expanded view, dense's W2) are weighted before they are expanded, so the product and its gradient
        # touch (H, n, d) instead of (B, H, n, d); else q. q first: its weighted copies are gone by the
        # time k is concatenated.
        shared = [w is not None and k.shape[0] > 1 and k.stride(0) == 0 for w, _, k in features]
        q = torch.cat([q if on_k or w is None else q * w.reshape(-1, 1, 1)
                       for (w, q, _), on_k in zip(features, shared)], dim=-1)
        k = torch.cat([(k[:1] * w.reshape(-1, 1, 1)).expand_as(k) if on_k else k
                       for (w, _, k), on_k in zip(features, shared)], dim=-1)
        return Scores(q=q, k=k, terms=tuple(terms))

    def _merge(self, heads: Tensor) -> Tensor:
        """(B, H, t, dh) -> (B, t, H*dh): the one copy of every kernel's output."""
        b, h, t, dh = heads.shape
        return heads.transpose(1, 2).reshape(b, t, h * dh)

    def extra_repr(self) -> str:
        positions = f", positions={self.positions!r}" if self.positions != "none" else ""
        return (f"kind={self.kind!r}, d_model={self.d_model}, n_heads={self.n_heads}, max_len={self.max_len}, "
                f"causal={self.causal}{positions}, path={self.path!r}")
