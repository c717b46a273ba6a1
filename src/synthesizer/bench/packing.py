"""Packed against padded training: tokens/s of a preset's task with and without ``batch.pack``.

    python -m synthesizer.bench packing [--configs mt-bible-small ...] [--kinds vanilla random ...] [--quick]

For every config and kind, two models (the same seed, so the same weights) train on the task's own
batches: the padded default (length-bucketed, one example per row) and ``batch.pack: true`` (several
examples per row, ``data/packing.py``). A timed repeat is ``--steps`` training steps (forward, the task's
loss, backward, AdamW step) over batches collated beforehand (collation is not timed); padded and packed
repeats alternate, so load on a shared machine hits both alike. Tokens/s counts real tokens only: the
non-padding tokens the model reads (source and target for an encoder-decoder), not the padding.
``speedup`` is packed tokens/s over padded tokens/s of the same kind; ``padding`` the share of the
batches' token slots that are padding.
"""

from __future__ import annotations

import argparse
import itertools
import sys

import torch
from torch import Tensor

from ..data.tokenizer import Tokenizer
from ..errors import InputError
from ..models import build_model
from ..models.blocks import set_packed
from ..tasks.config import ExperimentConfig
from ..tasks.data import load_data, task_class
from ..tasks.experiment import make_model_config
from ..training.loop import seed_everything, to_device
from ..training.optim import build_optimizer
from .env import environment
from .timing import interleaved_medians

CONFIGS = ("mt-bible-small", "summarization-debian-small", "dialogue-chitchat-small")
KINDS = ("vanilla", "random", "dense+vanilla")
# --quick: a tiny model on a few hundred examples, one short repeat (checks the command, measures nothing)
QUICK = ("model.d_model=32", "model.n_heads=2", "model.n_layers=1", "model.d_ff=64", "data.limit=200",
         "tokenizer.vocab_size=400")
MASKS = ("padding", "mask", "src_mask", "tgt_mask")  # the padding masks of the tasks' batches


def token_counts(batch: Tensor | dict) -> tuple[int, int]:
    """(real tokens, token slots) the model reads in one batch: an LM block batch is all real; a dict
    batch's padding masks (True = padding) say which slots are padding."""
    if isinstance(batch, Tensor):
        return batch[:, :-1].numel(), batch[:, :-1].numel()
    masks = [batch[k] for k in MASKS if k in batch]
    return int(sum(int((~m).sum()) for m in masks)), int(sum(m.numel() for m in masks))


def experiment(name: str, kind: str, pack: bool, overrides: list[str]) -> ExperimentConfig:
    """Config ``name`` with ``kind``, ``batch.pack`` and the ``--set`` overrides."""
    return ExperimentConfig.from_file(name, [*overrides, f"model.attention={kind}", f"batch.pack={str(pack).lower()}"])


def trainer_step(cfg: ExperimentConfig, corpus, tok: Tokenizer, steps: int, device: torch.device):
    """A function that trains ``steps`` steps of ``cfg``'s task, its real tokens and token slots, and its
    layers' kernel paths."""
    task = task_class(cfg)(cfg, corpus, tok)
    seed_everything(cfg.seed)
    model = build_model(task.family, make_model_config(cfg, tok, task)).to(device).train()
    if cfg.batch.pack:
        set_packed(model)
    optimizer = build_optimizer(model, lr=1e-4)
    batches = [to_device(b, device) for b in itertools.islice(task.train_batches(0, 0), steps)]
    if len(batches) < steps:
        raise InputError(f"{cfg.data.corpus or 'the data'} gives {len(batches)} training batches, fewer than --steps={steps}")
    real, slots = map(sum, zip(*(token_counts(b) for b in batches)))

    def run() -> None:
        for batch in batches:
            loss, n = task.step_fn(model, batch)
            (loss / n).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    paths = sorted({p["path"] for p in model.layer_param_counts() if p.get("path")})
    return run, real, slots, paths


def bench_config(name: str, kinds: list[str], args: argparse.Namespace, device: torch.device, env: dict) -> list[dict]:
    """Padded and packed rows of every kind on config ``name``."""
    base = experiment(name, kinds[0], False, args.overrides)
    corpus = load_data(base)
    tok = Tokenizer.train(corpus.texts("train"), vocab_size=base.tokenizer.vocab_size,
                          min_frequency=base.tokenizer.min_frequency)
    rows = []
    for kind in kinds:
        runs = {pack: trainer_step(experiment(name, kind, pack, args.overrides), corpus, tok, args.steps, device)
                for pack in (False, True)}
        times = interleaved_medians({pack: run[0] for pack, run in runs.items()}, device, args.repeats, args.warmup)
        for pack, (_, real, slots, paths) in runs.items():
            t = times[pack]
            rows.append({**env, "bench": "packing", "config": name, "kind": kind, "pack": pack, "steps": args.steps,
                         "real_tokens": real, "token_slots": slots, "padding": 1 - real / slots,
                         "step_s": t["median"] / args.steps, "tokens_per_s": real / t["median"],
                         "tokens_per_s_min": real / t["max"], "tokens_per_s_max": real / t["min"], "paths": paths})
        rows[-1]["speedup"] = rows[-1]["tokens_per_s"] / rows[-2]["tokens_per_s"]
        print(f"# {name} {kind}: packed {rows[-1]['speedup']:.2f}x padded", file=sys.stderr)
    return rows


def run(args: argparse.Namespace) -> list[dict]:
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    overrides = [*(QUICK if args.quick else ()), *args.set]
    args.overrides = overrides
    env = environment(device)
    print(f"# packing benchmark: {args.configs}, kinds {args.kinds}, {args.steps} steps x {args.repeats} repeats, "
          f"overrides {overrides}, torch {env['torch']}, {env['threads']} threads, {device}", file=sys.stderr)
    return [r for name in args.configs for r in bench_config(name, list(args.kinds), args, device, env)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configs", nargs="+", default=list(CONFIGS), help="shipped configs or files (default: %(default)s)")
    p.add_argument("--kinds", nargs="+", default=list(KINDS), help="attention kinds (default: %(default)s)")
    p.add_argument("--steps", type=int, default=10, help="training steps per timed repeat (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats of each (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=1, help="untimed repeats first (default: %(default)s)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value of every run, e.g. model.d_model=64 (repeatable)")
    p.add_argument("--quick", action="store_true", help=f"a tiny model on a little data: {QUICK} (checks the command)")
