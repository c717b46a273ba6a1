"""Wall-clock timing with warm-up, interleaved repeats and medians."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_once(fn: Callable[[], object], device: torch.device) -> float:
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def interleaved_medians(fns: dict[str, Callable[[], object]], device: torch.device, repeats: int, warmup: int,
                        progress: Callable[[], None] | None = None, *,
                        samples: dict[str, list[float]] | None = None) -> dict[str, dict[str, float]]:
    """Time every function ``repeats`` times, round-robin so that load on a shared machine hits all
    of them alike; return median, min and max seconds per name (``samples``, if given, receives every
    repeat's seconds per name, in order: the i-th of two names were timed back to back)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples = {} if samples is None else samples
    samples.update({name: [] for name in fns})
    for _ in range(repeats):
        for name, fn in fns.items():
            samples[name].append(time_once(fn, device))
            if progress:
                progress()
    return {name: {"median": statistics.median(s), "min": min(s), "max": max(s)} for name, s in samples.items()}
