"""A one-minute tour: build every Synthesizer variant, run forward and backward on random data, and
print each one's parameters and time relative to vanilla.

    python -m synthesizer.demo [--seq 256] [--batch 4] [--d-model 256] [--heads 4]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from .attention import SynthesizerAttention
from .attention.names import PAPER_KINDS as KINDS


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m synthesizer.demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    torch.manual_seed(0)
    x = torch.randn(args.batch, args.seq, args.d_model, requires_grad=True)
    layers = {k: SynthesizerAttention(args.d_model, args.heads, args.seq, k) for k in KINDS}

    def step(layer: SynthesizerAttention) -> float:
        start = time.perf_counter()
        layer(x).square().mean().backward()
        return time.perf_counter() - start

    times: dict[str, list[float]] = {k: [] for k in KINDS}
    for layer in layers.values():
        step(layer)  # warm-up
    for _ in range(args.repeats):  # round-robin, so machine load hits every variant alike
        for kind, layer in layers.items():
            times[kind].append(step(layer))
    base = statistics.median(times["vanilla"])
    print(f"batch {args.batch}, seq {args.seq}, d_model {args.d_model}, {args.heads} heads; forward+backward, "
          f"median of {args.repeats}, torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    print(f"{'kind':<20} {'path':<10} {'logits params':>14} {'layer params':>13} {'ms':>8} {'x vanilla':>10}")
    for kind, layer in layers.items():
        counts = layer.param_counts()
        logits = sum(v for k, v in counts.items() if k != "values_output")
        ms = statistics.median(times[kind]) * 1e3
        print(f"{kind:<20} {layer.path:<10} {logits:>14,} {sum(counts.values()):>13,} {ms:>8.1f} {ms / base / 1e3:>10.2f}")
    mixtures = [k for k in KINDS if "+" in k]
    print("\nmixture weights softmax(alpha) start equal: " +
          ", ".join(f"{k} {layers[k].mixture_weights().tolist()}" for k in mixtures))


if __name__ == "__main__":
    main()
