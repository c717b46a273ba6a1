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
    Never negative: growth below the resolution of the kernel's counters is reported as 0.
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
    # The kernel folds each thread's RSS changes into these counters lazily (in batches of page
    # faults), so after tiny work the high-water mark can read below the earlier VmRSS. Such work
    # grew memory by less than the counters resolve: 0 is the honest answer, not a negative size.
    return max(_status_kib("VmHWM") - before, 0) * 1024


def in_fresh_process(spec: dict, what: str, module: str = "synthesizer.bench.memory") -> dict:
    """Run ``python -m module`` (this module's ``_main``, or bench.model's) on ``spec`` in a new interpreter
    (so earlier work leaves no resident memory behind) and return its JSON answer; {} with a note on
    stderr naming ``what`` on failure."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", module, json.dumps(spec)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        print(f"# memory of {what} not measured: {out.stderr.strip().splitlines()[-1:] or out.returncode}",
              file=sys.stderr)
        return {}
    return json.loads(out.stdout.strip().splitlines()[-1])


def parameter_gradient_bytes(module: torch.nn.Module) -> int:
    """The bytes of the gradients a backward pass gives ``module``'s trainable parameters: weights' memory,
    not activations (a random synthesizer's (H, n, n) gradient is as large as its R)."""
    return sum(p.nbytes for p in module.parameters() if p.requires_grad)


def activation_bytes(peak: int | None, module: torch.nn.Module) -> int | None:
    """A forward+backward's activation memory: its peak growth less the parameters' own gradients (None with
    no peak measured; at least 0, as the peak's counters are coarse)."""
    return None if peak is None else max(peak - parameter_gradient_bytes(module), 0)


def layer_peaks(name: str, seqs: list[int], batch: int, d_model: int, heads: int, causal: bool,
                device: torch.device) -> dict[int, dict[str, int | None]]:
    """Peak bytes of one forward (no_grad) and one forward+backward of layer ``name`` at each length, the
    bytes of its parameters' gradients and the activations (the forward+backward's peak less them).

    The layer is rebuilt per length (max_len = seq, as in the timings) and first run twice on a
    16-token input, which pays the one-off allocations (thread pools, kernel set-up) outside the peak.
    """
    from .timed_layers import build_layer

    peaks = {}
    for seq in sorted(seqs):
        layer = build_layer(name, d_model, heads, seq, causal).to(device)
        warm = torch.randn(batch, min(16, seq), d_model, device=device, requires_grad=True)
        for _ in range(2):  # exactly the measured call (a first backward from a given gradient costs 30+ MiB once)
            layer(warm).backward(torch.randn_like(warm))
        layer.zero_grad(set_to_none=True)
        x = torch.randn(batch, seq, d_model, device=device, requires_grad=True)
        grad = torch.randn_like(x)

        def forward():
            with torch.no_grad():
                layer(x)

        fwd = peak_bytes(forward, device)
        fwd_bwd = peak_bytes(lambda: layer(x).backward(grad), device)
        peaks[seq] = {"forward": fwd, "fwd_bwd": fwd_bwd, "param_grads": parameter_gradient_bytes(layer),
                      "activations": activation_bytes(fwd_bwd, layer)}
        del layer, x, grad, warm
    return peaks


def fresh_process_device(spec: dict) -> torch.device:
    """The device of a child process's ``spec``, with its threads set and freed memory returned at once."""
    device = torch.device(spec["device"])
    if device.type == "cpu":
        release_freed_memory_at_once()
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    return device


def _main(spec_json: str) -> None:
    """Child process of the layer benchmark: print the peaks of the named layers at their lengths, as JSON."""
    import json

    spec = json.loads(spec_json)
    device = fresh_process_device(spec)
    # The process's first backward pass starts autograd's machinery: pay for it before any peak.
    layer_peaks("sdpa", [16], 1, spec["d_model"], spec["heads"], spec["causal"], device)
    found = {}
    for name, seqs in spec["seqs"].items():
        peaks = layer_peaks(name, seqs, spec["batch"], spec["d_model"], spec["heads"], spec["causal"], device)
        found[name] = {str(k): v for k, v in peaks.items()}
    print(json.dumps(found))


if __name__ == "__main__":
    import sys

    _main(sys.argv[1])
