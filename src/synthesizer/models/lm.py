"""Decoder-only language model: embeddings, causal pre-LN blocks, final LayerNorm, (tied) LM head."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .blocks import (EncoderBlock, Embeddings, bias_for, cached_positions, fit_length, format_param_counts,
                     layer_param_counts, stack_param_counts, stack_position_bias, token_positions)
from .config import ModelConfig


class LanguageModel(nn.Module):
    """input_ids (B, n) -> next-token logits (B, n, vocab_size).

    Inputs are left-aligned (padding on the right): positions are absolute and the Synthesizer
    logits are indexed by them. With ``caches`` (from ``new_caches()``) the ids are the next
    positions after those already cached. ``positions`` (B, n) gives each token its own position
    instead (a left-padded row: the padding first, the real tokens from 0), in the embeddings and in
    every attention layer; the caches keep them, and later ids given none continue each row.
    Packed rows (``data/packing.py``): ``positions`` restarting at 0 at each document and ``documents``
    (B, n), each token's document id: no token attends to another document's, so each document's logits
    are those it gets alone. The same per-token positions serve both.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embed = Embeddings(config)
        kinds = config.layer_kinds(config.n_layers)
        self.blocks = nn.ModuleList(EncoderBlock(config, causal=True, kind=kind) for kind in kinds)
        self.position_bias = stack_position_bias(config, kinds, causal=True)  # shared by the blocks, or None
        self.ln_f = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.head.weight = self.embed.token.weight

    def new_caches(self) -> list:
        """One empty decoding cache per layer, each of its layer's kind (values only without vanilla)."""
        return [block.attn.new_cache() for block in self.blocks]

    def forward(self, input_ids: Tensor | None, padding_mask: Tensor | None = None, caches: list | None = None, *,
                positions: Tensor | None = None, inputs_embeds: Tensor | None = None,
                documents: Tensor | None = None, logits_at: Tensor | None = None) -> Tensor:
        """Next-token logits (B, n, vocab); with ``logits_at``, a boolean (B, n) mask, only those
        positions' logits (k, vocab), row by row: where few positions are scored (the diagnostics'
        answers) the head over every position would cost as much as the blocks at small widths."""
        hidden = self.hidden_states(input_ids, padding_mask, caches, positions=positions,
                                    inputs_embeds=inputs_embeds, documents=documents)
        if logits_at is not None:
            if logits_at.shape != hidden.shape[:2] or logits_at.dtype != torch.bool:
                raise ValueError(f"logits_at must be a boolean mask of shape {tuple(hidden.shape[:2])} (batch, "
                                 f"length), got {logits_at.dtype} {tuple(logits_at.shape)}")
            hidden = hidden[logits_at]
        return self.head(hidden)

    def hidden_states(self, input_ids: Tensor | None, padding_mask: Tensor | None = None,
                      caches: list | None = None, *, positions: Tensor | None = None,
                      inputs_embeds: Tensor | None = None, documents: Tensor | None = None) -> Tensor:
        """The final hidden states (B, n, d), after the last LayerNorm: the forward without its head.
        ``inputs_embeds`` (B, n, d): token embeddings (rows of ``embed.token``) instead of ``input_ids``."""
        start = caches[0].length if caches else 0
        if inputs_embeds is not None:
            _, padding_mask, positions, documents, inputs_embeds = fit_length(
                self.config, inputs_embeds[..., 0], padding_mask, positions, documents, inputs_embeds, start=start)
        else:
            input_ids, padding_mask, positions, documents = fit_length(self.config, input_ids, padding_mask, positions,
                                                                       documents, start=start)
        n = (input_ids if inputs_embeds is None else inputs_embeds).shape[1]
        positions = token_positions(positions, caches, n)
        x = self.embed(input_ids, start, positions=positions, token_embeds=inputs_embeds)
        bias = bias_for(self.position_bias, start, n, positions, cached_positions(caches))
        for i, block in enumerate(self.blocks):
            x = block(x, padding_mask, None if caches is None else caches[i], bias, positions, documents)
        return self.ln_f(x)

    def param_counts(self) -> dict[str, int]:
        """Parameters per component: embeddings, attention.<component>, ffn, norms, head."""
        return stack_param_counts(self)

    def layer_param_counts(self) -> list[dict]:
        """Per attention layer: its kind, parameters and kernel path (``blocks.layer_param_counts``)."""
        return layer_param_counts({"blocks": self.blocks})

    def param_table(self) -> str:
        return format_param_counts(self.param_counts(), self.layer_param_counts() if self.config.per_layer else None)
