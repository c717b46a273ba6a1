"""The layers a benchmark can time, by name: a plain fused attention yardstick (``sdpa``), every
Synthesizer kind (optionally forced onto one path: ``"random+vanilla [reference]"``), our baselines
(``linformer``, ``lightconv``, ``dynamicconv``) and the PyPI ``linformer`` package (``linformer_pypi``),
an outside implementation that shows our Linformer baseline is not a weak one.
"""

from __future__ import annotations

import importlib.util

import torch.nn.functional as F
from torch import Tensor, nn

from ..attention.dispatch import applicable_paths, candidate_paths
from ..attention.factory import BASELINES, build_mixer, resolve_kind
from ..errors import InputError

LINFORMER_K = 256  # projected length of both Linformers at long lengths (the paper's); shorter: a quarter of max_len


def linformer_k(max_len: int) -> int:
    """The Linformers' projected length at ``max_len``: ``LINFORMER_K``, at most a quarter of ``max_len``."""
    return min(LINFORMER_K, max(1, max_len // 4))
PYPI_LINFORMER = "linformer_pypi"
NON_CAUSAL = ("linformer", PYPI_LINFORMER)  # encoder-only layers


class PlainSDPAttention(nn.Module):
    """The obvious fused multi-head self-attention: (B, n, d) -> (B, n, d)."""

    def __init__(self, d_model: int, n_heads: int, causal: bool = False):
        super().__init__()
        self.n_heads, self.causal = n_heads, causal
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        return self.out(F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).transpose(1, 2).reshape(b, n, d))


def pypi_linformer_available() -> bool:
    return importlib.util.find_spec("linformer") is not None


class PyPILinformer(nn.Module):
    """``linformer.LinformerSelfAttention`` (the PyPI package, ``pip install 'synthesizer-pytorch[bench]'``) built
    like our ``LinformerAttention``: same width, heads, max_len and k, separate key and value
    projections (``share_kv=False``), one key/value projection per head (``one_kv_head=False``)."""

    def __init__(self, d_model: int, n_heads: int, max_len: int, k: int = LINFORMER_K):
        super().__init__()
        from linformer import LinformerSelfAttention

        self.n_heads = n_heads
        self.layer = LinformerSelfAttention(d_model, max_len, k=k, heads=n_heads, one_kv_head=False, share_kv=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.layer(x)


def build_layer(name: str, d_model: int, n_heads: int, max_len: int, causal: bool = False) -> nn.Module:
    """The layer a benchmark row names: ``"sdpa"``, ``"linformer_pypi"``, a baseline, a kind, or ``"kind [path]"``."""
    if name == "sdpa":
        return PlainSDPAttention(d_model, n_heads, causal)
    if name == PYPI_LINFORMER:
        if causal:
            raise InputError("linformer_pypi is encoder-only: it has no causal version")
        return PyPILinformer(d_model, n_heads, max_len, linformer_k(max_len))
    kind, _, impl = name.partition(" [")
    options = {"k": linformer_k(max_len)} if kind == "linformer" else {}
    if impl:
        options["impl"] = impl.rstrip("]")
    return build_mixer(kind, d_model, n_heads, max_len, causal=causal, **options)


def layer_path(layer: nn.Module) -> str:
    """Which computation a row ran: the dispatcher's path, or what kind of baseline it is."""
    if isinstance(layer, PyPILinformer):
        return "pypi"
    if isinstance(layer, PlainSDPAttention):
        return "fused"
    return getattr(layer, "path", "baseline")


# The kernels that ``impl="auto"`` chooses between by length (the dispatch table) for the mixtures of feature
# components, each timed in a row of its own beside the kind's ``auto`` row (``candidates``).
CANDIDATE_PATHS = ("fused", "wide_qk")


def layer_names(kinds: list[str], baselines: list[str], causal: bool, candidates: bool = True) -> list[str]:
    """``sdpa``, each kind (plus, when ``candidates``, one row per other path, candidate kernels included,
    of kinds that mix ``random`` with dot products, and one per path of ``CANDIDATE_PATHS`` for the mixtures
    that ``wide_qk`` computes, so that the dispatcher's choice can be checked against the measurement), then
    the baselines; encoder-only
    ones are left out when ``causal``. Raises ValueError on an unknown kind or baseline before
    anything is timed."""
    allowed = (*BASELINES, PYPI_LINFORMER)
    names = ["sdpa"]
    for text in kinds:
        kind = resolve_kind(text)  # parsed once: a Kind, or a baseline's name
        if isinstance(kind, str):
            raise InputError(f"{kind!r} is a baseline: pass it with --baselines, not --kinds")
        names.append(str(kind))
        paths = applicable_paths(kind)
        if candidates and "fused_bias" in paths:
            names += [f"{kind} [{path}]" for path in (*paths[1:], *candidate_paths(kind))]
        elif candidates and set(CANDIDATE_PATHS) <= set(paths):
            names += [f"{kind} [{path}]" for path in paths if path in CANDIDATE_PATHS]
    for name in baselines:
        if name not in allowed:
            raise InputError(f"unknown baseline {name!r}; allowed: {', '.join(allowed)}")
        if not (causal and name in NON_CAUSAL):
            names.append(name)
    return names
