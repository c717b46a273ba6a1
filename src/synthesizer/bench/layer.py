"""Layer-level benchmark: every attention kind and baseline over sequence lengths.

    python -m synthesizer.bench layer [--quick] [--seqs 256 512 1024 2048 4096] [--out results/bench]

For each length all layers are timed round-robin (forward under no_grad, then forward+backward),
medians and min-max over repeats after warm-up; ratios are to ``vanilla`` and to the plain fused
``sdpa`` layer of the same run. Peak memory is measured afterwards, one fresh process per layer.
Every layer runs at every length up to ``--always-upto`` (2048, where the targets are stated); past
that, a layer whose forward+backward median exceeded ``--max-call-s`` is not run at longer lengths
(its rows say so), which keeps the O(n^2) layers from eating the whole time budget.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

import torch
from torch import nn

from ..attention.names import PAPER_KINDS
from .env import environment, progress_bar
from .flops import layer_flops
from .timed_layers import PYPI_LINFORMER, build_layer, layer_names, layer_path, pypi_linformer_available
from .memory import in_fresh_process
from .timing import interleaved_medians

DEFAULT_KINDS = PAPER_KINDS
DEFAULT_BASELINES = ("linformer", PYPI_LINFORMER, "lightconv", "dynamicconv")
FULL = {"batch": 2, "seqs": [256, 512, 1024, 2048, 4096], "d_model": 512, "heads": 8, "repeats": 3, "warmup": 1,
        "max_call_s": 2.5}
QUICK = {"batch": 2, "seqs": [32, 64, 128, 256], "d_model": 128, "heads": 4, "repeats": 2, "warmup": 1, "max_call_s": 2.5}


def time_layers(layers: dict[str, nn.Module], batch: int, seq: int, d: int, repeats: int, warmup: int,
                device: torch.device, progress: Callable[[], None] | None = None) -> dict[str, dict]:
    """name -> {"forward": stats, "fwd_bwd": stats}, stats as from ``interleaved_medians``."""
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

    fwd = interleaved_medians({n: forward(l) for n, l in layers.items()}, device, repeats, warmup, progress)
    fwd_bwd = interleaved_medians({n: forward_backward(l) for n, l in layers.items()}, device, repeats, warmup, progress)
    return {n: {"forward": fwd[n], "fwd_bwd": fwd_bwd[n]} for n in layers}


def measure_memory(seqs: dict[str, list[int]], batch: int, d: int, heads: int, causal: bool,
                   device: torch.device, threads: int) -> dict[str, dict[int, dict]]:
    """Peaks of the layers ``seqs`` names, each at its lengths, in one fresh process after the timings
    (see ``memory.layer_peaks``): {name: {seq: {"forward": bytes, "fwd_bwd": bytes}}}, {} on failure."""
    spec = {"seqs": seqs, "batch": batch, "d_model": d, "heads": heads, "causal": causal,
            "device": str(device), "threads": threads}
    found = in_fresh_process(spec, ", ".join(seqs))
    return {name: {int(k): v for k, v in peaks.items()} for name, peaks in found.items()}


def _add_ratios(rows: list[dict], fields: tuple[str, ...]) -> None:
    """``<field>_vs_vanilla`` and ``<field>_ratio`` (to sdpa) for every row of one length."""
    for ref, suffix in (("vanilla", "_vs_vanilla"), ("sdpa", "_ratio")):
        base = next((r for r in rows if r["kind"] == ref), None)
        for r in rows:
            for f in fields:
                ok = base is not None and r.get(f) is not None and base.get(f)
                r[f.removesuffix("_s").removesuffix("_bytes") + suffix] = r[f] / base[f] if ok else None


def _fill_preset(args: argparse.Namespace) -> None:
    """Options left unset take the --quick or the full preset's value."""
    preset = QUICK if args.quick else FULL
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)


def _installed_baselines(baselines: list[str]) -> list[str]:
    """``baselines`` less the PyPI Linformer when that package is not installed (a note says so)."""
    baselines = list(baselines)
    if PYPI_LINFORMER in baselines and not pypi_linformer_available():
        print("# note: the PyPI 'linformer' package is not installed (pip install 'synthesizer-pytorch[bench]'): "
              "its row is skipped", file=sys.stderr)
        baselines.remove(PYPI_LINFORMER)
    return baselines


def _time_length(args: argparse.Namespace, names: list[str], seq: int, device: torch.device, env: dict) -> list[dict]:
    """One row per layer of ``names`` timed at length ``seq``."""
    torch.manual_seed(0)
    layers = {name: build_layer(name, args.d_model, args.heads, seq, args.causal).to(device).train() for name in names}
    with progress_bar(2 * (args.repeats + args.warmup) * len(layers), f"layer, seq {seq}") as bar:
        stats = time_layers(layers, args.batch, seq, args.d_model, args.repeats, args.warmup, device, bar.update)
    rows = []
    for name, layer in layers.items():
        kind = name.partition(" [")[0]
        row = {"bench": "layer", "kind": name, "path": layer_path(layer), "seq": seq, "batch": args.batch,
               "d_model": args.d_model, "heads": args.heads, "causal": args.causal,
               "params": sum(p.numel() for p in layer.parameters()),
               "flops": layer_flops(kind, args.batch, seq, args.d_model, args.heads, seq)}
        for part in ("forward", "fwd_bwd"):
            s = stats[name][part]
            row |= {f"{part}_s": s["median"], f"{part}_min_s": s["min"], f"{part}_max_s": s["max"]}
        rows.append(row | env)
    return rows


