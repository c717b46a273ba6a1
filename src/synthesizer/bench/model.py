"""Model-level benchmark: training throughput (tokens/s) of a small LM and of an encoder classifier.

    python -m synthesizer.bench model [--quick] [--out results/bench]

One training step = forward, cross-entropy loss, backward, AdamW step (``training.build_optimizer``,
what the trainer uses), on random token ids of a full batch (no padding). The LM is causal, the
classifier is not; each runs at batch 1 and at batch 8 (the input-independent kinds share their
attention weights across the batch, so batch 1 is their worst case). The models of every kind are
stepped round-robin so that load on a shared machine hits them alike; ratios are to ``vanilla`` of
the same run. Peak memory is measured afterwards in one fresh process per task and batch (see
``model_peaks``): ``state_bytes`` (weights and AdamW state) plus ``step_peak_bytes`` (what
one step allocates above them), and ``activation_bytes``, that step's peak less the parameters' gradients
(a random synthesizer's (H, n, n) R has a gradient as large as itself: weights, not activations). Dropout is 0: with dropout on the
attention probabilities, the fused CPU attention kernel falls back to its slow path, and that would
measure the kernel, not the architecture.
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

from ..attention.names import PAPER_PURE
from ..models import Classifier, LanguageModel, ModelConfig
from ..models.config import stack_kinds
from ..training.optim import build_optimizer
from .env import environment, progress_bar
from .flops import layer_flops
from .timed_layers import linformer_k
from .memory import activation_bytes, fresh_process_device, in_fresh_process, peak_bytes
from .timing import interleaved_medians

CAUSAL_BASELINES = ("lightconv", "dynamicconv")
ENCODER_BASELINES = ("linformer", "lightconv", "dynamicconv")
# The pure components: mixtures cost the sum of their parts and are timed at layer level.
MODEL_KINDS = PAPER_PURE
FULL = {"lm": {"batches": [1, 8], "seq": 1024, "layers": 4, "d_model": 512, "heads": 8, "vocab": 1024, "repeats": 3,
               "warmup": 1},
        "classifier": {"batches": [1, 8], "seq": 512, "layers": 4, "d_model": 512, "heads": 8, "vocab": 1024, "repeats": 3,
                       "warmup": 1}}
QUICK = {task: {"batches": [1, 2], "seq": 64, "layers": 2, "d_model": 64, "heads": 4, "vocab": 128, "repeats": 2,
                "warmup": 1} for task in ("lm", "classifier")}


def model_config(kind: str, sizes: dict) -> ModelConfig:
    """The benchmarked model's config; ``kind``: one kind, or a kind per layer (``"random,vanilla"``)."""
    options = {"k": linformer_k(sizes["seq"])} if kind == "linformer" else {}
    return ModelConfig(vocab_size=sizes["vocab"], d_model=sizes["d_model"], n_heads=sizes["heads"], n_layers=sizes["layers"],
                       max_len=sizes["seq"], dropout=0.0, attention=kind, attention_options=options)


def layer_kinds(kind: str, sizes: dict) -> list[str]:
    """The kind of each layer of the model of ``kind`` (one kind, or a kind per layer such as
    ``"random,vanilla"``, cycled over the layers)."""
    return [str(k) for k in stack_kinds(kind, sizes["layers"])]


def model_flops(kind: str, task: str, sizes: dict) -> int:
    """Forward FLOPs of one batch (matrix products only): attention layers (each of its own kind), FFNs
    and the LM head."""
    b, n, d = sizes["batch"], sizes["seq"], sizes["d_model"]
    attn = sum(layer_flops(k, b, n, d, sizes["heads"], n, k=linformer_k(n) if k == "linformer" else None)
               for k in layer_kinds(kind, sizes))
    ffn = 2 * 2 * b * n * d * 4 * d
    head = 2 * b * n * d * sizes["vocab"] if task == "lm" else 0
    return attn + sizes["layers"] * ffn + head


def build_model(task: str, kind: str, sizes: dict, device: torch.device) -> tuple[nn.Module, torch.optim.Optimizer]:
    """The model of ``task`` for ``kind`` in training mode, and its optimizer."""
    model = (LanguageModel if task == "lm" else Classifier)(model_config(kind, sizes)).to(device).train()
    return model, build_optimizer(model, lr=1e-4)


