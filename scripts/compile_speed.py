"""torch.compile against eager: training tokens/s of the small LM (lm-sotu-small's model) per attention kind,
and the time the first compiled step takes (tracing, inductor's code generation and C++ builds).

For every kind, an eager and a compiled copy of the same model (same initial weights) take training
steps (forward, cross-entropy, backward, AdamW step; only the model is compiled, as ``train.compile``
does) on the same random batch; the copies and the kinds are stepped round-robin, so load on a shared
machine hits them alike. Inductor's caches go to a fresh temporary folder, so every compile is cold.
Prints a markdown table: tokens/s as the median over the timed steps [min-max], and compiled / eager
as the median of the per-round ratios (each round times a kind's eager step right before its
compiled one, so a load change between rounds cancels out of the ratio).

    nice -n 0 python scripts/compile_speed.py --repeats 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

# before torch: a fresh inductor cache, so the compile times are those of a first run
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="compile-speed-"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from synthesizer.models import LanguageModel, ModelConfig  # noqa: E402
from synthesizer.training.optim import build_optimizer  # noqa: E402

KINDS = ("vanilla", "random", "dense", "random+vanilla")
# lm-sotu-small: d_model 128, 4 heads, 2 layers, d_ff 512, blocks of 64 tokens, 1024 tokens a batch,
# a 2000-token vocabulary, no dropout
SIZES = {"d_model": 128, "n_heads": 4, "n_layers": 2, "d_ff": 512, "seq": 64, "batch": 16, "vocab": 2000}


def _step(model, optimizer, ids):
    def step():
        optimizer.zero_grad(set_to_none=True)
        logits = model(ids)
        loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        optimizer.step()
    return step


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(kinds: list[str], repeats: int, sizes: dict = SIZES) -> list[dict]:
    """One row per kind: eager and compiled step seconds (median, min, max) and the first compiled step."""
    ids = torch.randint(3, sizes["vocab"], (sizes["batch"], sizes["seq"]), generator=torch.Generator().manual_seed(0))
    steps, first = {}, {}
    for kind in kinds:
        config = ModelConfig(vocab_size=sizes["vocab"], d_model=sizes["d_model"], n_heads=sizes["n_heads"],
                             n_layers=sizes["n_layers"], d_ff=sizes["d_ff"], max_len=sizes["seq"], dropout=0.0,
                             attention=kind)
        for mode in ("eager", "compiled"):
            torch.manual_seed(0)
            model = LanguageModel(config).train()
            runs = torch.compile(model) if mode == "compiled" else model
            steps[kind, mode] = _step(runs, build_optimizer(model, lr=1e-4), ids)
        _timed(steps[kind, "eager"])  # warm-up
        first[kind] = _timed(steps[kind, "compiled"])  # compiles forward and backward
        print(f"# {kind}: first compiled step {first[kind]:.1f} s", file=sys.stderr, flush=True)
    for key in steps:  # one more untimed step each: the compiled ones' first run after compiling
        steps[key]()
    samples = {key: [] for key in steps}
    for _ in range(repeats):
        for key, step in steps.items():  # round-robin over kinds and modes
            samples[key].append(_timed(step))
    tokens = sizes["batch"] * sizes["seq"]
    rows = []
    for kind in kinds:
        row = {"kind": kind, "first_compiled_step_s": first[kind], "tokens": tokens}
        for mode in ("eager", "compiled"):
            s = samples[kind, mode]
            row[mode] = {"median": statistics.median(s), "min": min(s), "max": max(s)}
        row["speedup"] = statistics.median(e / c for e, c in zip(samples[kind, "eager"], samples[kind, "compiled"]))
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| kind | first compiled step (s) | eager tokens/s | compiled tokens/s | compiled / eager |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        cells = []
        for mode in ("eager", "compiled"):
            m = r[mode]
            cells.append(f"{r['tokens'] / m['median']:.0f} [{r['tokens'] / m['max']:.0f}-{r['tokens'] / m['min']:.0f}]")
        ratio = r["speedup"]
        lines.append(f"| {r['kind']} | {r['first_compiled_step_s']:.1f} | {cells[0]} | {cells[1]} | {ratio:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kinds", nargs="+", default=list(KINDS))
    p.add_argument("--repeats", type=int, default=10, help="timed steps per model (default: %(default)s)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    load_before, cpu_before, wall_before = os.getloadavg()[0], time.process_time(), time.perf_counter()
    rows = measure(args.kinds, args.repeats)
    wall = time.perf_counter() - wall_before
    print(table(rows))
    threads = torch.get_num_threads()
    print(f"\ntorch {torch.__version__}, {threads} thread{'s' if threads != 1 else ''}, {os.cpu_count()} cores; "
          f"load average (1 min) {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; the main "
          f"process (not inductor's compile workers) used {(time.process_time() - cpu_before) / wall:.2f} cores "
          f"over {wall:.0f} s")
    return rows


if __name__ == "__main__":
    main()
