"""The defaults of the kernel interface (``dispatch.Kernel``) for a kernel that needs nothing beyond torch
and runs in every mode on every device: it imports them, so each kernel module has the whole interface."""

from __future__ import annotations

import torch


def runs(device: torch.device, training: bool, dropout: float) -> bool:
    """Whether the kernel can run a forward pass in this mode on this device: always."""
    return True


def require() -> None:
    """What the kernel needs beyond torch, raised as a missing module where absent: nothing."""
