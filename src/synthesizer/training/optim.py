"""AdamW with decoupled weight decay, and warm-up learning-rate schedules.

Weight decay applies to matrices of linear/conv-like layers only. Biases, every parameter of a
normalisation layer, and embedding tables (``nn.Embedding``) are not decayed: shrinking them only
fights the normalisation or penalises rare tokens. Any other parameter with fewer than 2 dimensions
(scalars, gates, mixture weights) is not decayed either. A weight tied between an embedding and an
output layer counts as an embedding.

The optimizer is PyTorch's fused AdamW (one kernel over all parameters) wherever every parameter
lives on CPU or CUDA: it beat the per-parameter loop and ``foreach=True`` (docs/bench/kernels.md,
"Fused AdamW"). Fused and per-parameter AdamW agree to float32 rounding.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from ..errors import InputError, positive_int

SCHEDULES = ("inverse_sqrt", "cosine", "constant")
FUSED_DEVICES = ("cpu", "cuda")  # where torch's fused AdamW runs

_NORMS = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm)
if hasattr(nn, "RMSNorm"):
    _NORMS = _NORMS + (nn.RMSNorm,)


def _no_decay_ids(model: nn.Module) -> set[int]:
    ids = set()
    for module in model.modules():
        no_decay_module = isinstance(module, (nn.Embedding, nn.EmbeddingBag) + _NORMS) or "norm" in type(module).__name__.lower()
        for p in module.parameters(recurse=False):
            if no_decay_module or p.ndim < 2:
                ids.add(id(p))
    return ids


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Split trainable parameters into a decayed and a non-decayed group (each parameter once)."""
    skip = _no_decay_ids(model)
    decay, no_decay = [], []
    for p in model.parameters():  # deduplicates tied parameters
        if p.requires_grad:
            (no_decay if id(p) in skip else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def fused_supported(params: list[torch.Tensor]) -> bool:
    """Whether torch's fused AdamW can step these parameters: floating point, on CPU or CUDA."""
    return all(p.device.type in FUSED_DEVICES and torch.is_floating_point(p) for p in params)


def build_optimizer(model: nn.Module, lr: float, weight_decay: float = 0.01,
                    betas: tuple[float, float] = (0.9, 0.98), eps: float = 1e-8,
                    fused: bool | None = None) -> torch.optim.AdamW:
    """AdamW over ``model``'s trainable parameters, decaying only weight matrices (see module doc).
    ``fused``: None picks the fused implementation where it runs (``fused_supported``); False the
    per-parameter loop."""
    if not lr > 0:
        raise InputError(f"lr must be > 0, got {lr!r}")
    if weight_decay < 0:
        raise InputError(f"weight_decay must be >= 0, got {weight_decay!r}")
    if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
        raise InputError(f"betas must be two numbers in [0, 1), got {betas!r}")
    groups = [g for g in param_groups(model, weight_decay) if g["params"]]
    if not groups:
        raise InputError("model has no trainable parameters")
    if fused is None:
        fused = fused_supported([p for g in groups for p in g["params"]])
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), eps=eps, fused=fused or None)


def lr_factor(step: int, warmup_steps: int, total_steps: int, kind: str = "inverse_sqrt",
              min_ratio: float = 0.0) -> float:
    """Multiplier of the peak lr for optimizer step ``step`` (0-based: the first update uses step 0).

    Warm-up rises linearly to 1 over ``warmup_steps`` updates. Then ``inverse_sqrt`` decays as
    ``sqrt(warmup / t)``, ``cosine`` follows half a cosine down to ``min_ratio`` at ``total_steps``,
    ``constant`` stays at 1.
    """
    t = step + 1  # number of the update being made, so warm-up never yields a zero lr
    if t <= warmup_steps:
        return t / warmup_steps
    if kind == "constant":
        return 1.0
    if kind == "inverse_sqrt":
        return math.sqrt(max(warmup_steps, 1) / t)
    if kind == "cosine":
        span = max(total_steps - warmup_steps, 1)
        progress = min(max((t - warmup_steps) / span, 0.0), 1.0)
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
    raise InputError(f"unknown schedule {kind!r}; allowed: {', '.join(SCHEDULES)}")


def build_scheduler(optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int,
                    kind: str = "inverse_sqrt", min_ratio: float = 0.0) -> LambdaLR:
    """A ``LambdaLR`` applying :func:`lr_factor`; call ``scheduler.step()`` after each optimizer step."""
    if kind not in SCHEDULES:
        raise InputError(f"unknown schedule {kind!r}; allowed: {', '.join(SCHEDULES)}")
    if not isinstance(warmup_steps, int) or warmup_steps < 0:
        raise InputError(f"warmup_steps must be an integer >= 0, got {warmup_steps!r}")
    positive_int("total_steps", total_steps)
    if not 0.0 <= min_ratio <= 1.0:
        raise InputError(f"min_ratio must be in [0, 1], got {min_ratio!r}")
    return LambdaLR(optimizer, lambda step: lr_factor(step, warmup_steps, total_steps, kind, min_ratio))
