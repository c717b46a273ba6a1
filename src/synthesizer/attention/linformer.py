"""Linformer self-attention (Wang et al. 2020): keys and values projected along the sequence to length k.

``K' = E[:n]^T K``, ``V' = F[:n]^T V`` with ``E, F: (L, k)``, then ``softmax(Q_h K'_h^T / sqrt(d_h)) V'_h``
per head and the output projection. E and F are shared by the heads of a layer (the paper's headwise
sharing, its default); ``share_kv=True`` also makes ``F = E``. For ``n < L`` the first n rows of E and F
are used, as synthesizers use the top-left block of their matrices. Encoder-only: every projected key
mixes all positions, future ones included, so there is no causal version.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import InputError, positive_int
from .masks import check_mixer_input
from .vanilla import split_heads


def default_k(max_len: int) -> int:
    """The projected length when none is given: a quarter of ``max_len`` (at least 1), so that the layer
    compresses the sequence at every length it takes."""
    return max(1, max_len // 4)


class LinformerAttention(nn.Module):
    """Self-attention over k projected keys and values instead of n.

    Args:
        d_model, n_heads, max_len, dropout: as for ``SynthesizerAttention``.
        causal: must be False (raises ValueError otherwise).
        k: projected length, at most ``max_len`` (default :func:`default_k`: a quarter of ``max_len``, the
            paper's compression at n=512 to 1024 being k/n = 1/4 to 1/2 and less); share_kv: one projection
            for keys and values.
    Input ``x``: (batch, seq, d_model); ``key_padding_mask``: (batch, seq) bool, True = padding; padded
    positions' keys and values are zeroed before the projection, so they reach no output.
    """

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, dropout: float = 0.0, *,
                 k: int | None = None, share_kv: bool = False):
        super().__init__()
        k = default_k(max_len) if k is None else k
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("max_len", max_len), ("k", k)):
            positive_int(name, value)
        if k > max_len:
            raise InputError(f"k={k} > max_len={max_len}: the projection would lengthen the sequence, not compress it; "
                             f"pick k <= max_len (default: max_len // 4 = {default_k(max_len)})")
        if d_model % n_heads != 0:
            raise InputError(f"d_model={d_model} is not divisible by n_heads={n_heads}; pick n_heads that divides d_model")
        if causal:
            raise InputError("Linformer cannot be causal: its sequence projection mixes future tokens into every "
                             "projected key; use it in encoders only (causal=False)")
        if not 0.0 <= dropout < 1.0:
            raise InputError(f"dropout must be in [0, 1), got {dropout!r}")
        self.d_model, self.n_heads, self.max_len = d_model, n_heads, max_len
        self.causal, self.dropout, self.k, self.share_kv = False, dropout, k, share_kv
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        self.e = nn.Parameter(torch.empty(max_len, k))
        self.f = None if share_kv else nn.Parameter(torch.empty(max_len, k))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The sequence projections E (and F); the other layers are ``nn.Linear``, which reset themselves."""
        for p in (self.e, self.f):
            if p is not None:
                nn.init.xavier_uniform_(p)

    def param_counts(self) -> dict[str, int]:
        """Trainable parameters: queries and keys, the sequence projections E (and F), values and output."""
        count = lambda *ms: sum(p.numel() for m in ms for p in m.parameters())  # noqa: E731
        projections = self.e.numel() + (0 if self.f is None else self.f.numel())
        return {"query_key": count(self.query, self.key), "projections": projections,
                "values_output": count(self.value, self.out)}

    def new_cache(self) -> None:
        raise InputError("Linformer has no incremental decoding: it is encoder-only (causal=False)")

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None, cache: object | None = None) -> Tensor:
        """x (B, n, d) -> (B, n, d)."""
        if cache is not None:
            raise InputError("Linformer has no incremental decoding: it is encoder-only, pass cache=None")
        check_mixer_input(x, self.d_model, self.max_len, key_padding_mask)
        b, n, _ = x.shape
        keep = x.new_ones(b, n) if key_padding_mask is None else (~key_padding_mask).to(x.dtype)
        # Projecting before the linear maps computes the same function with n/k times less work for them:
        # E^T (m * (x W + b)) = (E^T (m * x)) W + (E^T m) b, with m the 0/1 mask of real positions.
        xm = x if key_padding_mask is None else x * keep.unsqueeze(-1)
        keys = self._project(xm, keep, self.e, self.key)
        values = self._project(xm, keep, self.e if self.f is None else self.f, self.value)
        q = split_heads(self.query(x), self.n_heads)
        heads = F.scaled_dot_product_attention(q, split_heads(keys, self.n_heads), split_heads(values, self.n_heads),
                                               dropout_p=self.dropout if self.training else 0.0)
        return self.out(heads.transpose(1, 2).reshape(b, n, self.d_model))

    @staticmethod
    def _project(xm: Tensor, keep: Tensor, proj: Tensor, linear: nn.Linear) -> Tensor:
        """(proj[:n]^T (m * x)) W^T + (proj[:n]^T m) b: the k projected rows of ``linear(x)``, (B, k, d)."""
        p = proj[: xm.shape[1]]  # (n, k)
        projected = p.t() @ xm  # (B, k, d)
        return F.linear(projected, linear.weight) + (keep @ p).unsqueeze(-1) * linear.bias

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, max_len={self.max_len}, k={self.k}, share_kv={self.share_kv}"
