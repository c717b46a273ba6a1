"""The GPU check's Python part (run by ``scripts/gpu_check.sh``): every CUDA path of the attention
layer against the reference, then forward+backward time and peak memory of the layers compared in
``docs/gpu.md``.

    python scripts/gpu_paths.py check --out DIR      # correctness, float32 and bfloat16, NaN check
    python scripts/gpu_paths.py time --out DIR       # batch 8, d_model 512, 8 heads, seq 1024-8192
    python scripts/gpu_paths.py time --dry-run       # print what would run, run nothing (no GPU needed)
    python scripts/gpu_paths.py check --device cpu --tiny --out DIR   # a smoke run at toy sizes on CPU

``check`` compares each path that can run on the device (``impl=`` forced: sdpa_bias, triton, flex,
fused, shared, blockwise) with ``impl="reference"`` holding the same weights, padded (examples
padded at the end by different amounts, one almost wholly) and ragged, bidirectional and causal: in float32 (TF32 off)
within ``F32_TOL``, in bfloat16 within ``BF16_SLACK`` times the bfloat16 reference's own error against
float32 plus eps; every output and gradient must be finite. It writes check.jsonl and check.md and
exits 1 if any case fails. ``time`` writes timing.jsonl and timing.md (medians, ratios to the
vanilla layer on SDPA, the issue's targets); a row that runs out of memory or past the time
budget is recorded as such. Without CUDA (and without ``--device cpu``) both exit 2 at once.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch

from synthesizer.attention import SynthesizerAttention
from synthesizer.attention.dispatch import KERNELS, applicable_paths, opt_in_paths
from synthesizer.attention.kinds import parse_kind
from synthesizer.bench.timed_layers import build_layer
from synthesizer.bench.memory import peak_bytes
from synthesizer.bench.timing import time_once

CHECK_KINDS = ["random+vanilla", "random+dense", "fixed_random+vanilla", "factorized_random+vanilla",
               "dense+vanilla", "random", "dense", "vanilla"]
# float32 on a GPU, TF32 off: a few hundred-term reductions in another order; 1e-4 of the largest
# value (800 eps) leaves room, and a wrong mask or scale gives 1e-2 and more.
F32_TOL = 1e-4
# bfloat16: within this many times (the bfloat16 reference's own error + eps). Paths that round
# partial sums to bfloat16 (blockwise) show up to 2.2x on the cancelling alpha gradient at toy
# sizes; a wrong mask or scale gives errors of order 1, 30 times the bound.
BF16_SLACK = 4.0
GRAD_FLOOR = 1e-2  # as tests/tolerances.py: a cancelling gradient (alpha) is judged against its terms
# The timed rows: (label, the benchmark's layer name, or "kind [path]").
TIME_ROWS = [
    ("vanilla (sdpa)", "sdpa"),
    ("random", "random"),
    ("dense", "dense"),
    ("random+vanilla [sdpa_bias]", "random+vanilla [sdpa_bias]"),
    ("random+vanilla [triton]", "random+vanilla [triton]"),
    ("random+vanilla [flex]", "random+vanilla [flex]"),
    ("random+dense [sdpa_bias]", "random+dense [sdpa_bias]"),
    ("random+dense [triton]", "random+dense [triton]"),
    ("dense+vanilla", "dense+vanilla"),
]
FULL = {"check": {"batch": 3, "d_model": 128, "heads": 2, "seq": 300, "max_len": 320},
        "time": {"batch": 8, "d_model": 512, "heads": 8, "seqs": [1024, 2048, 4096, 8192], "repeats": 5, "warmup": 2}}
TINY = {"check": {"batch": 3, "d_model": 32, "heads": 2, "seq": 20, "max_len": 24},
        "time": {"batch": 2, "d_model": 32, "heads": 2, "seqs": [16, 32], "repeats": 1, "warmup": 1}}


# ---------------------------------------------------------------------------------------------- check
def check_cases(kinds: list[str]) -> list[tuple[str, str]]:
    """(kind, path) for every path that computes the kind and can run on CUDA (forced by name), but
    reference (fused_bias, a CPU kernel, hands over to blockwise there)."""
    cuda, cases = torch.device("cuda"), []
    for kind in kinds:
        components = parse_kind(kind)
        paths = applicable_paths(components, cuda) + opt_in_paths(components)
        runs = {p: getattr(KERNELS[p], "runs", None) for p in paths}
        cases += [(kind, p) for p in dict.fromkeys(paths)
                  if p != "reference" and (runs[p] is None or runs[p](cuda, False, 0.0))]
    return cases


def _padding(batch: int, n: int, device: torch.device) -> torch.Tensor:
    """Example 0 unpadded, 1 padded at the end, 2 (and on) all but their first 3 tokens padded. Inputs
    are left-aligned (the layer refuses padding before a real token), so padding is on the right."""
    mask = torch.zeros(batch, n, dtype=torch.bool)
    mask[1, n - max(2, n // 8):] = True
    mask[2:, 3:] = True
    return mask.to(device)


def _run(layer, x, pad, grad_out):
    layer.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    out = layer(x, pad)
    (out.float() * grad_out).sum().backward()
    grads = {"x": x.grad.float()}
    grads.update({name: p.grad.float() for name, p in layer.named_parameters() if p.grad is not None})
    return out.float().detach(), grads


def _errors(out, grads, out_r, grads_r) -> tuple[float, dict[str, float]]:
    scale = max(g.abs().max().item() for g in grads_r.values())
    out_err = ((out - out_r).abs().max() / out_r.abs().max().clamp_min(1e-30)).item()
    grad_errs = {name: ((grads[name] - g).abs().max() / max(g.abs().max().item(), GRAD_FLOOR * scale, 1e-30)).item()
                 for name, g in grads_r.items() if name in grads}
    missing = set(grads_r) - set(grads)
    grad_errs.update({name: math.inf for name in missing})
    return out_err, grad_errs


def check_case(kind: str, path: str, causal: bool, dtype: torch.dtype, sizes: dict, device: torch.device) -> dict:
    """One comparison with the reference; the row check.jsonl gets."""
    row = {"kind": kind, "path": path, "causal": causal, "dtype": str(dtype).removeprefix("torch.")}
    d, h, max_len, batch, n = sizes["d_model"], sizes["heads"], sizes["max_len"], sizes["batch"], sizes["seq"]
    torch.manual_seed(1)
    ref = SynthesizerAttention(d, h, max_len, kind, causal, impl="reference").to(device)
    if ref.alpha is not None:
        with torch.no_grad():
            ref.alpha.normal_()
    try:
        fast = SynthesizerAttention(d, h, max_len, kind, causal, impl=path).to(device)
    except ModuleNotFoundError as e:  # an opt-in path's package (triton) is not installed
        return row | {"status": "skipped", "why": str(e)}
    fast.load_state_dict(ref.state_dict())
    fast = fast.to(dtype)
    if fast.path != path:
        return row | {"status": "skipped", "why": f"runs {fast.path} on {device.type}"}
    gen = torch.Generator().manual_seed(3)
    x, grad_out = (torch.randn(batch, n, d, generator=gen).to(device) for _ in range(2))
    pad = _padding(batch, n, device)
    out, grads = _run(fast, x.to(dtype), pad, grad_out)
    out_r, grads_r = _run(ref, x, pad, grad_out)
    finite = bool(torch.isfinite(out).all()) and all(bool(torch.isfinite(g).all()) for g in grads.values())
    out_err, grad_errs = _errors(out, grads, out_r, grads_r)
    if dtype == torch.float32:
        bound_out, bounds = F32_TOL, {name: F32_TOL for name in grad_errs}
    else:  # the bfloat16 reference's own error sets the bar
        ref16 = SynthesizerAttention(d, h, max_len, kind, causal, impl="reference").to(device)
        ref16.load_state_dict(ref.state_dict())
        ref16 = ref16.to(dtype)
        out16, grads16 = _run(ref16, x.to(dtype), pad, grad_out)
        ref_out_err, ref_grad_errs = _errors(out16, grads16, out_r, grads_r)
        eps = torch.finfo(dtype).eps
        bound_out = BF16_SLACK * (ref_out_err + eps)
        bounds = {name: BF16_SLACK * (ref_grad_errs[name] + eps) for name in grad_errs}
    worst = max(grad_errs, key=lambda name: grad_errs[name] / bounds[name])
    ok = finite and out_err <= bound_out and all(grad_errs[k] <= bounds[k] for k in grad_errs)
    return row | {"status": "ok" if ok else "FAIL", "finite": finite, "out_err": out_err, "out_bound": bound_out,
                  "worst_grad": worst, "worst_grad_err": grad_errs[worst], "worst_grad_bound": bounds[worst]}


def run_check(args, sizes: dict, device: torch.device) -> int:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cases = check_cases(args.kinds or CHECK_KINDS)
    if args.dry_run:
        for kind, path in cases:
            print(f"check {kind} [{path}]: bidirectional and causal, float32 and bfloat16, {sizes}")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with open(out / "check.jsonl", "w") as f:
        for kind, path in cases:
            for causal in (False, True):
                for dtype in (torch.float32, torch.bfloat16):
                    try:
                        row = check_case(kind, path, causal, dtype, sizes, device)
                    except Exception as e:  # a crash is a failed case, reported with the rest
                        row = {"kind": kind, "path": path, "causal": causal, "dtype": str(dtype), "status": "FAIL",
                               "why": f"{type(e).__name__}: {e}"[:500]}
                    rows.append(row)
                    f.write(json.dumps(row) + "\n")
                    f.flush()
                    print(_check_line(row), flush=True)
                    _write_check_md(out, rows, len(cases) * 4)  # after every case: a cut run keeps its table
    return 1 if any(r["status"] == "FAIL" for r in rows) else 0


def _write_check_md(out: Path, rows: list[dict], planned: int) -> None:
    failed = sum(r["status"] == "FAIL" for r in rows)
    (out / "check.md").write_text("# Every CUDA path against the reference\n\n" + "\n".join(
        "- " + _check_line(r) for r in rows) + f"\n\n{len(rows)} of {planned} cases run: {len(rows) - failed} pass or "
        f"skip, {failed} fail.\n")


def _check_line(r: dict) -> str:
    head = f"{r['kind']} [{r['path']}] {'causal' if r['causal'] else 'bidir'} {r['dtype']}: {r['status']}"
    if "out_err" not in r:
        return f"{head} ({r.get('why', '')})"
    return (f"{head}; output {r['out_err']:.2e} (bound {r['out_bound']:.2e}), worst gradient {r['worst_grad']} "
            f"{r['worst_grad_err']:.2e} (bound {r['worst_grad_bound']:.2e}), finite {r['finite']}")


# ----------------------------------------------------------------------------------------------- time
def time_row(name: str, seq: int, sizes: dict, device: torch.device, causal: bool) -> dict:
    """Median forward+backward seconds and peak bytes of one layer at one length, under bfloat16 autocast."""
    try:
        layer = build_layer(name, sizes["d_model"], sizes["heads"], seq, causal).to(device)
    except ModuleNotFoundError as e:  # an opt-in path's package (triton) is not installed
        return {"status": "skipped", "why": str(e)}
    path = getattr(layer, "path", "fused")
    want = name.partition(" [")[2].rstrip("]")
    if want and path != want:
        return {"status": "skipped", "why": f"runs {path} on {device.type}"}
    x = torch.randn(sizes["batch"], seq, sizes["d_model"], device=device)
    grad = torch.randn_like(x)

    def step():
        layer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            out = layer(x)
        out.float().backward(grad)

    for _ in range(sizes["warmup"]):
        step()
    times = [time_once(step, device) for _ in range(sizes["repeats"])]
    return {"status": "ok", "path": path, "median_s": statistics.median(times), "min_s": min(times),
            "peak_bytes": peak_bytes(step, device)}


def run_time(args, sizes: dict, device: torch.device) -> int:
    plan = [(seq, label, name) for seq in sizes["seqs"] for label, name in TIME_ROWS]
    if args.dry_run:
        for seq, label, name in plan:
            print(f"time {label} ({name}) at seq {seq}: batch {sizes['batch']}, d_model {sizes['d_model']}, "
                  f"{sizes['heads']} heads, {sizes['warmup']} warm-up + {sizes['repeats']} timed steps")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start, rows = time.monotonic(), []
    with open(out / "timing.jsonl", "w") as f:
        for seq, label, name in plan:
            row = {"label": label, "layer": name, "seq": seq, "causal": args.causal}
            if time.monotonic() - start > args.budget_s:
                row |= {"status": "skipped", "why": f"past the {args.budget_s} s budget"}
            else:
                try:
                    row |= time_row(name, seq, sizes, device, args.causal)
                except torch.cuda.OutOfMemoryError:
                    row |= {"status": "oom"}
                except Exception as e:
                    row |= {"status": "error", "why": f"{type(e).__name__}: {e}"[:500]}
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            rows.append(row)
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(json.dumps(row), flush=True)
            (out / "timing.md").write_text(timing_table(rows, sizes))  # after every row: a cut run keeps its table
    return 0


def timing_table(rows: list[dict], sizes: dict) -> str:
    """Markdown: ms and MiB per layer and length, ratios to the vanilla SDPA layer, the targets."""
    seqs = sorted({r["seq"] for r in rows})
    base = {r["seq"]: r for r in rows if r["layer"] == "sdpa" and r["status"] == "ok"}
    lines = [f"Forward+backward, batch {sizes['batch']}, d_model {sizes['d_model']}, {sizes['heads']} heads, bfloat16 "
             "autocast: median ms (ratio to vanilla on SDPA) / peak MiB (ratio).", "",
             "| layer | " + " | ".join(f"seq {s}" for s in seqs) + " |", "|---|" + "---|" * len(seqs)]
    for label, _ in TIME_ROWS:
        cells = []
        for s in seqs:
            r = next((r for r in rows if r["label"] == label and r["seq"] == s), None)
            if r is None or r["status"] != "ok":
                cells.append("-" if r is None else r["status"])
                continue
            b = base.get(s)
            t = f"{r['median_s'] * 1e3:.1f} ms" + (f" ({r['median_s'] / b['median_s']:.2f}x)" if b else "")
            m = r["peak_bytes"]
            mem = "" if m is None else f" / {m / 2**20:.0f} MiB" + (
                f" ({m / b['peak_bytes']:.2f}x)" if b and b.get("peak_bytes") else "")
            cells.append(t + mem)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Targets (seq 2048-8192): random+vanilla at most 1.3x vanilla's time, random at most 0.6x, "
              "the mixtures' memory at most 1.5x.", ""]
    for s in [s for s in seqs if s >= 2048]:
        b = base.get(s)
        if b is None:
            continue
        for label, limit, key in (("random+vanilla", 1.3, "median_s"), ("random", 0.6, "median_s"),
                                  ("random+vanilla", 1.5, "peak_bytes"), ("random+dense", 1.5, "peak_bytes")):
            best = [r for r in rows if r["seq"] == s and r["status"] == "ok" and r.get(key)
                    and (r["label"] == label or r["label"].startswith(label + " ["))]
            if best:
                r = min(best, key=lambda r: r[key])
                ratio = r[key] / b[key]
                what = "time" if key == "median_s" else "memory"
                lines.append(f"- seq {s}: {label} {what}, best {r['label']}: {ratio:.2f}x "
                             f"({'meets' if ratio <= limit else 'misses'} {limit}x)")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("part", choices=["check", "time"])
    p.add_argument("--out", default="gpu-check", help="folder for the results (default: %(default)s)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a smoke run (with --tiny)")
    p.add_argument("--tiny", action="store_true", help=f"toy sizes: {TINY}")
    p.add_argument("--dry-run", action="store_true", help="print what would run and stop")
    p.add_argument("--kinds", nargs="+", default=None, help=f"check: kinds (default: {' '.join(CHECK_KINDS)})")
    p.add_argument("--seqs", nargs="+", type=int, default=None, help="time: lengths (default: 1024 2048 4096 8192)")
    p.add_argument("--causal", action="store_true", help="time: causal layers")
    p.add_argument("--budget-s", type=float, default=300.0, help="time: skip the rows left after this many seconds")
    args = p.parse_args(argv)
    sizes = dict((TINY if args.tiny else FULL)[args.part])
    if args.seqs:
        sizes["seqs"] = args.seqs
    if args.kinds:
        unknown = [k for k in args.kinds if k not in CHECK_KINDS and not _parses(k)]
        if unknown:
            p.error(f"unknown kinds {unknown}")
    device = torch.device(args.device)
    if not args.dry_run and device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_paths: error: no CUDA device (torch.cuda.is_available() is False); --device cpu --tiny runs a "
              "smoke test on CPU", file=sys.stderr)
        return 2
    return (run_check if args.part == "check" else run_time)(args, sizes, device)


def _parses(kind: str) -> bool:
    try:
        parse_kind(kind)
        return True
    except ValueError:
        return False


if __name__ == "__main__":
    sys.exit(main())
