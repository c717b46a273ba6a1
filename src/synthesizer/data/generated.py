"""Generated corpora: ListOps (Long Range Arena) and diagnostic tasks, made on load from a fixed seed.

Each is a built-in corpus name (``listops-256``, ``diag-recall`` ...) that ``load_corpus`` generates
instead of reading files. A name, rather than a ``data: {generate: ...}`` section, keeps a generated
data set a fixed benchmark like a shared corpus: every variant, seed and machine gets the same
examples, the config schema is unchanged, and provenance hashes, run folders and ``compare`` treat it
like any other corpus. Different data (another seed, size or length) is another function call
(:func:`listops_split`, :func:`diagnostic_split`) or another registered name.

Tokens are whitespace-separated words of a small fixed vocabulary (:func:`fixed_tokenizer`), not the
byte-level BPE trained on the train split: a generated sequence then has exactly as many tokens as
words, so the length limits hold in model positions, and no merge can fuse an operator with a digit.

**ListOps** (Nangia & Bowman 2018, as used by Tay et al. 2020, "Long Range Arena"): a nested list of
operators ``[MAX``, ``[MIN``, ``[MED`` (median, rounded down as LRA's integer median does) and ``[SM``
(sum mod 10) over digits 0-9, each closed by ``]``; the label is the value (0-9), a 10-class
classification. A node below the maximum depth (10) is an operator with probability 0.25, with 2 to
10 (uniform) arguments, else a digit; the root is drawn the same way. Trees whose token count falls
outside ``[min_len, max_len]`` are drawn again (LRA's length filter); a draw stops as soon as it passes
``max_len``, so a long tree costs no more than ``max_len`` tokens.

**Diagnostics** (causal language modelling, scored at answer positions; see ``tasks/answer_lm.py``):

* ``diag-recall``: 8 key-value pairs (distinct keys ``k*``, values ``v*``), ``?``, a key, its value.
* ``diag-mqar``: the multi-query version: the same pairs, ``?``, then 4 distinct keys each followed
  by its value (every answer is scored), 25 tokens.
* ``diag-mqar-long``: the same task at twice the length: 16 pairs (every key once), ``?``, 8 queries,
  49 tokens. Its vocabulary is ``diag-mqar``'s, so only the length and the number of pairs to hold differ.
* ``diag-copy``: 4-12 symbols, ``|``, the same symbols again. The copy offset depends on where ``|``
  is, so a model must find it by content.
* ``diag-reverse``: 12 symbols, ``|``, the same symbols reversed. The length is fixed, so output
  position i always reads input position 11 - i: input-independent attention suffices.
* ``diag-mqar-zoology-64`` and ``diag-mqar-zoology-128``: multi-query associative recall as Zoology
  (Arora et al., 2023) sets it, scaled to a CPU: a vocabulary of 1,024 (512 keys ``a*``, 512 values
  ``b*``), sequences of exactly 64 or 128 tokens. A row holds 4, 8 or 16 key-value pairs (drawn
  uniformly), then the rest of the sequence in two-token slots: every key is queried once, in a random
  slot and order (its value follows it and is scored), and the other slots hold random tokens of the
  whole vocabulary (Zoology's noise). Zoology spaces its queries by a power law; here the slots are
  uniform. Chance: 1/512.
* ``diag-lookup``: recall in one step: 8 key-value pairs, each one token (``k3=v5``), ``?``, a key, its
  value. Finding the pair is content-based lookup (its position varies), but a layer's attention
  reaches it directly: one query-key match, where ``diag-recall`` needs two (the value's position from
  its key's), so a small vanilla model learns it in a few hundred steps. Its vocabulary adds the 256
  pair tokens to ``VOCAB``.

A row of a diagnostic corpus is ``{"text": "k3 v5 ... ? k3 v5", "answers": [positions]}``: the
positions (0-based, in words) of the tokens a model is scored on.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Callable

from ..errors import InputError
from .records import Corpus

LISTOPS_OPS = ("[MAX", "[MIN", "[MED", "[SM")
CLOSE = "]"
DIGITS = tuple(str(d) for d in range(10))
LISTOPS_MAX_DEPTH = 10
LISTOPS_MAX_ARGS = 10
LISTOPS_OP_PROB = 0.25  # probability that a node above the depth limit is an operator

N_SYMBOLS = 16
KEYS = tuple(f"k{i}" for i in range(N_SYMBOLS))
VALUES = tuple(f"v{i}" for i in range(N_SYMBOLS))  # recall values; copy and reversal symbols
QUERY, DELIM = "?", "|"
DIAGNOSTICS = ("recall", "mqar", "mqar-long", "copy", "reverse", "lookup", "mqar-zoology-64", "mqar-zoology-128")
DIAGNOSTIC_CORPORA = tuple(f"diag-{kind}" for kind in DIAGNOSTICS)  # their registered corpus names

VOCAB = (*LISTOPS_OPS, CLOSE, *DIGITS, *KEYS, *VALUES, QUERY, DELIM)
PAIRS = tuple(f"{k}={v}" for k in KEYS for v in VALUES)  # a key-value pair as one token (diag-lookup)
ZOOLOGY_KEYS = tuple(f"a{i}" for i in range(512))
ZOOLOGY_VALUES = tuple(f"b{i}" for i in range(512))
ZOOLOGY_VOCAB = (*ZOOLOGY_KEYS, *ZOOLOGY_VALUES)  # 1,024 words (Zoology uses 8,192)
ZOOLOGY_PAIRS = (4, 8, 16)


def _rng(kind: str, split: str, seed: int) -> random.Random:
    # a string seed is hashed the same way on every platform and Python run
    return random.Random(f"{kind}:{split}:{seed}")


# ----------------------------------------------------------------------------- ListOps

def listops_value(op: str, args: list[int]) -> int:
    """The value of one operator over its argument values."""
    if op == "[MAX":
        return max(args)
    if op == "[MIN":
        return min(args)
    if op == "[SM":
        return sum(args) % 10
    if op == "[MED":
        s, n = sorted(args), len(args)
        return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) // 2
    raise ValueError(f"unknown ListOps operator {op!r}; allowed: {', '.join(LISTOPS_OPS)}")


class _TooLong(Exception):
    pass


def _draw_tree(rng: random.Random, depth: int, out: list[str], max_len: int) -> int:
    """Append one (sub)tree's tokens to ``out``, return its value; _TooLong once ``out`` passes max_len."""
    if depth >= LISTOPS_MAX_DEPTH or rng.random() >= LISTOPS_OP_PROB:
        digit = rng.randrange(10)
        out.append(DIGITS[digit])
        if len(out) > max_len:
            raise _TooLong
        return digit
    op = rng.choice(LISTOPS_OPS)
    out.append(op)
    args = [_draw_tree(rng, depth + 1, out, max_len) for _ in range(rng.randint(2, LISTOPS_MAX_ARGS))]
    out.append(CLOSE)
    if len(out) > max_len:
        raise _TooLong
    return listops_value(op, args)


