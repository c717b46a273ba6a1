"""What a benchmark row records about where it ran, and an optional progress bar."""

from __future__ import annotations

import os
import platform
import sys

import torch


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(device: torch.device) -> dict:
    """torch version, thread count, device, CPU and core count: stored in every row."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    return {"torch": torch.__version__, "threads": torch.get_num_threads(), "device": str(device),
            "device_name": name, "cores": os.cpu_count(), "python": platform.python_version()}


class _NoBar:
    """Stands in for a tqdm bar where tqdm is not installed (the core install has none)."""

    def update(self, n: int = 1) -> None:
        pass

    def __enter__(self) -> "_NoBar":
        return self

    def __exit__(self, *exc) -> None:
        pass


def progress_bar(total: int, desc: str):
    """A tqdm bar on stderr (a context manager with ``update``), or a silent stand-in without tqdm."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, leave=False, file=sys.stderr)
