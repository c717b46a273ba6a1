"""The compiled CPU kernels: C++ sources beside this file, built on first use with torch's extension
builder (a C++ compiler and ninja, ``pip install ninja``) for this machine's CPU (``-march=native``, one build
per kind of CPU) and cached by torch (``TORCH_EXTENSIONS_DIR``, by default under ~/.cache), so only the first
process that needs one waits for the build (about 30 s).

Where a kernel cannot be built (no compiler, no ninja, a torch whose BLAS does not export ``sgemm_``) the
kernel that asked runs its PyTorch blocks instead, and a warning says why, once. ``SYNTHESIZER_COMPILED=0``
turns the compiled kernels off (nothing is built).
"""

from __future__ import annotations

import hashlib
import os
import platform
import warnings
from pathlib import Path
from types import ModuleType

ENV = "SYNTHESIZER_COMPILED"
# -ffast-math lets the compiler vectorise exp; the sources use no infinities or NaNs (see their comments).
FLAGS = ["-O3", "-march=native", "-ffast-math", "-fopenmp"]

_built: dict[str, ModuleType | None] = {}


def enabled() -> bool:
    """False where ``SYNTHESIZER_COMPILED=0``."""
    return os.environ.get(ENV, "1").strip() not in ("0", "false", "no", "off")


def load(name: str) -> ModuleType | None:
    """The compiled module of ``<name>.cpp`` (beside this file), built on the first call; None where it is
    turned off or cannot be built (a warning gives the reason, once per process)."""
    if not enabled():
        return None
    if name not in _built:
        _built[name] = _build(name)
    return _built[name]


def cpu_tag() -> str:
    """A short name of this CPU's kind (its architecture and instruction-set flags): a build made with
    -march=native for one CPU is kept apart from another's, as on a cluster whose nodes share a home folder."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as info:
            flags = next((line for line in info if line.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    return hashlib.sha1(f"{platform.machine()} {flags}".encode()).hexdigest()[:8]


def _build(name: str) -> ModuleType | None:
    try:
        from torch.utils.cpp_extension import load as build
        return build(f"synthesizer_{name}_{cpu_tag()}", [str(Path(__file__).with_name(f"{name}.cpp"))],
                     extra_cflags=FLAGS, extra_ldflags=["-fopenmp"], verbose=False)
    except Exception as error:  # noqa: BLE001  (any failure to build means: run the PyTorch blocks)
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        # the compiler's first error says more than the builder's last line ("build stopped")
        reason = next((line for line in lines if "error" in line.lower()), lines[-1] if lines else type(error).__name__)
        warnings.warn(f"the compiled CPU kernel {name} could not be built ({reason[:200]}); its PyTorch blocks run "
                      f"instead (set {ENV}=0 to skip the build)", RuntimeWarning, stacklevel=3)
        return None
