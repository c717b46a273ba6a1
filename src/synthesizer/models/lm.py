"""Decoder-only language model: embeddings, causal pre-LN blocks, final LayerNorm, (tied) LM head."""

from __future__ import annotations

from torch import Tensor, nn

from .blocks import (EncoderBlock, Embeddings, bias_for, cached_positions, fit_length, format_param_counts,
                     stack_param_counts, stack_position_bias, token_positions)
from .config import ModelConfig


class LanguageModel(nn.Module):
    """input_ids (B, n) -> next-token logits (B, n, vocab_size).

    Inputs are left-aligned (padding on the right): positions are absolute and the Synthesizer
    logits are indexed by them. With ``caches`` (from ``new_caches()``) the ids are the next
    positions after those already cached. ``positions`` (B, n) gives each token its own position
    instead (a left-padded row: the padding first, the real tokens from 0), in the embeddings and in
    every attention layer; the caches keep them, and later ids given none continue each row.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embed = Embeddings(config)
        self.blocks = nn.ModuleList(EncoderBlock(config, causal=True) for _ in range(config.n_layers))
        self.position_bias = stack_position_bias(config, causal=True)  # shared by the blocks, or None
        self.ln_f = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.head.weight = self.embed.token.weight

    def new_caches(self) -> list:
        """One empty decoding cache per layer."""
        return [block.attn.new_cache() for block in self.blocks]

    def forward(self, input_ids: Tensor, padding_mask: Tensor | None = None, caches: list | None = None,
                positions: Tensor | None = None) -> Tensor:
        """Next-token logits (B, n, vocab)."""
        return self.head(self.hidden_states(input_ids, padding_mask, caches, positions))

    def hidden_states(self, input_ids: Tensor, padding_mask: Tensor | None = None,
                      caches: list | None = None, positions: Tensor | None = None) -> Tensor:
        """The final hidden states (B, n, d), after the last LayerNorm: the forward without its head."""
        start = caches[0].length if caches else 0
        input_ids, padding_mask, positions = fit_length(self.config, input_ids, padding_mask, positions, start=start)
        positions = token_positions(positions, caches, input_ids.shape[1])
        x = self.embed(input_ids, start, positions=positions)
        bias = bias_for(self.position_bias, start, input_ids.shape[1], positions, cached_positions(caches))
        for i, block in enumerate(self.blocks):
            x = block(x, padding_mask, None if caches is None else caches[i], bias, positions)
        return self.ln_f(x)

    def param_counts(self) -> dict[str, int]:
        """Parameters per component: embeddings, attention.<component>, ffn, norms, head."""
        return stack_param_counts(self)

    def param_table(self) -> str:
        return format_param_counts(self.param_counts())
