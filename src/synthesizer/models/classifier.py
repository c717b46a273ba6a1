"""Encoder classifier for single texts and text pairs (GLUE style), classification or regression.

Text pairs are joined by the caller as ``[CLS] a [SEP] b [SEP]`` with ``segment_ids`` 0 for the
first part and 1 for the second. Pooling (``config.pooling``): ``"mean"`` (default) averages the
final states of the real tokens, ``"first"`` takes the first token's state.

Packed rows (``data/packing.py``): several inputs per row, each token with its position in its own input
and its input's id (``documents``, -1 on padding); no attention crosses an input, each input is pooled on
its own, and the output has one row per input, row by row and within a row in the order of the ids.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..errors import InputError
from .blocks import (EncoderBlock, Embeddings, bias_for, fit_length, format_param_counts, layer_param_counts,
                     stack_param_counts, stack_position_bias)
from .config import ModelConfig


class Classifier(nn.Module):
    """input_ids (B, n) -> logits (B, n_classes), or scores (B,) when ``n_classes == 1`` (regression)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embed = Embeddings(config, segments=True)
        kinds = config.layer_kinds(config.encoder_layers, "encoder")
        self.blocks = nn.ModuleList(EncoderBlock(config, kind=kind) for kind in kinds)
        self.ln_f = nn.LayerNorm(config.d_model)
        self.position_bias = stack_position_bias(config, kinds, causal=False)  # shared by the blocks, or None
        self.drop = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.d_model, config.n_classes)

    def forward(self, input_ids: Tensor | None, padding_mask: Tensor | None = None, segment_ids: Tensor | None = None, *,
                inputs_embeds: Tensor | None = None, positions: Tensor | None = None,
                documents: Tensor | None = None) -> Tensor:
        """``inputs_embeds`` (B, n, d): token embeddings (rows of ``embed.token``) instead of ``input_ids``;
        ``positions`` and ``documents`` (B, n): packed rows (then one output per input, see above)."""
        x, padding_mask = self.encode(input_ids, padding_mask, segment_ids, inputs_embeds=inputs_embeds,
                                      positions=positions, documents=documents)
        if documents is not None:
            pooled = pool_documents(x, documents[:, : x.shape[1]], self.config.pooling)
        elif self.config.pooling == "first":
            pooled = x[:, 0]
        elif padding_mask is None:
            pooled = x.mean(dim=1)
        else:
            keep = (~padding_mask).unsqueeze(-1).to(x.dtype)
            pooled = (x * keep).sum(dim=1) / keep.sum(dim=1).clamp_min(1.0)
        out = self.head(self.drop(pooled))
        return out.squeeze(-1) if self.config.n_classes == 1 else out

    def encode(self, input_ids: Tensor | None, padding_mask: Tensor | None = None, segment_ids: Tensor | None = None,
               *, inputs_embeds: Tensor | None = None, positions: Tensor | None = None,
               documents: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """The final hidden states (B, n, d), after the last LayerNorm (the forward without pooling and
        head), and the padding mask cut as the input was (``on_too_long="truncate"``)."""
        if inputs_embeds is not None:
            _, padding_mask, segment_ids, positions, documents, inputs_embeds = fit_length(
                self.config, inputs_embeds[..., 0], padding_mask, segment_ids, positions, documents, inputs_embeds)
        else:
            input_ids, padding_mask, segment_ids, positions, documents = fit_length(
                self.config, input_ids, padding_mask, segment_ids, positions, documents)
        x = self.embed(input_ids, segment_ids=segment_ids, token_embeds=inputs_embeds, positions=positions)
        bias = bias_for(self.position_bias, 0, x.shape[1], positions)
        for block in self.blocks:
            x = block(x, padding_mask, None, bias, positions, documents)
        return self.ln_f(x), padding_mask

    def load_encoder(self, source: nn.Module) -> None:
        """Copy the encoder of an encoder-decoder ``source`` (``models/seq2seq.py``) into this classifier:
        the token (and learned position) embeddings, the encoder's position bias (relative), every encoder
        block and the final encoder norm. The
        segment embeddings and the head keep their fresh values (pretraining has neither). The two must
        have the same vocabulary, width, heads, layers, feed-forward size, positions and attention."""
        if len(self.blocks) != len(source.encoder):
            raise InputError(f"the classifier has {len(self.blocks)} encoder layers, the source {len(source.encoder)}")
        pairs = [(self.embed.token, source.src_embed.token), (self.ln_f, source.ln_enc),
                 *zip(self.blocks, source.encoder)]
        if (self.embed.position is None) != (source.src_embed.position is None):
            raise InputError("the classifier and the source use different position encodings")
        if self.embed.position is not None:
            pairs.append((self.embed.position, source.src_embed.position))
        if type(self.position_bias) is not type(source.encoder_position_bias):  # noqa: E721 (relative, alibi, None)
            raise InputError("the classifier and the source use different position schemes")
        if self.position_bias is not None:
            pairs.append((self.position_bias, source.encoder_position_bias))
        for mine, theirs in pairs:
            mine.load_state_dict(theirs.state_dict())  # strict: a missing key or another shape raises

    def param_counts(self) -> dict[str, int]:
        """Parameters per component: embeddings, attention.<component>, ffn, norms, head."""
        return stack_param_counts(self)

    def layer_param_counts(self) -> list[dict]:
        """Per attention layer: its kind, parameters and kernel path (``blocks.layer_param_counts``)."""
        return layer_param_counts({"blocks": self.blocks})

    def param_table(self) -> str:
        return format_param_counts(self.param_counts(), self.layer_param_counts() if self.config.per_layer else None)


def pool_documents(x: Tensor, documents: Tensor, pooling: str) -> Tensor:
    """(inputs, d): one pooled state per input of packed rows: x (B, n, d), ``documents`` (B, n) each
    token's input id within its row (0, 1, ... in order; -1 on padding). ``"first"``: the state of each
    input's first token; ``"mean"``: the mean over its tokens. Inputs ordered row by row, then by id."""
    real = documents >= 0
    counts = (documents.amax(dim=1) + 1).clamp(min=0)  # inputs per row
    if pooling == "first":
        previous = torch.cat([documents.new_full((documents.shape[0], 1), -1), documents[:, :-1]], dim=1)
        return x[real & (documents != previous)]
    index = (documents + (counts.cumsum(0) - counts).unsqueeze(1))[real]
    total = int(counts.sum())
    sums = x.new_zeros(total, x.shape[-1]).index_add_(0, index, x[real])
    sizes = torch.bincount(index, minlength=total).clamp(min=1).to(x.dtype)
    return sums / sizes.unsqueeze(1)
