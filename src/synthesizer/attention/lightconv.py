"""Lightweight convolution (Wu et al. 2019): a depthwise convolution over the sequence whose kernel is
a learned, softmax-normalised (H, K) weight shared by the d/H channels of each head."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .conv_common import ConvBlock, banded_conv


class LightweightConv(ConvBlock):
    """Token mixer ``y = conv_W(GLU(x W_I + b_I)) W_O + b_O`` with one kernel per head.

    Args:
        d_model, n_heads, max_len, causal: as for ``SynthesizerAttention`` (max_len only bounds the input).
        dropout: DropConnect on the normalised kernel (the paper's weight dropout).
        kernel_size: K, odd unless causal. weight_softmax: softmax-normalise each kernel over its K taps.
        glu: GLU input projection (d -> 2d -> d); False for a plain linear one (d -> d).
    Input ``x``: (batch, seq, d_model); ``key_padding_mask``: (batch, seq) bool, True = padding.
    """

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, dropout: float = 0.0, *,
                 kernel_size: int = 31, weight_softmax: bool = True, glu: bool = True):
        super().__init__(d_model, n_heads, max_len, causal, dropout, kernel_size, glu)
        self.weight_softmax = weight_softmax
        self.weight = nn.Parameter(torch.empty(n_heads, kernel_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.weight)

    def kernel(self) -> Tensor:
        """The (H, K) kernel as applied: normalised, then dropped out while training."""
        w = torch.softmax(self.weight, dim=-1) if self.weight_softmax else self.weight
        return F.dropout(w, self.dropout, self.training)

    def kernel_params(self) -> int:
        return self.weight.numel()

    def mix(self, ext: Tensor, u: Tensor) -> Tensor:
        return banded_conv(ext, self.kernel(), self.n_heads)
