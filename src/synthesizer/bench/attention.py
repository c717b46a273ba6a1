"""Layer-level benchmark: every attention kind against a plain fused dot-product layer.

    python -m synthesizer.bench attention [--quick] [--seqs 512 1024 2048] [--jsonl out.jsonl]

For each sequence length, all layers are timed round-robin (forward under no_grad, and
forward+backward), medians over repeats; ratios are to the plain ``sdpa`` layer of the same run.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import SynthesizerAttention
from ..attention.dispatch import applicable_paths
from ..attention.kinds import parse_kind
from .timing import interleaved_medians

DEFAULT_KINDS = ("vanilla", "dense", "random", "fixed_random", "factorized_dense", "factorized_random",
                 "random+vanilla", "dense+vanilla", "random+dense")


class PlainSDPAttention(nn.Module):
    """The obvious fused multi-head self-attention: the yardstick every ratio is taken against."""

    def __init__(self, d_model: int, n_heads: int, causal: bool = False):
        super().__init__()
        self.n_heads, self.causal = n_heads, causal
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        return self.out(F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).transpose(1, 2).reshape(b, n, d))


def bench_seq(layers: dict[str, tuple[nn.Module, str]], batch: int, seq: int, d: int, repeats: int, warmup: int,
              device: torch.device, progress: Callable[[], None] | None) -> list[dict]:
    x = torch.randn(batch, seq, d, device=device)
    grad = torch.randn(batch, seq, d, device=device)

    def forward(layer: nn.Module) -> Callable[[], object]:
        def run():
            with torch.no_grad():
                return layer(x)
        return run

    def forward_backward(layer: nn.Module) -> Callable[[], object]:
        xg = x.clone().requires_grad_(True)

        def run():
            layer.zero_grad(set_to_none=True)
            layer(xg).backward(grad)
        return run

    fwd = interleaved_medians({n: forward(l) for n, (l, _) in layers.items()}, device, repeats, warmup, progress)
    fwd_bwd = interleaved_medians({n: forward_backward(l) for n, (l, _) in layers.items()}, device, repeats, warmup, progress)
    rows = []
    for name, (layer, path) in layers.items():
        rows.append({"kind": name, "path": path, "seq": seq, "batch": batch, "d_model": d,
                     "forward_s": fwd[name]["median"], "forward_min_s": fwd[name]["min"], "forward_max_s": fwd[name]["max"],
                     "fwd_bwd_s": fwd_bwd[name]["median"], "fwd_bwd_min_s": fwd_bwd[name]["min"], "fwd_bwd_max_s": fwd_bwd[name]["max"],
                     "heads": layer.n_heads, "params": sum(p.numel() for p in layer.parameters())})
    base = next(r for r in rows if r["kind"] == "sdpa")
    for r in rows:
        r["forward_ratio"] = r["forward_s"] / base["forward_s"]
        r["fwd_bwd_ratio"] = r["fwd_bwd_s"] / base["fwd_bwd_s"]
    return rows


def build_layer(name: str, d: int, h: int, max_len: int, causal: bool) -> nn.Module:
    """Rebuild a benchmark row's layer from its name: "sdpa", a kind, or "kind [path]"."""
    if name == "sdpa":
        return PlainSDPAttention(d, h, causal)
    kind, _, impl = name.partition(" [")
    return SynthesizerAttention(d, h, max_len, kind, causal=causal, impl=impl.rstrip("]") or "auto")


def layer_candidates(kinds: list[str], d: int, h: int, max_len: int, causal: bool) -> dict[str, tuple[nn.Module, str]]:
    """name -> (layer, path). Kinds that mix ``random`` with dot products get one row per candidate
    path, so the dispatcher's choice can be checked against the measurement."""
    names = ["sdpa"]
    for kind in kinds:
        paths = applicable_paths(parse_kind(kind))
        names.append(kind)
        if "fused_bias" in paths:
            names += [f"{kind} [{path}]" for path in paths[1:]]
    layers = {}
    for name in names:
        layer = build_layer(name, d, h, max_len, causal)
        layers[name] = (layer, getattr(layer, "path", "fused"))
    return layers


