"""Encoder classifier for single texts and text pairs (GLUE style), classification or regression.

Text pairs are joined by the caller as ``[CLS] a [SEP] b [SEP]`` with ``segment_ids`` 0 for the
first part and 1 for the second. Pooling (``config.pooling``): ``"mean"`` (default) averages the
final states of the real tokens, ``"first"`` takes the first token's state.
"""

from __future__ import annotations

from torch import Tensor, nn

from .blocks import EncoderBlock, Embeddings, stack_param_counts, fit_length, format_param_counts
from .config import ModelConfig


class Classifier(nn.Module):
    """input_ids (B, n) -> logits (B, n_classes), or scores (B,) when ``n_classes == 1`` (regression)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embed = Embeddings(config, segments=True)
        self.blocks = nn.ModuleList(EncoderBlock(config) for _ in range(config.encoder_layers))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.d_model, config.n_classes)

    def forward(self, input_ids: Tensor | None, padding_mask: Tensor | None = None, segment_ids: Tensor | None = None, *,
                inputs_embeds: Tensor | None = None) -> Tensor:
        """``inputs_embeds`` (B, n, d): token embeddings (rows of ``embed.token``) instead of ``input_ids``."""
        x, padding_mask = self.encode(input_ids, padding_mask, segment_ids, inputs_embeds=inputs_embeds)
        if self.config.pooling == "first":
            pooled = x[:, 0]
        elif padding_mask is None:
            pooled = x.mean(dim=1)
        else:
            keep = (~padding_mask).unsqueeze(-1).to(x.dtype)
            pooled = (x * keep).sum(dim=1) / keep.sum(dim=1).clamp_min(1.0)
        out = self.head(self.drop(pooled))
        return out.squeeze(-1) if self.config.n_classes == 1 else out

    def encode(self, input_ids: Tensor | None, padding_mask: Tensor | None = None, segment_ids: Tensor | None = None,
               *, inputs_embeds: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """The final hidden states (B, n, d), after the last LayerNorm (the forward without pooling and
        head), and the padding mask cut as the input was (``on_too_long="truncate"``)."""
        if inputs_embeds is not None:
            _, padding_mask, segment_ids, inputs_embeds = fit_length(self.config, inputs_embeds[..., 0], padding_mask,
                                                                     segment_ids, inputs_embeds)
        else:
            input_ids, padding_mask, segment_ids = fit_length(self.config, input_ids, padding_mask, segment_ids)
        x = self.embed(input_ids, segment_ids=segment_ids, token_embeds=inputs_embeds)
        for block in self.blocks:
            x = block(x, padding_mask)
        return self.ln_f(x), padding_mask

    def load_encoder(self, source: nn.Module) -> None:
        """Copy the encoder of an encoder-decoder ``source`` (``models/seq2seq.py``) into this classifier:
        the token (and learned position) embeddings, every encoder block and the final encoder norm. The
        segment embeddings and the head keep their fresh values (pretraining has neither). The two must
        have the same vocabulary, width, heads, layers, feed-forward size, positions and attention."""
        if len(self.blocks) != len(source.encoder):
            raise ValueError(f"the classifier has {len(self.blocks)} encoder layers, the source {len(source.encoder)}")
        pairs = [(self.embed.token, source.src_embed.token), (self.ln_f, source.ln_enc),
                 *zip(self.blocks, source.encoder)]
        if (self.embed.position is None) != (source.src_embed.position is None):
            raise ValueError("the classifier and the source use different position encodings")
        if self.embed.position is not None:
            pairs.append((self.embed.position, source.src_embed.position))
        for mine, theirs in pairs:
            mine.load_state_dict(theirs.state_dict())  # strict: a missing key or another shape raises

    def param_counts(self) -> dict[str, int]:
        """Parameters per component: embeddings, attention.<component>, ffn, norms, head."""
        return stack_param_counts(self)

    def param_table(self) -> str:
        return format_param_counts(self.param_counts())
