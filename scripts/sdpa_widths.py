"""How the fused kernel's time grows with the head width: ``scaled_dot_product_attention`` forward+backward
with q, k and v all at each width (the fused path pads them to one width: see
``synthesizer/attention/ops/fused.py``). Widths are timed round-robin in one run; medians, and ratios to
the first width.

    python scripts/sdpa_widths.py --seqs 1024 2048 --widths 64 65 72 128 129 136 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def time_widths(seqs: list[int], widths: list[int], repeats: int, batch: int, heads: int) -> dict[int, dict[int, float]]:
    """{seq: {width: median seconds of one forward+backward}}, after one untimed round."""
    medians = {}
    for n in seqs:
        inputs = {w: [torch.randn(batch, heads, n, w, requires_grad=True) for _ in range(3)] for w in widths}
        grads = {w: torch.randn(batch, heads, n, w) for w in widths}
        times: dict[int, list[float]] = {w: [] for w in widths}
        for round_ in range(repeats + 1):
            for w in widths:  # round-robin: a load change hits every width alike
                q, k, v = inputs[w]
                start = time.perf_counter()
                F.scaled_dot_product_attention(q, k, v, scale=1.0).backward(grads[w])
                if round_:
                    times[w].append(time.perf_counter() - start)
        medians[n] = {w: statistics.median(t) for w, t in times.items()}
    return medians


def main(argv: list[str] | None = None) -> dict[int, dict[int, float]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seqs", type=int, nargs="+", default=[1024, 2048])
    p.add_argument("--widths", type=int, nargs="+", default=[64, 65, 72, 128, 129, 136])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    medians = time_widths(args.seqs, args.widths, args.repeats, args.batch, args.heads)
    for n, by_width in medians.items():
        base = by_width[args.widths[0]]
        print(f"seq {n}: " + ", ".join(f"{w}: {t * 1e3:.0f} ms ({t / base:.2f}x)" for w, t in by_width.items()))
    return medians


if __name__ == "__main__":
    main()
