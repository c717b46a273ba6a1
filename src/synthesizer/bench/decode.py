"""Decoding benchmark: greedy generation with the incremental cache, tokens/s and cache bytes per kind.

    python -m synthesizer.bench decode [--quick] [--out results/bench]

Each run feeds a short prompt, then one token at a time through ``LanguageModel(..., caches=...)``
(what ``models.generate`` does with ``use_cache=True``, without its stopping rules, so every kind
decodes the same number of tokens). The cache size is the sum of ``nbytes`` over the layers'
caches once all tokens are in: keys and values for vanilla, values only for a pure synthesizer,
the last K-1 conv inputs for convolutions.
"""

from __future__ import annotations

import argparse
import sys

import torch

from ..models import LanguageModel
from .env import environment, progress_bar
from .model import CAUSAL_BASELINES, MODEL_KINDS, model_config
from .timing import interleaved_medians

# The pure components, and one mixture with vanilla to show that its cache is vanilla's.
DECODE_KINDS = MODEL_KINDS + ("random+vanilla",)
FULL = {"batch": 4, "seq": 1024, "layers": 4, "d_model": 512, "heads": 8, "vocab": 1024, "prompt": 16, "new_tokens": 128,
        "repeats": 3, "warmup": 0}
QUICK = {"batch": 2, "seq": 64, "layers": 2, "d_model": 64, "heads": 4, "vocab": 128, "prompt": 8, "new_tokens": 16,
         "repeats": 2, "warmup": 0}


@torch.no_grad()
def greedy_decode(model: LanguageModel, prompt: torch.Tensor, new_tokens: int) -> tuple[torch.Tensor, int]:
    """prompt (B, p) -> (generated ids (B, new_tokens), bytes held by the caches at the end)."""
    caches = model.new_caches()
    logits = model(prompt, caches=caches)[:, -1]
    out = []
    for _ in range(new_tokens):
        token = logits.argmax(dim=-1, keepdim=True)
        out.append(token)
        logits = model(token, caches=caches)[:, -1]
    return torch.cat(out, dim=1), sum(c.nbytes for c in caches)


def run(args: argparse.Namespace) -> list[dict]:
    sizes = dict(QUICK if args.quick else FULL)
    sizes |= {k: getattr(args, k) for k in ("batch", "new_tokens", "repeats") if getattr(args, k) is not None}
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    env = environment(device)
    print(f"# decode benchmark: {sizes}, torch {env['torch']}, {env['threads']} threads, {device}", file=sys.stderr)
    kinds = list(args.kinds) + [b for b in args.baselines if b in CAUSAL_BASELINES]
    torch.manual_seed(0)
    prompt = torch.randint(3, sizes["vocab"], (sizes["batch"], sizes["prompt"]), device=device)
    models, cache_bytes = {}, {}
    for kind in kinds:  # this first run also warms each model up
        models[kind] = LanguageModel(model_config(kind, sizes)).to(device).eval()
        cache_bytes[kind] = greedy_decode(models[kind], prompt, sizes["new_tokens"])[1]
    runs = {kind: (lambda m=m: greedy_decode(m, prompt, sizes["new_tokens"])) for kind, m in models.items()}
    with progress_bar((sizes["repeats"] + sizes["warmup"]) * len(kinds), "decode") as bar:
        stats = interleaved_medians(runs, device, sizes["repeats"], sizes["warmup"], bar.update)
    tokens = sizes["batch"] * sizes["new_tokens"]
    rows = []
    for kind in kinds:
        s = stats[kind]
        rows.append({"bench": "decode", "kind": kind, "batch": sizes["batch"], "prompt": sizes["prompt"],
                     "new_tokens": sizes["new_tokens"], "layers": sizes["layers"], "d_model": sizes["d_model"],
                     "heads": sizes["heads"], "vocab": sizes["vocab"],
                     "decode_s": s["median"], "decode_min_s": s["min"], "decode_max_s": s["max"],
                     "tokens_per_s": tokens / s["median"], "tokens_per_s_min": tokens / s["max"],
                     "tokens_per_s_max": tokens / s["min"], "cache_bytes": cache_bytes[kind]} | env)
    base = next((r for r in rows if r["kind"] == "vanilla"), None)
    for r in rows:
        r["tokens_per_s_vs_vanilla"] = r["tokens_per_s"] / base["tokens_per_s"] if base else None
        r["cache_vs_vanilla"] = r["cache_bytes"] / base["cache_bytes"] if base and base["cache_bytes"] else None
    return rows


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help=f"small model: {QUICK} (default: {FULL})")
    p.add_argument("--kinds", nargs="+", default=list(DECODE_KINDS), help="Synthesizer kinds (default: %(default)s)")
    p.add_argument("--baselines", nargs="*", default=list(CAUSAL_BASELINES), help="causal baselines (default: %(default)s)")
    p.add_argument("--batch", type=int, default=None, help=f"sequences decoded at once (default: {FULL['batch']})")
    p.add_argument("--new-tokens", type=int, default=None, help=f"tokens generated per sequence (default: {FULL['new_tokens']})")
    p.add_argument("--repeats", type=int, default=None, help=f"timed runs per kind (default: {FULL['repeats']})")