def _time_lengths(args: argparse.Namespace, names: list[str], device: torch.device, env: dict
                  ) -> tuple[list[dict], dict[str, str]]:
    """Rows of every layer at every length, and {layer: why} for layers dropped from longer lengths
    (a forward+backward over ``--max-call-s``)."""
    rows, active, dropped = [], list(names), {}
    for seq in sorted(args.seqs):
        seq_rows = _time_length(args, active, seq, device, env)
        for row in seq_rows:
            name, t = row["kind"], row["fwd_bwd_s"]
            if args.max_call_s and seq >= args.always_upto and t > args.max_call_s:
                active.remove(name)
                dropped[name] = f"forward+backward took {t:.1f} s at seq {seq} (> --max-call-s {args.max_call_s})"
        rows += seq_rows
    return rows, dropped


def _add_memory(args: argparse.Namespace, names: list[str], rows: list[dict], device: torch.device, env: dict) -> None:
    """Each row's ``peak_forward_bytes``, ``peak_bytes`` and ``activation_bytes`` (the forward+backward's peak
    less the parameters' gradients, ``param_grad_bytes``), measured in fresh processes."""
    # One process per layer, so that nothing another layer left behind can hide a peak; the
    # quick run shares one (each start costs seconds) and relies on freed memory going back at once.
    seqs = {name: [r["seq"] for r in rows if r["kind"] == name] for name in names}
    groups = [seqs] if args.quick else [{name: s} for name, s in seqs.items()]
    with progress_bar(len(groups), "layer, memory") as bar:
        for group in groups:
            peaks = measure_memory(group, args.batch, args.d_model, args.heads, args.causal, device, env["threads"])
            for r in rows:
                p = peaks.get(r["kind"], {}).get(r["seq"], {})
                if r["kind"] in group:
                    r["peak_forward_bytes"], r["peak_bytes"] = p.get("forward"), p.get("fwd_bwd")
                    r["param_grad_bytes"], r["activation_bytes"] = p.get("param_grads"), p.get("activations")
            bar.update()


def run(args: argparse.Namespace) -> list[dict]:
    """Time (and measure) every layer at every length; returns one row per (layer, length)."""
    _fill_preset(args)
    baselines = _installed_baselines(args.baselines)
    names = layer_names(args.kinds, baselines, args.causal, candidates=not args.no_candidates)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    env = environment(device)
    print(f"# layer benchmark: batch {args.batch}, d_model {args.d_model}, {args.heads} heads, causal={args.causal}, "
          f"torch {env['torch']}, {env['threads']} threads, {device}", file=sys.stderr)
    rows, dropped = _time_lengths(args, names, device, env)
    for name, why in dropped.items():
        print(f"# {name}: not run at longer lengths: {why}", file=sys.stderr)
    if not args.no_memory:
        _add_memory(args, names, rows, device, env)
    for seq in sorted(args.seqs):
        _add_ratios([r for r in rows if r["seq"] == seq],
                    ("forward_s", "fwd_bwd_s") + (() if args.no_memory else ("peak_bytes", "activation_bytes")))
    for r in rows:
        r["skipped_longer"] = dropped.get(r["kind"])
    return rows


def add_shape_arguments(p: argparse.ArgumentParser, full: dict, timed: str, causal: str) -> None:
    """The lengths, sizes and repeats of a layer timing (``full``: its defaults; ``timed``: what one repeat
    times; ``causal``: the help of ``--causal``), shared by the layer and dispatch benchmarks."""
    p.add_argument("--seqs", nargs="+", type=int, default=None, help=f"sequence lengths (default: {full['seqs']})")
    p.add_argument("--batch", type=int, default=None, help=f"default: {full['batch']}")
    p.add_argument("--d-model", type=int, default=None, help=f"default: {full['d_model']}")
    p.add_argument("--heads", type=int, default=None, help=f"default: {full['heads']}")
    p.add_argument("--causal", action="store_true", help=causal)
    p.add_argument("--repeats", type=int, default=None, help=f"timed runs per {timed} (default: {full['repeats']})")
    p.add_argument("--warmup", type=int, default=None, help=f"untimed runs first (default: {full['warmup']})")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK}")
    p.add_argument("--kinds", nargs="+", default=list(DEFAULT_KINDS), help="Synthesizer kinds (default: %(default)s)")
    p.add_argument("--baselines", nargs="*", default=list(DEFAULT_BASELINES), help="baselines (default: %(default)s)")
    add_shape_arguments(p, FULL, "layer", "causal layers (encoder-only baselines are left out)")
    p.add_argument("--max-call-s", type=float, default=None,
                   help=f"drop a layer from longer lengths once its forward+backward takes longer (default: {FULL['max_call_s']}; 0: never)")
    p.add_argument("--always-upto", type=int, default=2048,
                   help="every layer runs at every length up to this one, however slow (default: %(default)s, the targets' length)")
    p.add_argument("--no-candidates", action="store_true", help="no extra rows for the candidate paths of random mixtures")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurements")


def device_argument(text: str) -> str:
    """``--device``: a torch device name, and for ``cuda``/``cuda:N`` a GPU that this torch sees
    (otherwise argparse's one-line error, before anything runs)."""
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a torch device; use cpu, cuda or cuda:N") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{text!r}: this torch sees no CUDA device "
                                             f"(torch {torch.__version__}, torch.cuda.is_available() is False)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise argparse.ArgumentTypeError(f"{text!r}: only {torch.cuda.device_count()} CUDA device(s), "
                                             f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    return text


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--device", type=device_argument, default="cpu",
                   help="where to run: cpu, cuda or cuda:N (default: %(default)s)")
    p.add_argument("--out", default="results/bench", help="results folder (default: %(default)s)")
    p.add_argument("--jsonl", default=None, help="also write the rows to this JSON lines file")