def measure_memory(rows: list[dict], causal: bool, device: torch.device) -> None:
    """Peak memory of one forward+backward per row, each in a fresh process (after the timings), so
    that no allocation cached by an earlier layer hides a later peak."""
    for r in rows:
        spec = {k: r[k] for k in ("kind", "seq", "batch", "d_model", "heads")} | {"causal": causal, "device": str(device)}
        out = subprocess.run([sys.executable, "-m", "synthesizer.bench.memory", json.dumps(spec)],
                             capture_output=True, text=True, check=False)
        r["peak_bytes"] = int(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip().isdigit() else None
    base = next(r for r in rows if r["kind"] == "sdpa")["peak_bytes"]
    for r in rows:
        r["memory_ratio"] = None if r["peak_bytes"] is None or not base else r["peak_bytes"] / base


def format_table(rows: list[dict]) -> str:
    head = "| seq | kind | path | params | fwd ms | fwd x | fwd+bwd ms | fwd+bwd x | peak MiB | mem x |"
    lines = [head, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        mem = "n/a" if r["peak_bytes"] is None else f"{r['peak_bytes'] / 2**20:.0f}"
        memx = "n/a" if r["memory_ratio"] is None else f"{r['memory_ratio']:.2f}"
        lines.append(f"| {r['seq']} | {r['kind']} | {r['path']} | {r['params']:,} | {r['forward_s'] * 1e3:.1f} | {r['forward_ratio']:.2f} "
                     f"| {r['fwd_bwd_s'] * 1e3:.1f} | {r['fwd_bwd_ratio']:.2f} | {mem} | {memx} |")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="small sizes (batch 2, seq 128/256, 2 repeats): a smoke run")
    p.add_argument("--kinds", nargs="+", default=list(DEFAULT_KINDS), help="attention kinds to time (default: %(default)s)")
    p.add_argument("--seqs", nargs="+", type=int, default=[512, 1024, 2048])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--jsonl", default=None, help="also write one JSON object per row to this file")


def run(args: argparse.Namespace) -> list[dict]:
    if args.quick:
        args.batch, args.seqs, args.repeats, args.warmup = 2, [128, 256], 2, 1
    for kind in args.kinds:
        parse_kind(kind)  # fail before any timing on a typo
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    env = {"torch": torch.__version__, "threads": torch.get_num_threads(), "device": str(device), "machine": platform.machine()}
    print(f"# attention layer benchmark: batch {args.batch}, d_model {args.d_model}, {args.heads} heads, "
          f"causal={args.causal}, torch {env['torch']}, {env['threads']} threads, {device}", file=sys.stderr)
    try:
        from tqdm import tqdm
    except ImportError:  # the core install has no tqdm: run without a bar
        tqdm = None
    per_seq = []
    for seq in args.seqs:
        layers = layer_candidates(args.kinds, args.d_model, args.heads, seq, args.causal)
        for layer, _ in layers.values():
            layer.to(device).train()
        total = 2 * args.repeats * len(layers)
        bar = tqdm(total=total, desc=f"time, seq {seq}", leave=False, file=sys.stderr) if tqdm else None
        rows = bench_seq(layers, args.batch, seq, args.d_model, args.repeats, args.warmup, device, bar.update if bar else None)
        if bar:
            bar.close()
        per_seq.append((seq, layers, rows))
    all_rows = []
    for seq, layers, rows in per_seq:
        measure_memory(rows, args.causal, device)
        for r in rows:
            r.update(env)
        all_rows += rows
        print(format_table(rows), flush=True)
    if args.jsonl:
        with open(args.jsonl, "w") as f:
            for r in all_rows:
                f.write(json.dumps(r) + "\n")
    return all_rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m synthesizer.bench attention", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    run(p.parse_args(argv))
