"""Data: built-in corpora, local files and hub datasets -> records -> tokenizer -> batches.

The names below are imported on first use (PEP 562), so that the torch-free modules (the records, the
generated corpora's names, which the report reads) are imported without the batching's torch.
"""

from ..lazy import lazy_exports

__all__ = [
    "BUILTIN", "HUB", "SPLITS", "TASKS", "TURN_SEP", "Corpus", "DataError", "LengthBucketSampler",
    "Tokenizer", "data_roots", "dialogue_pairs", "length_batches", "lm_blocks", "load_corpus",
    "load_files", "load_hub", "pad_sequences",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    **dict.fromkeys(("LengthBucketSampler", "length_batches", "lm_blocks", "pad_sequences"), "batching"),
    **dict.fromkeys(("HUB", "load_hub"), "hub"),
    **dict.fromkeys(("SPLITS", "TASKS", "TURN_SEP", "Corpus", "DataError"), "records"),
    **dict.fromkeys(("BUILTIN", "data_roots", "dialogue_pairs", "load_corpus", "load_files"), "sources"),
    "Tokenizer": "tokenizer"})
