"""``train.compile: true``: the training forward through ``torch.compile`` (the inductor backend).

Inductor generates C++ (CPU) or Triton (CUDA) kernels at the first call, so a machine without a
C++ compiler, or a CUDA setup without Triton, fails only then, minutes into a run, with a long
traceback. :func:`check_backend` compiles a tiny function first and turns such a failure into one
line. Only the module the training step calls is compiled; the Trainer keeps the plain module for
checkpoints (state-dict keys without ``_orig_mod.``) and evaluation.
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import InputError

BACKEND = "inductor"


def _probe(x: torch.Tensor) -> torch.Tensor:
    return (x * 2 + 1).softmax(-1).sum()


def check_backend(device: torch.device | str) -> None:
    """ValueError in one line unless ``torch.compile`` with inductor compiles and runs on ``device``."""
    try:
        torch.compile(_probe, backend=BACKEND, fullgraph=True)(torch.ones(8, device=device))
    except Exception as e:  # noqa: BLE001 -- any failure here means the backend cannot be used
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        reason = lines[0] if lines else type(e).__name__
        hint = "install a C++ compiler (g++ or clang++)" if torch.device(device).type == "cpu" else \
            "install Triton for this CUDA build of torch"
        raise InputError(f"train.compile: torch.compile's {BACKEND} backend does not work on this machine "
                         f"({type(e).__name__}: {reason[:200]}); {hint}, or set train.compile=false") from None


def compile_model(module: nn.Module, device: torch.device | str) -> nn.Module:
    """``torch.compile(module)`` after :func:`check_backend`; the result shares ``module``'s parameters."""
    check_backend(device)
    return torch.compile(module, backend=BACKEND)


__all__ = ["BACKEND", "check_backend", "compile_model"]
