"""The learned attention of a trained model, as numbers for heatmaps (stored in results.json).

For every :class:`SynthesizerAttention` layer: when all its components are input-independent
(``random``, ``fixed_random``, ``factorized_random``, as the registry says) the map is ``softmax(R)`` itself (with the
layer's causal mask), the same for every input; otherwise it is the layer's attention weights on a
fixed sample input (a sentence; on a generated corpus, its first test row, so a recall model is
read on a recall example): the probabilities the layer's forward pass used while the whole model ran (with
its real input and the position bias its stack handed it), recorded by the layer itself as ``models.record``
has it do. Maps are cut to the first ``n`` positions and rounded, to keep the JSON small.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

from ..attention import registry
from ..attention.synthesizer import SynthesizerAttention
from ..report.layer_place import layer_place

SAMPLE_TEXT = ("The state of our union is strong, and the work of the people goes on. We will build new roads "
               "and schools, and we will keep faith with the men and women who serve this country.")


def synthesizer_layers(model: nn.Module) -> list[tuple[str, SynthesizerAttention]]:
    return [(name, m) for name, m in model.named_modules() if isinstance(m, SynthesizerAttention)]


@torch.no_grad()
def attention_maps(model: nn.Module, token_ids: list[int], n: int = 24, digits: int = 3) -> list[dict]:
    """Per Synthesizer layer: ``{"layer", "stack", "index", "kind", "source", "heads": [H][n][n]}``
    (``stack``: "encoder", "decoder" or "" for a single stack; ``index``: the layer within it, from 0).

    ``token_ids``: the sample input (cut to ``n`` and to every layer's ``max_len``). The model is run
    once on it (an encoder-decoder gets it as source and as decoder input).
    """
    layers = synthesizer_layers(model)
    if not layers:
        return []
    n = max(1, min(n, len(token_ids), *(m.max_len for _, m in layers)))
    ids = torch.tensor([token_ids[:n]], dtype=torch.long)
    # each layer appends the probabilities its forward pass used (the mechanism models.record uses); a
    # recording already under way gets its lists back afterwards
    before = [layer.attention_maps for _, layer in layers]
    for _, layer in layers:
        layer.attention_maps = []
    was_training = model.training
    model.eval()
    try:
        if "tgt_in" in inspect.signature(model.forward).parameters:
            model(ids, ids)
        else:
            model(ids)
        recorded = [(name, layer, layer.attention_maps) for name, layer in layers]
    finally:
        for (_, layer), maps in zip(layers, before):
            layer.attention_maps = maps
        model.train(was_training)

    maps = []
    for name, layer, probs in recorded:
        if not probs:  # a layer the forward pass skipped (e.g. a decoder run without targets)
            continue
        fixed = all(registry.spec(c).input_independent for c in layer.components)
        stack, index = layer_place(name)
        maps.append({"layer": name, "stack": stack, "index": index, "kind": layer.kind,
                     "source": "softmax(R), the same for every input" if fixed else "sample input",
                     "heads": [[[round(float(v), digits) for v in row] for row in head] for head in probs[0][0]]})
    return maps


def sample_text(cfg) -> str:
    """The sample a run's maps are read on: the first test row of a generated corpus (its words are the only
    ones its fixed vocabulary knows), else ``SAMPLE_TEXT``. ``cfg``: the run's config, or None."""
    from ..data.generated import GENERATED, generate_corpus

    corpus = (getattr(cfg, "data", None) or {}).get("corpus")
    if corpus in GENERATED and GENERATED[corpus].answers:
        return generate_corpus(corpus).splits["test"][0]["text"]
    return SAMPLE_TEXT


def run_attention_maps(run_dir, load_trained, n: int = 24) -> list[dict]:
    """Load the best checkpoint of ``run_dir`` with ``load_trained`` and return its attention maps."""
    model, tokenizer, cfg = load_trained(run_dir)
    return attention_maps(model, tokenizer.encode(sample_text(cfg)), n=n)
