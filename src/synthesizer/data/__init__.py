"""Data: built-in corpora, local files and hub datasets -> records -> tokenizer -> batches."""

from .batching import LengthBucketSampler, length_batches, lm_blocks, pad_sequences
from .hub import HUB, load_hub
from .records import SPLITS, TASKS, TURN_SEP, Corpus, DataError
from .sources import BUILTIN, data_roots, dialogue_pairs, load_corpus, load_files
from .tokenizer import Tokenizer

__all__ = [
    "BUILTIN", "HUB", "SPLITS", "TASKS", "TURN_SEP", "Corpus", "DataError", "LengthBucketSampler",
    "Tokenizer", "data_roots", "dialogue_pairs", "length_batches", "lm_blocks", "load_corpus",
    "load_files", "load_hub", "pad_sequences",
]