def listops_example(rng: random.Random, min_len: int, max_len: int) -> dict:
    """One ``{"text", "label"}`` ListOps example with ``min_len <= tokens <= max_len``."""
    while True:
        tokens: list[str] = []
        try:
            value = _draw_tree(rng, 1, tokens, max_len)
        except _TooLong:
            continue
        if len(tokens) >= min_len:
            return {"text": " ".join(tokens), "label": value}


def listops_split(n: int, min_len: int, max_len: int, seed: int = 0, split: str = "train") -> list[dict]:
    """``n`` ListOps examples, deterministic given (seed, split); lengths in tokens (words)."""
    if not 1 <= min_len <= max_len:
        raise InputError(f"ListOps lengths must satisfy 1 <= min_len <= max_len, got {min_len}, {max_len}")
    rng = _rng("listops", split, seed)
    return [listops_example(rng, min_len, max_len) for _ in range(n)]


# ----------------------------------------------------------------------------- diagnostics

def _row(tokens: list[str], answers: list[int]) -> dict:
    return {"text": " ".join(tokens), "answers": answers}


def recall_example(rng: random.Random, n_pairs: int = 8, n_queries: int = 1) -> dict:
    """Key-value pairs, ``?``, then ``n_queries`` distinct keys each followed by its value (the answers)."""
    keys = rng.sample(range(N_SYMBOLS), n_pairs)
    values = [rng.randrange(N_SYMBOLS) for _ in keys]
    tokens = [tok for k, v in zip(keys, values) for tok in (KEYS[k], VALUES[v])] + [QUERY]
    answers = []
    for q in rng.sample(range(n_pairs), n_queries):
        tokens.append(KEYS[keys[q]])
        answers.append(len(tokens))
        tokens.append(VALUES[values[q]])
    return _row(tokens, answers)


