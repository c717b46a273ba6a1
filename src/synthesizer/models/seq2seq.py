"""Encoder-decoder for translation, summarization and dialogue.

Encoder and decoder self-attention use ``config.attention`` (with a kind per layer: the list, or the
pattern cycled, in each stack); cross-attention uses
``config.cross_attention`` (``vanilla`` by default). One vocabulary for source and target; with
``tie_embeddings`` the encoder, decoder and output projection share one matrix.
"""

from __future__ import annotations

from torch import Tensor, nn

from ..attention.cross import Packed
from ..errors import InputError
from .blocks import (DecoderBlock, DecoderLayerCache, EncoderBlock, Embeddings, bias_for, count_params, fit_length,
                     format_param_counts, layer_param_counts, stack_position_bias)
from .config import ModelConfig


class EncoderDecoder(nn.Module):
    """src (B, s), tgt_in (B, t) -> logits (B, t, vocab_size). Padding masks: bool, True = padding.

    Packed rows (``packed``, ``attention.cross.Packed``): several (source, target) pairs per row, each token
    at its position in its own document; no self-attention crosses a document, and target document k of a
    row attends to source document k only, so each pair gets the logits it gets alone."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.src_embed = Embeddings(config)
        self.tgt_embed = Embeddings(config)
        encoder_kinds = config.layer_kinds(config.encoder_layers, "encoder")
        decoder_kinds = config.layer_kinds(config.decoder_layers, "decoder")
        self.encoder = nn.ModuleList(EncoderBlock(config, kind=kind) for kind in encoder_kinds)
        self.ln_enc = nn.LayerNorm(config.d_model)
        self.decoder = nn.ModuleList(DecoderBlock(config, kind=kind) for kind in decoder_kinds)
        self.ln_dec = nn.LayerNorm(config.d_model)
        # a position bias per stack (relative, alibi), shared by the layers that apply it, or None
        self.encoder_position_bias = stack_position_bias(config, encoder_kinds, causal=False)
        self.decoder_position_bias = stack_position_bias(config, decoder_kinds, causal=True)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.tgt_embed.token.weight = self.src_embed.token.weight
            self.head.weight = self.src_embed.token.weight

    def encode(self, src_ids: Tensor | None, src_padding_mask: Tensor | None = None, *,
               positions: Tensor | None = None, inputs_embeds: Tensor | None = None,
               documents: Tensor | None = None) -> Tensor:
        """src_ids (B, s) -> memory (B, s, d); or ``inputs_embeds`` (B, s, d), token embeddings (rows of
        ``src_embed.token``) instead of the ids. ``positions`` (B, s): each source token's own position
        (a left-padded source: its tokens from 0), with vanilla cross-attention only (a synthesizer
        cross-attention indexes its logits by source position, unless the decoder is given the source's
        positions, as packed rows are: ``documents`` (B, s), the packed source's document ids)."""
        if positions is not None and documents is None and self.config.cross_attention != "vanilla":
            raise InputError(f"a source with per-token positions (left-padded) needs vanilla cross-attention; "
                             f"{self.config.cross_attention!r} cross-attention indexes by source position: put the "
                             "source's padding on the right")
        if inputs_embeds is not None:
            _, src_padding_mask, positions, documents, inputs_embeds = fit_length(
                self.config, inputs_embeds[..., 0], src_padding_mask, positions, documents, inputs_embeds, what="source")
        else:
            src_ids, src_padding_mask, positions, documents = fit_length(self.config, src_ids, src_padding_mask,
                                                                         positions, documents, what="source")
        x = self.src_embed(src_ids, positions=positions, token_embeds=inputs_embeds)
        bias = bias_for(self.encoder_position_bias, 0, x.shape[1], positions)
        for block in self.encoder:
            x = block(x, src_padding_mask, None, bias, positions, documents)
        return self.ln_enc(x)

    def new_caches(self) -> list[DecoderLayerCache]:
        """One empty decoding cache per decoder layer (the memory's K/V are filled on first use)."""
        return [block.new_cache() for block in self.decoder]

    def decode(self, tgt_ids: Tensor | None, memory: Tensor | None, memory_padding_mask: Tensor | None = None,
               tgt_padding_mask: Tensor | None = None, caches: list[DecoderLayerCache] | None = None, *,
               inputs_embeds: Tensor | None = None, packed: Packed | None = None) -> Tensor:
        """tgt_ids (B, t) -> logits (B, t, V). With ``caches``, tgt_ids are the next positions and
        ``memory`` may be None once the caches hold its keys and values. ``inputs_embeds`` (B, t, d):
        token embeddings (rows of ``tgt_embed.token``) instead of ``tgt_ids``. ``packed``: packed target
        rows against the packed source rows of ``memory`` (full passes)."""
        if packed is not None and tgt_ids is not None and tgt_ids.shape[1] > self.config.max_len:
            raise InputError(f"packed target rows of {tgt_ids.shape[1]} tokens exceed max_len={self.config.max_len}")
        start = caches[0].length if caches else 0
        if inputs_embeds is not None:
            _, tgt_padding_mask, inputs_embeds = fit_length(self.config, inputs_embeds[..., 0], tgt_padding_mask,
                                                            inputs_embeds, start=start, what="target")
        else:
            tgt_ids, tgt_padding_mask = fit_length(self.config, tgt_ids, tgt_padding_mask, start=start, what="target")
        positions = None if packed is None else packed.positions
        x = self.tgt_embed(tgt_ids, start, positions=positions, token_embeds=inputs_embeds)
        bias = bias_for(self.decoder_position_bias, start, x.shape[1], positions)
        for i, block in enumerate(self.decoder):
            x = block(x, memory, memory_padding_mask, tgt_padding_mask, None if caches is None else caches[i], start,
                      bias, packed)
        return self.head(self.ln_dec(x))

    def forward(self, src_ids: Tensor, tgt_in: Tensor, src_padding_mask: Tensor | None = None,
                tgt_padding_mask: Tensor | None = None, *, packed: Packed | None = None) -> Tensor:
        if packed is not None:
            memory = self.encode(src_ids, src_padding_mask, positions=packed.memory_positions,
                                 documents=packed.memory_documents)
            if memory.shape[1] < src_ids.shape[1]:
                raise InputError(f"packed source rows of {src_ids.shape[1]} tokens exceed max_len={self.config.max_len}")
            return self.decode(tgt_in, memory, src_padding_mask, tgt_padding_mask, packed=packed)
        memory = self.encode(src_ids, src_padding_mask)
        if src_padding_mask is not None and src_padding_mask.shape[1] > memory.shape[1]:
            src_padding_mask = src_padding_mask[:, : memory.shape[1]]  # the source was truncated
        return self.decode(tgt_in, memory, src_padding_mask, tgt_padding_mask)

    def param_counts(self) -> dict[str, int]:
        """Parameters per component: embeddings, attention.<component> (encoder and decoder
        self-attention), cross_attention, ffn, norms, head."""
        blocks = [*self.encoder, *self.decoder]
        norms = [m for b in self.encoder for m in (b.ln_attn, b.ln_ffn)]
        norms += [m for b in self.decoder for m in (b.ln_attn, b.ln_cross, b.ln_ffn)] + [self.ln_enc, self.ln_dec]
        groups = {"embeddings": [self.src_embed, self.tgt_embed], "cross_attention": [b.cross for b in self.decoder],
                  "ffn": [b.ffn for b in blocks], "norms": norms, "head": [self.head]}
        biases = [m for m in (self.encoder_position_bias, self.decoder_position_bias) if m is not None]
        if biases:
            groups["position_bias"] = biases
        return count_params(self, groups, [b.attn for b in blocks])

    def layer_param_counts(self) -> list[dict]:
        """Per self-attention layer, encoder then decoder: its kind, parameters and kernel path."""
        return layer_param_counts({"encoder": self.encoder, "decoder": self.decoder})

    def param_table(self) -> str:
        return format_param_counts(self.param_counts(), self.layer_param_counts() if self.config.per_layer else None)