def batch_data(sizes: dict, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids (batch, seq) and binary labels (batch,)."""
    ids = torch.randint(3, sizes["vocab"], (sizes["batch"], sizes["seq"]), device=device)
    return ids, torch.randint(0, 2, (sizes["batch"],), device=device)


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
    """Rows of tokens/s per kind for ``task`` ("lm" or "classifier") at one batch size (``sizes["batch"]``)."""
    torch.manual_seed(0)
    ids, labels = batch_data(sizes, device)
    steps, params = {}, {}
    for kind in kinds:
        model, optimizer = build_model(task, kind, sizes, device)
        steps[kind] = training_step(task, model, optimizer, ids, labels)
        params[kind] = sum(p.numel() for p in model.parameters())
    with progress_bar((sizes["repeats"] + sizes["warmup"]) * len(kinds), f"model, {task}, batch {sizes['batch']}") as bar:
        stats = interleaved_medians(steps, device, sizes["repeats"], sizes["warmup"], bar.update)
    tokens = sizes["batch"] * sizes["seq"]
    rows = []
    for kind in kinds:
        s = stats[kind]
        rows.append({"bench": "model", "task": task, "kind": kind, "layer_kinds": layer_kinds(kind, sizes),
                     "batch": sizes["batch"], "seq": sizes["seq"],
                     "layers": sizes["layers"], "d_model": sizes["d_model"], "heads": sizes["heads"], "vocab": sizes["vocab"],
                     "params": params[kind], "flops": model_flops(kind, task, sizes),
                     "step_s": s["median"], "step_min_s": s["min"], "step_max_s": s["max"],
                     "tokens_per_s": tokens / s["median"], "tokens_per_s_min": tokens / s["max"],
                     "tokens_per_s_max": tokens / s["min"], "causal": task == "lm"} | env)
    del steps
    return rows


def measure_memory(task: str, kinds: list[str], sizes: dict, device: torch.device, threads: int) -> dict[str, dict]:
    """{kind: {"state_bytes", "step_peak_bytes"}} from one fresh process (:func:`model_peaks`), {} on failure."""
    spec = {"model": task, "kinds": kinds, "sizes": sizes, "device": str(device), "threads": threads}
    return in_fresh_process(spec, f"the {task} models", module="synthesizer.bench.model")


def model_peaks(task: str, kinds: list[str], sizes: dict, device: torch.device) -> dict[str, dict[str, int | None]]:
    """{kind: {"state_bytes": weights and AdamW's buffers, "step_peak_bytes": what one training step
    (activations, gradients) allocates above them, "activation_bytes": that peak less the parameters'
    gradients}} for the models of ``task``.

    Each model first takes one step on a (1, 16) batch: that creates AdamW's state and pays the
    one-off allocations outside the peak; the measured step then runs on the full batch.
    """
    peaks = {}
    for kind in kinds:
        torch.manual_seed(0)
        model, optimizer = build_model(task, kind, sizes, device)
        warm = batch_data(dict(sizes, batch=1, seq=min(16, sizes["seq"])), device)
        training_step(task, model, optimizer, *warm)()
        optimizer.zero_grad(set_to_none=True)
        step = training_step(task, model, optimizer, *batch_data(sizes, device))
        tensors = [p for p in model.parameters()] + [t for s in optimizer.state.values() for t in s.values()
                                                    if isinstance(t, torch.Tensor)]
        peak = peak_bytes(step, device)
        peaks[kind] = {"state_bytes": sum(t.nbytes for t in tensors), "step_peak_bytes": peak,
                       "activation_bytes": activation_bytes(peak, model)}
        del model, optimizer, step, tensors
    return peaks

def _add_ratios(rows: list[dict]) -> None:
    """Ratios to ``vanilla`` of the same task and batch."""
    base = next((r for r in rows if r["kind"] == "vanilla"), None)
    for r in rows:
        r["tokens_per_s_vs_vanilla"] = r["tokens_per_s"] / base["tokens_per_s"] if base else None
        r["flops_vs_vanilla"] = base["flops"] / r["flops"] if base else None  # >1: fewer FLOPs than vanilla
        for field, ratio in (("peak_bytes", "peak_vs_vanilla"), ("activation_bytes", "activation_vs_vanilla")):
            ok = base is not None and r.get(field) is not None and base.get(field)
            r[ratio] = r[field] / base[field] if ok else None


def run(args: argparse.Namespace) -> list[dict]:
    presets = QUICK if args.quick else FULL
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    env = environment(device)
    print(f"# model benchmark: {presets}, torch {env['torch']}, {env['threads']} threads, {device}", file=sys.stderr)
    kinds = list(args.kinds)
    runs = []  # (task, kinds, sizes of one batch)
    for task, baselines in (("lm", CAUSAL_BASELINES), ("classifier", ENCODER_BASELINES)):
        if task in args.tasks:
            preset = presets[task]
            for batch in args.batches or preset["batches"]:
                sizes = {k: v for k, v in preset.items() if k != "batches"} | {"batch": batch}
                runs.append((task, kinds + [b for b in args.baselines if b in baselines], sizes))
    rows = []
    for task, run_kinds, sizes in runs:
        rows.append(run_task(task, run_kinds, sizes, device, env))
    for (task, run_kinds, sizes), task_rows in zip(runs, rows):  # after every timing: see model_peaks
        peaks = {} if args.no_memory else measure_memory(task, run_kinds, sizes, device, env["threads"])
        for r in task_rows:
            p = peaks.get(r["kind"], {})
            r["state_bytes"], r["step_peak_bytes"] = p.get("state_bytes"), p.get("step_peak_bytes")
            r["activation_bytes"] = p.get("activation_bytes")
            known = r["state_bytes"] is not None and r["step_peak_bytes"] is not None
            r["peak_bytes"] = r["state_bytes"] + r["step_peak_bytes"] if known else None
        _add_ratios(task_rows)
    return [r for task_rows in rows for r in task_rows]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help=f"small models: {QUICK} (default: {FULL})")
    p.add_argument("--kinds", nargs="+", default=list(MODEL_KINDS),
                   help="Synthesizer kinds, or a kind per layer such as random,vanilla (default: %(default)s)")
    p.add_argument("--baselines", nargs="*", default=list(ENCODER_BASELINES),
                   help="baselines (the LM takes the causal ones only; default: %(default)s)")
    p.add_argument("--tasks", nargs="+", default=["lm", "classifier"], choices=["lm", "classifier"])
    p.add_argument("--batches", nargs="+", type=int, default=None,
                   help=f"batch sizes, each a run of its own (default: {FULL['lm']['batches']})")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurements")


def _main(spec_json: str) -> None:
    """Child process of :func:`measure_memory`: print the models' peaks, as JSON."""
    import json

    spec = json.loads(spec_json)
    print(json.dumps(model_peaks(spec["model"], spec["kinds"], spec["sizes"], fresh_process_device(spec))))


if __name__ == "__main__":
    _main(sys.argv[1])
