"""Byte-level BPE subword tokenizer (Hugging Face `tokenizers`), trained on a training split.

Byte-level BPE has no unknown characters and decodes back to the exact input text (no lowercasing,
no normalization, spaces kept), so BLEU and ROUGE can be computed on detokenized output.
The tokenizer is saved next to the model as one `tokenizer.json`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import InputError
from .records import DataError

PAD, UNK, BOS, EOS, SEP, CLS = "<pad>", "<unk>", "<s>", "</s>", "<sep>", "<cls>"
SPECIAL_TOKENS = (PAD, UNK, BOS, EOS, SEP, CLS)  # ids 0..5, in this order
FILENAME = "tokenizer.json"


def _tokenizers():
    try:
        import tokenizers
    except ImportError:
        raise ImportError("the tokenizer needs Hugging Face `tokenizers`: pip install 'synthesizer-pytorch[train]'") from None
    return tokenizers


class Tokenizer:
    """Text <-> token ids. Special tokens: pad, unk, bos, eos, sep, cls with ids 0..5."""

    def __init__(self, hf_tokenizer) -> None:
        self._tok = hf_tokenizer
        ids = [hf_tokenizer.token_to_id(t) for t in SPECIAL_TOKENS]
        if any(i is None for i in ids):
            missing = [t for t, i in zip(SPECIAL_TOKENS, ids) if i is None]
            raise DataError(f"tokenizer lacks special tokens {missing}")
        self.pad_id, self.unk_id, self.bos_id, self.eos_id, self.sep_id, self.cls_id = ids
        self.sep_token = SEP

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2,
              extra_special: Sequence[str] = ()) -> "Tokenizer":
        """Learn a byte-level BPE vocabulary of at most `vocab_size` entries (special tokens and the
        256 byte symbols included) from `texts`. Deterministic for the same texts and settings.

        `extra_special`: more special tokens after the 6 built-in ones (ids 6, 7, ...), e.g. the
        sentinels of span corruption (`span_corruption.sentinel_tokens`); none by default, so other
        tokenizers keep their vocabulary."""
        tk = _tokenizers()
        n_base = len(SPECIAL_TOKENS) + len(extra_special) + 256
        if vocab_size < n_base:
            extra = f" + {len(extra_special)} extra special tokens" if extra_special else ""
            raise InputError(f"vocab_size must be >= {n_base} (6 special tokens{extra} + 256 bytes), got {vocab_size}")
        tok = tk.Tokenizer(tk.models.BPE(unk_token=UNK))
        # no prefix space: "a b" -> ["a", "Ġb"] decodes back to exactly "a b"
        tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = tk.decoders.ByteLevel()
        trainer = tk.trainers.BpeTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=[*SPECIAL_TOKENS, *extra_special],
            initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        texts = list(texts)
        if not texts:
            raise DataError("cannot train a tokenizer on no text (empty training split)")
        tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
        return cls(tok)

    def special_ids(self, tokens: Sequence[str]) -> list[int]:
        """Ids of the special `tokens` that this vocabulary has, in the order given (absent ones skipped)."""
        ids = [self._tok.token_to_id(t) for t in tokens]
        return [i for i in ids if i is not None]

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        ids = self._tok.encode(text, add_special_tokens=False).ids
        return ([self.bos_id] if add_bos else []) + ids + ([self.eos_id] if add_eos else [])

    def encode_batch(self, texts: list[str], add_bos: bool = False, add_eos: bool = False) -> list[list[int]]:
        """`encode` over many texts at once (runs in parallel inside `tokenizers`)."""
        encs = self._tok.encode_batch(list(texts), add_special_tokens=False)
        pre = [self.bos_id] if add_bos else []
        post = [self.eos_id] if add_eos else []
        return [pre + e.ids + post for e in encs]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`; special tokens (pad, bos, eos, ...) are dropped."""
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=True)

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        return self._tok.decode_batch([[int(i) for i in ids] for ids in batch], skip_special_tokens=True)

    def token(self, id: int) -> str:
        return self._tok.id_to_token(id)

    def save(self, directory: str | os.PathLike) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / FILENAME
        self._tok.save(str(path))
        return path

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "Tokenizer":
        path = Path(directory)
        if path.is_dir():
            path = path / FILENAME
        if not path.is_file():
            raise DataError(f"{path}: no such file (expected a tokenizer saved by Tokenizer.save)")
        return cls(_tokenizers().Tokenizer.from_file(str(path)))

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size})"
