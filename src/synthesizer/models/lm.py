"""Decoder-only language model: embeddings, causal pre-LN blocks, final LayerNorm, (tied) LM head."""

from __future__ import annotations

from torch import Tensor, nn

from .blocks import EncoderBlock, Embeddings, stack_param_counts, fit_length, format_param_counts
from .config import ModelConfig


class LanguageModel(nn.Module):
    """input_ids (B, n) -> next-token logits (B, n, vocab_size).

    Inputs are left-aligned (padding on the right): positions are absolute and the Synthesizer
    logits are indexed by them. With ``caches`` (from ``new_caches()``) the ids are the next
    positions after those already cached.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embed = Embeddings(config)
        self.blocks = nn.ModuleList(EncoderBlock(config, causal=True) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.head.weight = self.embed.token.weight

    def new_caches(self) -> list:
        """One empty decoding cache per layer."""
        return [block.attn.new_cache() for block in self.blocks]

    def forward(self, input_ids: Tensor | None, padding_mask: Tensor | None = None, caches: list | None = None, *,
                inputs_embeds: Tensor | None = None) -> Tensor:
        """Next-token logits (B, n, vocab)."""
        return self.head(self.hidden_states(input_ids, padding_mask, caches, inputs_embeds=inputs_embeds))

    def hidden_states(self, input_ids: Tensor | None, padding_mask: Tensor | None = None,
                      caches: list | None = None, *, inputs_embeds: Tensor | None = None) -> Tensor:
        """The final hidden states (B, n, d), after the last LayerNorm: the forward without its head.
        ``inputs_embeds`` (B, n, d): token embeddings (rows of ``embed.token``) instead of ``input_ids``."""
        start = caches[0].length if caches else 0
        if inputs_embeds is not None:
            _, padding_mask, inputs_embeds = fit_length(self.config, inputs_embeds[..., 0], padding_mask, inputs_embeds,
                                                        start=start)
        else:
            input_ids, padding_mask = fit_length(self.config, input_ids, padding_mask, start=start)
        x = self.embed(input_ids, start, token_embeds=inputs_embeds)
        for i, block in enumerate(self.blocks):
            x = block(x, padding_mask, None if caches is None else caches[i])
        return self.ln_f(x)

    def param_counts(self) -> dict[str, int]:
        """Parameters per component: embeddings, attention.<component>, ffn, norms, head."""
        return stack_param_counts(self)

    def param_table(self) -> str:
        return format_param_counts(self.param_counts())
