"""Dynamic convolution (Wu et al. 2019): like lightweight convolution, but position i's (H, K) kernel
is predicted from the conv input at i by a linear layer, then softmax-normalised over its K taps."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .conv_common import ConvBlock, banded_conv


class DynamicConv(ConvBlock):
    """Token mixer ``y = conv_{W(u_i)}(u) W_O + b_O`` with ``u = GLU(x W_I + b_I)``, ``W(u_i) = u_i W_K + b_K``.

    Args:
        d_model, n_heads, max_len, causal: as for ``SynthesizerAttention`` (max_len only bounds the input).
        dropout: dropout on the normalised per-position kernels (the paper's weight dropout).
        kernel_size: K, odd unless causal. weight_softmax: softmax-normalise each kernel over its K taps.
        glu: GLU input projection (d -> 2d -> d); False for a plain linear one (d -> d).
    Input ``x``: (batch, seq, d_model); ``key_padding_mask``: (batch, seq) bool, True = padding.
    """

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, dropout: float = 0.0, *,
                 kernel_size: int = 31, weight_softmax: bool = True, glu: bool = True):
        super().__init__(d_model, n_heads, max_len, causal, dropout, kernel_size, glu)
        self.weight_softmax = weight_softmax
        self.kernel_linear = nn.Linear(d_model, n_heads * kernel_size)  # d -> H*K, applied per token

    def kernels(self, u: Tensor) -> Tensor:
        """(B, t, d) conv inputs -> their (B, t, H, K) kernels, normalised and dropped out."""
        w = self.kernel_linear(u).unflatten(-1, (self.n_heads, self.kernel_size))
        w = torch.softmax(w, dim=-1) if self.weight_softmax else w
        return F.dropout(w, self.dropout, self.training)

    def kernel_params(self) -> int:
        return sum(p.numel() for p in self.kernel_linear.parameters())

    def mix(self, ext: Tensor, u: Tensor) -> Tensor:
        return banded_conv(ext, self.kernels(u), self.n_heads)
