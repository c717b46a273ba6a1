"""Dispatch benchmark: the fastest kernel for each layer, mode and length on this machine, written as the
table ``impl="auto"`` reads (``attention/dispatch_table.py``).

    python -m synthesizer.bench dispatch [--quick] [--kinds ...] [--seqs 128 512 1024 2048] [--out results/bench]

For each kind and length, every ranked or candidate kernel that computes the layer (``dispatch.applicable_paths``,
``dispatch.candidate_paths``) is timed round-robin, forward and backward (``train``) and forward without gradients
(``eval``), medians over repeats after warm-up. Writes the rows like every benchmark, and ``OUT/dispatch_table.json``: point the package at it with
``SYNTHESIZER_DISPATCH_TABLE=OUT/dispatch_table.json`` (or ``dispatch_table.use_table``); the package ships the
reference machine's. Training without dropout is timed: a kernel that cannot run with dropout in training hands
over to its fallback whatever the table says.

A measured difference of a few percent is within this machine's run-to-run noise, so a kernel takes the first
place from the static ranking's choice (``dispatch.applicable_paths``' first) only where it is faster by more than
``--margin`` (5% by default); the table keeps every median, so the rule can be read off it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from ..attention.dispatch import applicable_paths, candidate_paths
from ..attention.dispatch_table import DispatchTable, Entry, layer_key
from ..attention.factory import build_mixer, resolve_kind
from ..attention.names import PAPER_KINDS
from ..errors import InputError
from .env import environment, progress_bar
from .layer import add_shape_arguments, time_layers

TABLE_FILE = "dispatch_table.json"
FULL = {"batch": 4, "seqs": [128, 512, 1024, 2048], "d_model": 512, "heads": 8, "repeats": 5, "warmup": 1}
QUICK = {"batch": 2, "seqs": [16, 64], "d_model": 32, "heads": 2, "repeats": 2, "warmup": 1}
MODE_PART = {"train": "fwd_bwd", "eval": "forward"}
MARGIN = 0.05  # the timing of time_layers each mode reads


def _fill(args: argparse.Namespace) -> None:
    preset = QUICK if args.quick else FULL
    for key, value in preset.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)


def _time_kind(args: argparse.Namespace, kind: str, seq: int, device: torch.device, env: dict) -> list[dict]:
    """One row per (kernel, mode) of ``kind`` at length ``seq``, ranked within each mode (1: the fastest)."""
    torch.manual_seed(0)
    parsed = resolve_kind(kind)
    paths = [*applicable_paths(tuple(parsed), device), *candidate_paths(tuple(parsed), device)]
    layers = {path: build_mixer(kind, args.d_model, args.heads, seq, causal=args.causal, impl=path).to(device).train()
              for path in paths}
    with progress_bar(2 * (args.repeats + args.warmup) * len(layers), f"dispatch, {kind}, seq {seq}") as bar:
        stats = time_layers(layers, args.batch, seq, args.d_model, args.repeats, args.warmup, device, bar.update)
    static = applicable_paths(tuple(parsed), device)[0]
    rows = []
    for mode, part in MODE_PART.items():
        ranked = sorted(layers, key=lambda path: stats[path][part]["median"])
        for rank, path in enumerate(ranked, 1):
            s = stats[path][part]
            rows.append({"bench": "dispatch", "kind": kind, "layer": layer_key(tuple(parsed)), "path": path,
                         "mode": mode, "rank": rank, "seq": seq, "batch": args.batch, "d_model": args.d_model,
                         "heads": args.heads, "causal": args.causal, "static": path == static,
                         "median_s": s["median"], "min_s": s["min"],
                         "max_s": s["max"]} | env)
    return rows


def table_of(rows: list[dict], device: str, measured_at: dict, margin: float = 0.0) -> DispatchTable:
    """The dispatch table of the benchmark's rows: one entry per (layer, mode, length), its kernels by rank,
    except that the static ranking's choice (the row marked ``static``) stays first unless the fastest beats it
    by more than ``margin`` (a fraction of its median)."""
    entries = []
    keys = dict.fromkeys((r["layer"], r["mode"], r["seq"]) for r in rows)
    for layer, mode, seq in keys:
        ranked = sorted((r for r in rows if (r["layer"], r["mode"], r["seq"]) == (layer, mode, seq)),
                        key=lambda r: r["rank"])
        static = next((r for r in ranked if r.get("static")), ranked[0])
        if ranked[0]["median_s"] >= static["median_s"] * (1 - margin):
            ranked = [static, *(r for r in ranked if r is not static)]
        entries.append(Entry(layer, device, mode, seq, tuple(r["path"] for r in ranked),
                             tuple(r["median_s"] for r in ranked)))
    return DispatchTable(tuple(entries), measured_at)


def run(args: argparse.Namespace) -> list[dict]:
    """Time every kernel of every kind at every length; write OUT/dispatch_table.json; return the rows."""
    _fill(args)
    for kind in args.kinds:  # every name checked before anything is timed
        if isinstance(resolve_kind(kind), str):
            raise InputError(f"{kind!r} is a baseline: the dispatch table ranks the kernels of Synthesizer kinds")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    env = environment(device)
    print(f"# dispatch benchmark: batch {args.batch}, d_model {args.d_model}, {args.heads} heads, causal={args.causal}, "
          f"torch {env['torch']}, {env['threads']} threads, {device}", file=sys.stderr)
    rows = [row for seq in sorted(args.seqs) for kind in args.kinds for row in _time_kind(args, kind, seq, device, env)]
    if not 0 <= args.margin < 1:
        raise InputError(f"--margin must be a fraction in [0, 1), got {args.margin}")
    measured_at = {"batch": args.batch, "d_model": args.d_model, "heads": args.heads, "causal": args.causal,
                   "repeats": args.repeats, "margin": args.margin, "command": getattr(args, "command_line", None),
                   **{k: env[k] for k in ("torch", "threads", "device_name", "cores")}}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = table_of(rows, device.type, measured_at, args.margin).save(Path(args.out) / TABLE_FILE)
    print(f"# dispatch table: {path} (SYNTHESIZER_DISPATCH_TABLE={path} makes impl='auto' read it)", file=sys.stderr)
    return rows


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK}")
    p.add_argument("--kinds", nargs="+", default=list(PAPER_KINDS), help="Synthesizer kinds (default: %(default)s)")
    add_shape_arguments(p, FULL, "kernel", "causal layers (default: bidirectional)")
    p.add_argument("--margin", type=float, default=MARGIN,
                   help="how much faster (a fraction) a kernel must be to take the first place from the static "
                        "ranking's choice (default: %(default)s)")