def lookup_example(rng: random.Random, n_pairs: int = 8) -> dict:
    """Key-value pairs as single tokens (``k3=v5``), ``?``, a key, its value (the answer)."""
    keys = rng.sample(range(N_SYMBOLS), n_pairs)
    values = [rng.randrange(N_SYMBOLS) for _ in keys]
    q = rng.randrange(n_pairs)
    tokens = [f"{KEYS[k]}={VALUES[v]}" for k, v in zip(keys, values)] + [QUERY, KEYS[keys[q]], VALUES[values[q]]]
    return _row(tokens, [len(tokens) - 1])


def zoology_mqar_example(rng: random.Random, length: int, pair_choices: tuple[int, ...] = ZOOLOGY_PAIRS) -> dict:
    """Zoology's MQAR in ``length`` tokens: key-value pairs, then two-token slots in which every key is
    queried once (key, then its value: the answer) among noise pairs of random tokens."""
    n = rng.choice(pair_choices)
    slots = (length - 2 * n) // 2
    if slots < n or length % 2:
        raise InputError(f"{n} pairs and their {n} queries do not fit in {length} tokens (an even length >= {4 * n})")
    keys = rng.sample(range(len(ZOOLOGY_KEYS)), n)
    values = [rng.randrange(len(ZOOLOGY_VALUES)) for _ in keys]
    tokens = [tok for k, v in zip(keys, values) for tok in (ZOOLOGY_KEYS[k], ZOOLOGY_VALUES[v])]
    body = [ZOOLOGY_VOCAB[rng.randrange(len(ZOOLOGY_VOCAB))] for _ in range(2 * slots)]
    answers = []
    for q, slot in zip(rng.sample(range(n), n), sorted(rng.sample(range(slots), n))):
        body[2 * slot], body[2 * slot + 1] = ZOOLOGY_KEYS[keys[q]], ZOOLOGY_VALUES[values[q]]
        answers.append(len(tokens) + 2 * slot + 1)
    return _row(tokens + body, answers)


def copy_example(rng: random.Random, min_len: int = 4, max_len: int = 12) -> dict:
    """``x1 .. xn | x1 .. xn`` with n uniform in [min_len, max_len]; the copy is scored."""
    xs = [VALUES[rng.randrange(N_SYMBOLS)] for _ in range(rng.randint(min_len, max_len))]
    return _row(xs + [DELIM] + xs, list(range(len(xs) + 1, 2 * len(xs) + 1)))


def reverse_example(rng: random.Random, length: int = 12) -> dict:
    """``x1 .. xn | xn .. x1`` with a fixed n; the reversal is scored."""
    xs = [VALUES[rng.randrange(N_SYMBOLS)] for _ in range(length)]
    return _row(xs + [DELIM] + xs[::-1], list(range(length + 1, 2 * length + 1)))


_DIAGNOSTIC_MAKERS: dict[str, Callable[[random.Random], dict]] = {
    "recall": lambda rng: recall_example(rng, 8, 1),
    "mqar": lambda rng: recall_example(rng, 8, 4),
    "mqar-long": lambda rng: recall_example(rng, N_SYMBOLS, 8),
    "copy": copy_example,
    "reverse": reverse_example,
    "lookup": lambda rng: lookup_example(rng, 8),
    "mqar-zoology-64": lambda rng: zoology_mqar_example(rng, 64),
    "mqar-zoology-128": lambda rng: zoology_mqar_example(rng, 128),
}


def diagnostic_split(kind: str, n: int, seed: int = 0, split: str = "train") -> list[dict]:
    """``n`` rows of diagnostic ``kind`` (one of ``DIAGNOSTICS``), deterministic given (seed, split)."""
    if kind not in _DIAGNOSTIC_MAKERS:
        raise InputError(f"unknown diagnostic {kind!r}; allowed: {', '.join(DIAGNOSTICS)}")
    rng = _rng(kind, split, seed)
    return [_DIAGNOSTIC_MAKERS[kind](rng) for _ in range(n)]




