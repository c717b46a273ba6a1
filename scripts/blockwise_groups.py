"""What the blockwise kernel's example groups buy at short lengths: forward+backward of a layer in training
(dropout on, so ``impl="auto"`` runs ``blockwise`` for a random mixture or a position bias) at each
(batch, seq), on the reference path, on ``blockwise`` one example a step (``GROUP_ELEMENTS = 1``: the
kernel before it grouped examples) and on ``blockwise`` with its groups. The three are timed round-robin in
one run; medians, and ratios to the reference path.

    python scripts/blockwise_groups.py --shapes 200x16 64x44 32x128 8x512 --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from synthesizer.attention import SynthesizerAttention
from synthesizer.attention.ops import blockwise

# (name, impl, GROUP_ELEMENTS); None: the kernel's own
VARIANTS = (("reference", "reference", None), ("one example a step", "blockwise", 1), ("groups", "blockwise", None))


def shape(text: str) -> tuple[int, int]:
    """'BxN' -> (batch, seq)."""
    try:
        batch, seq = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a shape is BATCHxSEQ, such as 64x32; got {text!r}") from None
    return batch, seq


def time_shapes(shapes: list[tuple[int, int]], kind: str, d_model: int, heads: int,
                repeats: int) -> dict[tuple[int, int], dict[str, float]]:
    """{(batch, seq): {variant: median seconds of one forward+backward}}, after one untimed round."""
    default_groups = blockwise.GROUP_ELEMENTS
    medians = {}
    try:
        for batch, n in shapes:
            torch.manual_seed(0)
            layers = {name: SynthesizerAttention(d_model, heads, max_len=n, kind=kind, dropout=0.1, impl=impl).train()
                      for name, impl, _ in VARIANTS}
            x = torch.randn(batch, n, d_model, requires_grad=True)
            padding = torch.zeros(batch, n, dtype=torch.bool)
            padding[: batch // 2, n - n // 4:] = True  # half the examples end in padding, as a bucketed batch's do
            times: dict[str, list[float]] = {name: [] for name, _, _ in VARIANTS}
            for round_ in range(repeats + 1):
                for name, _, groups in VARIANTS:  # round-robin: a load change hits every variant alike
                    blockwise.GROUP_ELEMENTS = default_groups if groups is None else groups
                    start = time.perf_counter()
                    layers[name](x, padding).sum().backward()
                    if round_:
                        times[name].append(time.perf_counter() - start)
            medians[(batch, n)] = {name: statistics.median(t) for name, t in times.items()}
    finally:
        blockwise.GROUP_ELEMENTS = default_groups
    return medians


def main(argv: list[str] | None = None) -> dict[tuple[int, int], dict[str, float]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", type=shape, nargs="+", default=[(200, 16), (64, 44), (32, 128), (8, 512)],
                   help="BATCHxSEQ each (default: 200x16 64x44 32x128 8x512)")
    p.add_argument("--kind", default="random+vanilla")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    medians = time_shapes(args.shapes, args.kind, args.d_model, args.heads, args.repeats)
    for (batch, n), by_variant in medians.items():
        base = by_variant["reference"]
        print(f"batch {batch}, seq {n}: " + ", ".join(f"{name}: {t * 1e3:.1f} ms ({t / base:.2f}x)"
                                                       for name, t in by_variant.items()))
    return medians


if __name__ == "__main__":
    main()
