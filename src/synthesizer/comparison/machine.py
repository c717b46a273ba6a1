"""What a comparison's runs are trained and timed on: the machine, recorded in results.json."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def machine_info() -> dict:
    """The CPU, cores, platform, Python, torch and its threads (and a GPU's name): what the timings were measured
    on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}
    try:
        import torch  # the comparison's runs need it; a results file is rendered without it

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


def load_average() -> float | None:
    """The 1-minute load average now, rounded (None where the platform has none): how busy the machine was, which
    timings are only as good as."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
