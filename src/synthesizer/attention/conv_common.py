"""What lightweight and dynamic convolution share (Wu et al. 2019, "Pay Less Attention with Lightweight
and Dynamic Convolutions"): the block around the convolution, its decoding cache, and the banded
product that applies per-position kernels.

The block, as in the paper's Figure 2: ``u = GLU(x W_I + b_I)`` (or ``x W_I + b_I`` with ``glu=False``),
padded positions of ``u`` set to zero, a depthwise convolution over the sequence with softmax-normalised
kernels of size K shared by the ``d/H`` channels of each head, then ``y = conv(u) W_O + b_O``.
The convolution itself has no bias: one would be absorbed by ``b_O`` (``(c + b) W_O = c W_O + b W_O``).
Position i sees ``u[i - K//2 .. i + K//2]`` (non-causal, K odd) or ``u[i - K + 1 .. i]`` (causal).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import InputError, positive_int
from .cache import DecodingState
from .masks import check_mixer_input


class ConvCache(DecodingState):
    """The last K-1 conv inputs of a causal conv layer: all it needs to decode the next position.

    ``inputs``: (B, K-1, d), zeros before the first step (the causal left padding). Its size does not
    grow with the decoded length, unlike an attention cache.
    """

    def __init__(self) -> None:
        self.inputs: Tensor | None = None
        self.length = 0

    @property
    def nbytes(self) -> int:
        return 0 if self.inputs is None else self.inputs.numel() * self.inputs.element_size()

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (beam search)."""
        if self.inputs is not None:
            self.inputs = self.inputs.index_select(0, index)


def _band(weights: Tensor, c: int) -> Tensor:
    """(..., c, K) kernels of c consecutive positions -> (..., c, c + K - 1) band, kernel j at column j.

    Skew trick: pad each row with c zeros and re-read the flat buffer with rows one element shorter,
    so each row starts one column further right than the one before.
    """
    k = weights.shape[-1]
    return F.pad(weights, (0, c)).flatten(-2)[..., : c * (c + k - 1)].unflatten(-1, (c, c + k - 1))


def banded_conv(ext: Tensor, weights: Tensor, n_heads: int, block: int = 64) -> Tensor:
    """Depthwise convolution over the sequence: ``out[b, i, c] = sum_k w[b, i, h(c), k] * ext[b, i + k, c]``.

    ext: (B, n + K - 1, d), the conv input already padded (or prefixed with cached context).
    weights: (B, n, H, K) per-position kernels, or (H, K) one kernel per head for every position.
    Channel c belongs to head ``c // (d / H)``. Returns (B, n, d).

    The sequence is cut into blocks of ``block`` positions; each block's kernels form a
    (block, block + K - 1) band matrix, multiplied with the block's input window in one batched matmul.
    That is ``block + K - 1`` multiply-adds per output instead of K, but as a matmul rather than an
    unfolded (B, n, d, K) copy of the input or a depthwise conv1d, and it is faster forward+backward
    on CPU (docs/bench/kernels.md, "Banded convolution").
    """
    b, m, d = ext.shape
    h, k = weights.shape[-2:]
    n, r = m - k + 1, d // h
    c = min(block, n)
    nb = -(-n // c)
    extra = nb * c - n  # round n up to whole blocks; the extra outputs are cut off at the end
    x = F.pad(ext.view(b, m, h, r), (0, 0, 0, 0, 0, extra))
    windows = x.unfold(1, c + k - 1, c)  # (B, nb, H, R, c+K-1): overlapping windows, a view
    if weights.dim() == 2:
        # One band per head for the whole batch: (H, B*nb*R, c+K-1) @ (H, c+K-1, c).
        band = _band(weights.unsqueeze(1).expand(h, c, k), c)
        rows = windows.permute(2, 0, 1, 3, 4).reshape(h, b * nb * r, c + k - 1)
        out = (rows @ band.transpose(1, 2)).view(h, b, nb, r, c).permute(1, 2, 4, 0, 3)
    else:
        w = F.pad(weights, (0, 0, 0, 0, 0, extra)).view(b, nb, c, h, k).transpose(2, 3)  # (B, nb, H, c, K)
        out = (_band(w, c) @ windows.transpose(-1, -2)).transpose(2, 3)  # (B, nb, c, H, R)
    return out.reshape(b, nb * c, d)[:, :n]


class ConvBlock(nn.Module):
    """Input projection (GLU), masking, causal/non-causal padding, decoding cache, output projection.

    Subclasses implement ``mix(ext, u)``: ext (B, t + K - 1, d) padded conv input, u (B, t, d) the
    unpadded conv input at the t output positions -> (B, t, d).
    """

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool, dropout: float,
                 kernel_size: int, glu: bool):
        super().__init__()
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("max_len", max_len), ("kernel_size", kernel_size)):
            positive_int(name, value)
        if d_model % n_heads != 0:
            raise InputError(f"d_model={d_model} is not divisible by n_heads={n_heads}; pick n_heads that divides d_model")
        if not causal and kernel_size % 2 == 0:
            raise InputError(f"kernel_size must be odd for a non-causal conv (centred on the token), got {kernel_size}")
        if not 0.0 <= dropout < 1.0:
            raise InputError(f"dropout must be in [0, 1), got {dropout!r}")
        self.d_model, self.n_heads, self.max_len = d_model, n_heads, max_len
        self.causal, self.dropout, self.kernel_size, self.glu = causal, dropout, kernel_size, glu
        self.pad_left = kernel_size - 1 if causal else kernel_size // 2
        self.input = nn.Linear(d_model, 2 * d_model if glu else d_model)
        self.out = nn.Linear(d_model, d_model)

    def mix(self, ext: Tensor, u: Tensor) -> Tensor:
        raise NotImplementedError

    def kernel_params(self) -> int:
        raise NotImplementedError

    def param_counts(self) -> dict[str, int]:
        """Trainable parameters: the convolution kernels (or their predictor) and the two projections."""
        count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
        return {"kernel": self.kernel_params(), "input_output": count(self.input) + count(self.out)}

    def new_cache(self) -> ConvCache:
        """An empty decoding cache; pass it as ``cache=`` and feed new positions step by step."""
        if not self.causal:
            raise InputError("incremental decoding needs causal=True: a non-causal conv sees future tokens")
        return ConvCache()

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None, cache: ConvCache | None = None) -> Tensor:
        """x (B, t, d) -> (B, t, d). With ``cache``, x holds the next t positions after those cached."""
        check_mixer_input(x, self.d_model, self.max_len, key_padding_mask, None if cache is None else cache.length)
        b, t, d = x.shape
        start = 0 if cache is None else cache.length
        if cache is not None and not self.causal:
            raise InputError("a decoding cache needs causal=True")
        u = self.input(x)
        if self.glu:
            u = F.glu(u, dim=-1)
        if key_padding_mask is not None:  # padded tokens must not reach any real position
            u = u.masked_fill(key_padding_mask.unsqueeze(-1), 0.0)
        context = self.kernel_size - 1
        if cache is None:
            ext = F.pad(u, (0, 0, self.pad_left, context - self.pad_left))
        else:
            past = cache.inputs if cache.inputs is not None else u.new_zeros(b, context, d)
            ext = torch.cat([past, u], dim=1)
            cache.inputs = ext[:, ext.shape[1] - context :].clone()  # not a view that pins all of ext
            cache.length = start + t
        return self.out(self.mix(ext, u))

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, max_len={self.max_len}, "
                f"kernel_size={self.kernel_size}, causal={self.causal}, glu={self.glu}")
