"""Model-level benchmark: training throughput (tokens/s) of a small LM and of an encoder classifier.

    python -m synthesizer.bench model [--quick] [--out results/bench]

One training step = forward, cross-entropy loss, backward, AdamW step, on random token ids of a full
batch (no padding). The models of every kind are stepped round-robin so that load on a shared
machine hits them alike; ratios are to ``vanilla`` of the same run. Dropout is 0: with dropout on the
attention probabilities, the fused CPU attention kernel falls back to its slow path, and that would
measure the kernel, not the architecture.
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

from ..models import Classifier, LanguageModel, ModelConfig
from .env import environment, progress_bar
from .flops import layer_flops
from .layers import LINFORMER_K
from .timing import interleaved_medians

CAUSAL_BASELINES = ("lightconv", "dynamicconv")
ENCODER_BASELINES = ("linformer", "lightconv", "dynamicconv")
# The pure components: mixtures cost the sum of their parts and are timed at layer level.
MODEL_KINDS = ("vanilla", "dense", "random", "fixed_random", "factorized_dense", "factorized_random")
FULL = {"lm": {"batch": 1, "seq": 1024, "layers": 4, "d_model": 512, "heads": 8, "vocab": 1024, "repeats": 3, "warmup": 1},
        "classifier": {"batch": 2, "seq": 512, "layers": 4, "d_model": 512, "heads": 8, "vocab": 1024, "repeats": 3,
                       "warmup": 1}}
QUICK = {task: {"batch": 2, "seq": 64, "layers": 2, "d_model": 64, "heads": 4, "vocab": 128, "repeats": 2, "warmup": 1}
         for task in ("lm", "classifier")}


def model_config(kind: str, sizes: dict) -> ModelConfig:
    options = {"k": LINFORMER_K} if kind == "linformer" else {}
    return ModelConfig(vocab_size=sizes["vocab"], d_model=sizes["d_model"], n_heads=sizes["heads"], n_layers=sizes["layers"],
                       max_len=sizes["seq"], dropout=0.0, attention=kind, attention_options=options)


def model_flops(kind: str, task: str, sizes: dict) -> int:
    """Forward FLOPs of one batch (matrix products only): attention layers, FFNs and the LM head."""
    b, n, d = sizes["batch"], sizes["seq"], sizes["d_model"]
    attn = layer_flops(kind, b, n, d, sizes["heads"], n, k=LINFORMER_K if kind == "linformer" else None)
    ffn = 2 * 2 * b * n * d * 4 * d
    head = 2 * b * n * d * sizes["vocab"] if task == "lm" else 0
    return sizes["layers"] * (attn + ffn) + head


def training_step(task: str, model: nn.Module, optimizer: torch.optim.Optimizer, ids: torch.Tensor,
                  labels: torch.Tensor):
    """One step's closure: forward, loss, backward, optimizer step."""
    def step():
        optimizer.zero_grad(set_to_none=True)
        logits = model(ids)
        if task == "lm":
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
        else:
            loss = F.cross_entropy(logits, labels)
        loss.backward()
        optimizer.step()
    return step


def run_task(task: str, kinds: list[str], sizes: dict, device: torch.device, env: dict) -> list[dict]:
    """Rows of tokens/s per kind for ``task`` ("lm" or "classifier")."""
    torch.manual_seed(0)
    ids = torch.randint(3, sizes["vocab"], (sizes["batch"], sizes["seq"]), device=device)
    labels = torch.randint(0, 2, (sizes["batch"],), device=device)
    steps, params = {}, {}
    for kind in kinds:
        model = (LanguageModel if task == "lm" else Classifier)(model_config(kind, sizes)).to(device).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        steps[kind] = training_step(task, model, optimizer, ids, labels)
        params[kind] = sum(p.numel() for p in model.parameters())
    with progress_bar((sizes["repeats"] + sizes["warmup"]) * len(kinds), f"model, {task}") as bar:
        stats = interleaved_medians(steps, device, sizes["repeats"], sizes["warmup"], bar.update)
    tokens = sizes["batch"] * sizes["seq"]
    rows = []
    for kind in kinds:
        s = stats[kind]
        rows.append({"bench": "model", "task": task, "kind": kind, "batch": sizes["batch"], "seq": sizes["seq"],
                     "layers": sizes["layers"], "d_model": sizes["d_model"], "heads": sizes["heads"], "vocab": sizes["vocab"],
                     "params": params[kind], "flops": model_flops(kind, task, sizes),
                     "step_s": s["median"], "step_min_s": s["min"], "step_max_s": s["max"],
                     "tokens_per_s": tokens / s["median"], "tokens_per_s_min": tokens / s["max"],
                     "tokens_per_s_max": tokens / s["min"]} | env)
    base = next((r for r in rows if r["kind"] == "vanilla"), None)
    for r in rows:
        r["tokens_per_s_vs_vanilla"] = r["tokens_per_s"] / base["tokens_per_s"] if base else None
        r["flops_vs_vanilla"] = base["flops"] / r["flops"] if base else None  # >1: fewer FLOPs than vanilla
    return rows


def run(args: argparse.Namespace) -> list[dict]:
    presets = QUICK if args.quick else FULL
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    env = environment(device)
    print(f"# model benchmark: {presets}, torch {env['torch']}, {env['threads']} threads, {device}", file=sys.stderr)
    kinds = list(args.kinds)
    rows = []
    if "lm" in args.tasks:
        rows += run_task("lm", kinds + [b for b in args.baselines if b in CAUSAL_BASELINES], presets["lm"], device, env)
    if "classifier" in args.tasks:
        rows += run_task("classifier", kinds + [b for b in args.baselines if b in ENCODER_BASELINES], presets["classifier"], device,
                         env)
    return rows


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help=f"small models: {QUICK} (default: {FULL})")
    p.add_argument("--kinds", nargs="+", default=list(MODEL_KINDS), help="Synthesizer kinds (default: %(default)s)")
    p.add_argument("--baselines", nargs="*", default=list(ENCODER_BASELINES),
                   help="baselines (the LM takes the causal ones only; default: %(default)s)")
    p.add_argument("--tasks", nargs="+", default=["lm", "classifier"], choices=["lm", "classifier"])
