"""Peak memory of a piece of work: CUDA allocator statistics on GPU, peak resident set size on CPU."""

from __future__ import annotations

import ctypes
import re
from typing import Callable

import torch


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(re.search(rf"{field}:\s+(\d+)", f.read()).group(1))


def release_freed_memory_at_once() -> None:
    """Make glibc return every freed block above 64 KiB to the kernel, so that resident memory follows
    the live tensors (otherwise freed heap pages stay resident and hide later peaks). Slows
    allocation a little: call it after the timings."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 64 * 1024)  # M_MMAP_THRESHOLD: fixed, which also stops its dynamic growth
        libc.mallopt(-1, 64 * 1024)  # M_TRIM_THRESHOLD
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def cpu_peak_supported() -> bool:
    try:
        _status_kib("VmHWM")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_bytes(fn: Callable[[], object], device: torch.device) -> int | None:
    """Bytes allocated at the peak of ``fn()`` above what was allocated before it (None if unknown).

    On CPU this is the growth of the process's peak resident set (Linux: the kernel's high-water
    mark, reset through /proc/self/clear_refs), which counts every tensor the work keeps alive.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    if not cpu_peak_supported():
        return None
    before = _status_kib("VmRSS")
    fn()
    return (_status_kib("VmHWM") - before) * 1024


def _main(spec_json: str) -> None:
    """Child process of the attention benchmark: print the peak bytes of one forward+backward."""
    import json

    from .attention import build_layer

    spec = json.loads(spec_json)
    device = torch.device(spec["device"])
    if device.type == "cpu":
        release_freed_memory_at_once()
    layer = build_layer(spec["kind"], spec["d_model"], spec["heads"], spec["seq"], spec["causal"]).to(device)
    x = torch.randn(spec["batch"], spec["seq"], spec["d_model"], device=device, requires_grad=True)
    grad = torch.randn_like(x)
    peaks = []
    for _ in range(2):  # the first run also pays for one-off allocations
        layer.zero_grad(set_to_none=True)
        x.grad = None
        peaks.append(peak_bytes(lambda: layer(x).backward(grad), device))
    print(peaks[-1] if peaks[-1] is not None else "unknown")


if __name__ == "__main__":
    import sys

    _main(sys.argv[1])
