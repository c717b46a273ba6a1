"""Comparison presets: the paper's experiment families on the shared corpora, each in two sizes.

A preset is a list of shipped experiment configs (``synthesizer/configs/*.yaml``) plus the attention
kinds to train on each. ``full`` runs the shipped small CPU config as it is (minutes per variant);
``quick`` shrinks it with overrides so the whole comparison takes about ten minutes on two CPU cores
(``--jobs 2``: two one-thread runs at a time); quick models are tiny, so their scores show trends,
not the paper's numbers (``--steps N`` buys a larger budget at the same size).
Every variant of a comparison gets the same config apart from ``model.attention`` and ``seed``.
``data.limit`` keeps the first rows of every split: only use it where a file's prefix is a fair sample.

Both sizes drop the shipped configs' wall-clock cap (``train.max_minutes``), so every variant trains
for the same number of steps, whatever its speed or the machine's load.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..attention import registry
from ..attention.kinds import parse_kind

# The paper's rows (Tay et al., Table 2), in its order: vanilla first, the pure synthesizers (each
# component's ``paper_row`` in the registry), then the paper's mixtures.
PAPER_MIXTURES = ("random+dense", "dense+vanilla", "random+vanilla")
DEFAULT_KINDS = (*(s.name for s in sorted((s for s in registry.specs() if s.paper_row is not None),
                                          key=lambda s: s.paper_row)),
                 *(str(parse_kind(kind)) for kind in PAPER_MIXTURES))
SIZES = ("quick", "full")

# Every size: equal step budgets (no wall-clock cap). Quick seq2seq: greedy decoding on a small sample.
_COMMON = ("train.max_minutes=null",)
_QUICK_SEQ2SEQ = ("model.d_model=64", "model.d_ff=256", "model.n_layers=2", "tokenizer.vocab_size=2000",
                  "train.lr=3e-3", "train.warmup_steps=20", "train.eval_every=60", "train.log_every=20",
                  "eval.beam_size=1", "eval.max_eval_examples=100", "eval.batch_size=100")


@dataclass(frozen=True)
class PresetTask:
    """One (task, corpus) of a preset: the shipped config it starts from and the quick overrides."""

    config: str
    quick: tuple[str, ...] = ()
    label: str = ""  # what the report calls it, e.g. "language modelling (SOTU)"


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    metric: str
    tasks: tuple[PresetTask, ...]
    baselines: tuple[str, ...] = field(default=())  # trained next to the synthesizers by default


PRESETS: dict[str, Preset] = {
    # quick: a 64-wide 2-layer model, 200 steps, on the subset shipped in the package (all 84 training
    # addresses, 1919-2001; full valid and test), never a larger copy found on the machine, so the
    # demo's numbers are the same everywhere. No data.limit: 200 steps of 2048 tokens see about half
    # of it once, and a prefix of a chronological file keeps the addresses farthest from valid/test.
    "lm": Preset("lm", "language modelling on State of the Union addresses", "perplexity", (
        PresetTask("lm-sotu-small", (
            "data.corpus=sotu-subset", "tokenizer.vocab_size=2000", "model.d_model=64", "model.d_ff=256",
            "batch.block_size=128", "batch.max_tokens=2048", "train.max_steps=200", "train.lr=3e-3",
            "train.warmup_steps=20", "train.eval_every=50", "train.log_every=10"),
            "language modelling (SOTU subset)"),)),
    "mt": Preset("mt", "machine translation, English to Spanish (Bible) and English to German (LibreOffice)", "BLEU", (
        PresetTask("mt-bible-small", ("data.limit=6000", "batch.max_src_len=64", "batch.max_tgt_len=64",
                                      "model.max_len=96", "train.max_steps=120", "eval.max_new_tokens=64",
                                      *_QUICK_SEQ2SEQ), "translation en-es (Bible)"),
        PresetTask("mt-libreoffice-small", ("data.limit=6000", "batch.max_src_len=64", "batch.max_tgt_len=64",
                                            "model.max_len=96", "train.max_steps=120", "eval.max_new_tokens=64",
                                            *_QUICK_SEQ2SEQ), "translation en-de (LibreOffice)"),
    )),
    "summarization": Preset("summarization", "Debian package description to synopsis", "ROUGE-L", (
        # the first 64 tokens of a description (median: 55 words) hold its opening sentence,
        # which the synopsis condenses
        PresetTask("summarization-debian-small", ("data.limit=8000", "batch.max_src_len=64", "model.max_len=64",
                                                  "train.max_steps=240", *_QUICK_SEQ2SEQ),
                   "summarization (Debian descriptions)"),)),
    "dialogue": Preset("dialogue", "chit-chat replies given the last turns", "BLEU-1 / ROUGE-L", (
        PresetTask("dialogue-chitchat-small", ("data.limit=8000", "batch.max_src_len=96", "batch.max_tgt_len=48",
                                               "model.max_len=96", "train.max_steps=240", "eval.max_new_tokens=48",
                                               *_QUICK_SEQ2SEQ), "dialogue (chitchat)"),)),
    # The paper's encoding-only comparison puts Linformer next to factorized_random.
    "classification": Preset("classification", "sentiment (Rotten Tomatoes) and spam filtering", "accuracy", (
        PresetTask("cls-rotten-small", ("data.limit=6000", "tokenizer.vocab_size=2000", "model.d_model=64",
                                        "model.d_ff=256", "model.max_len=64", "batch.max_len=64",
                                        "batch.max_tokens=2048", "train.max_steps=200", "train.lr=3e-3",
                                        "train.warmup_steps=20", "train.eval_every=50", "train.log_every=10"),
                   "sentiment (Rotten Tomatoes)"),
        # no data.limit: the spam train file lists every ham e-mail first, so a prefix has no spam
        PresetTask("cls-spam-small", ("tokenizer.vocab_size=2000", "model.d_model=64",
                                      "model.d_ff=256", "model.max_len=128", "batch.max_len=128",
                                      "batch.max_tokens=4096", "train.max_steps=120", "train.lr=2e-3",
                                      "train.warmup_steps=12", "train.eval_every=40", "train.log_every=10"),
                   "spam (SpamAssassin)"),
    ), baselines=("linformer",)),
}


# Generated data (data/generated.py): every variant and the `none` baseline, which tells a task that needs
# token mixing (none stays at chance) from one a no-mixing model already solves. A prefix of a generated
# split is an i.i.d. sample, so data.limit is fair here.
_QUICK_DIAG = ("data.limit=8000", "train.max_steps=250", "train.warmup_steps=25", "train.eval_every=125",
               "train.log_every=20")
PRESETS["listops"] = Preset("listops", "ListOps (Long Range Arena) on generated lists of at most 256 tokens", "accuracy", (
    # quick: a 64-wide encoder for 120 steps of 2048 tokens; the lists are 89 tokens long on average
    PresetTask("listops-small", ("data.limit=4000", "model.d_model=64", "model.d_ff=256", "batch.max_tokens=2048",
                                 "train.max_steps=120", "train.warmup_steps=12", "train.eval_every=60",
                                 "train.log_every=10"), "ListOps (lists of 16-254 tokens)"),
), baselines=("none",))
PRESETS["diagnostics"] = Preset(
    "diagnostics", "content-based against position-based mixing: recall, multi-query recall, copying, reversal",
    "accuracy", (
        PresetTask("diag-recall-small", _QUICK_DIAG, "associative recall (one query)"),
        PresetTask("diag-mqar-small", _QUICK_DIAG, "multi-query associative recall"),
        PresetTask("diag-copy-small", _QUICK_DIAG, "copying after a delimiter (4-12 symbols)"),
        PresetTask("diag-reverse-small", _QUICK_DIAG, "reversal (12 symbols, fixed length)"),
    ), baselines=("none",))

def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; allowed: {', '.join(PRESETS)}")
    return PRESETS[name]


def task_overrides(task: PresetTask, size: str) -> list[str]:
    """The overrides that turn ``task.config`` into the given size."""
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; allowed: {', '.join(SIZES)}")
    return [*_COMMON, *task.quick] if size == "quick" else list(_COMMON)


def steps_overrides(steps: int) -> list[str]:
    """``--steps N``: the step budget, with evaluation and warm-up scaled to fit inside it."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"--steps must be a positive integer, got {steps!r}")
    return [f"train.max_steps={steps}", f"train.eval_every={max(1, steps // 4)}",
            f"train.warmup_steps={steps // 10}", f"train.log_every={max(1, min(20, steps // 4))}"]