# ----------------------------------------------------------------------------- the registered corpora

@dataclass(frozen=True)
class GeneratedCorpus:
    """A built-in corpus made on load: ``kind`` ("listops" or a diagnostic), split sizes, lengths, seed."""

    kind: str
    sizes: tuple[int, int, int]  # train, valid, test examples
    min_len: int = 0             # ListOps: token count range
    max_len: int = 0
    seed: int = 0
    vocab: tuple[str, ...] = VOCAB  # the words of its fixed tokenizer
    n_answers: int = N_SYMBOLS  # how many symbols an answer is drawn from (a uniform guess: 1 / n_answers)

    @property
    def task(self) -> str:
        return "classification" if self.kind == "listops" else "lm"

    @property
    def answers(self) -> bool:
        """Whether rows carry answer positions (scored causal LM) rather than a label."""
        return self.kind != "listops"


# recall has one scored answer per row: a 2-layer vanilla model memorised 20000 rows before it learned the
# lookup (accuracy ~0.22 after 6000 steps); on 100000 it learns it by about step 2000
# Zoology-style MQAR: Zoology's 100,000 rows per setting; on 40,000 a width-128 vanilla fitted the rows (training
# loss 2.81 against 4.36 on validation after 6,000 steps) and learned the lookup at no rate tried; on 100,000 it
# learns it by step 3,500 (docs/bench/presets.md#recall)
_DIAGNOSTIC_TRAIN_ROWS = {"recall": 100000, "mqar-zoology-64": 100000, "mqar-zoology-128": 100000}
_ZOOLOGY = ("mqar-zoology-64", "mqar-zoology-128")

GENERATED: dict[str, GeneratedCorpus] = {
    # CPU size: at most 254 list tokens, so <cls> list <sep> fits 256 positions
    "listops-256": GeneratedCorpus("listops", (20000, 1000, 2000), min_len=16, max_len=254),
    # the LRA setting: 96k/2k/2k lists of 500-2000 tokens (slow to generate: minutes, on first load)
    "listops-lra": GeneratedCorpus("listops", (96000, 2000, 2000), min_len=500, max_len=2000),
    **{name: GeneratedCorpus(kind, (_DIAGNOSTIC_TRAIN_ROWS.get(kind, 20000), 1000, 2000),
                             vocab=ZOOLOGY_VOCAB if kind in _ZOOLOGY else (*VOCAB, *PAIRS) if kind == "lookup" else VOCAB,
                             n_answers=len(ZOOLOGY_VALUES) if kind in _ZOOLOGY else N_SYMBOLS)
       for name, kind in zip(DIAGNOSTIC_CORPORA, DIAGNOSTICS)},
}


def generate_corpus(name: str) -> Corpus:
    """The corpus registered as ``name`` in ``GENERATED`` (generated once per process: the same every time)."""
    corpus = _generate(name)
    return Corpus(name, corpus.task, dict(corpus.splits), corpus.label_names, corpus.origin)


@functools.lru_cache(maxsize=2)  # a comparison loads the same corpus for every variant
def _generate(name: str) -> Corpus:
    spec = GENERATED[name]
    splits = {}
    for split, n in zip(("train", "valid", "test"), spec.sizes):
        if spec.kind == "listops":
            splits[split] = listops_split(n, spec.min_len, spec.max_len, spec.seed, split)
        else:
            splits[split] = diagnostic_split(spec.kind, n, spec.seed, split)
    labels = list(DIGITS) if spec.kind == "listops" else None
    return Corpus(name, spec.task, splits, labels, f"generated ({spec.kind}, seed {spec.seed})")


def fixed_tokenizer(vocab: tuple[str, ...] = VOCAB):
    """A word-level ``Tokenizer`` over the special tokens then ``vocab`` (split on whitespace)."""
    from .tokenizer import SPECIAL_TOKENS, UNK, Tokenizer, _tokenizers

    tk = _tokenizers()
    words = {w: i for i, w in enumerate((*SPECIAL_TOKENS, *vocab))}
    hf = tk.Tokenizer(tk.models.WordLevel(words, unk_token=UNK))
    hf.pre_tokenizer = tk.pre_tokenizers.WhitespaceSplit()
    return Tokenizer(hf)
