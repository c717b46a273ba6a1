"""Multi-process set-up for ``torchrun``: process group, rank helpers, DDP wrapping, teardown.

Run ``torchrun --nproc_per_node N ...``; it sets ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``.
Without them everything here degrades to a single process (rank 0 of 1) and is a no-op.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from ..errors import InputError

T = TypeVar("T")


@dataclass(frozen=True)
class DistInfo:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise InputError(f"environment variable {name}={value!r} is not an integer") from None


def init_distributed(device: str | torch.device | None = None) -> DistInfo:
    """Join the process group described by the torchrun environment (if any) and pick the device.

    The backend is NCCL when the device is CUDA and gloo otherwise. ``device=None`` means the local
    GPU (``cuda:LOCAL_RANK``) when CUDA is available, else CPU.
    """
    rank, world_size, local_rank = _env_int("RANK", 0), _env_int("WORLD_SIZE", 1), _env_int("LOCAL_RANK", 0)
    if device is None:
        device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if world_size > 1 and not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        kwargs = {"device_id": device} if device.type == "cuda" else {}
        dist.init_process_group(backend=backend, rank=rank, world_size=world_size, **kwargs)
    return DistInfo(rank, world_size, local_rank, device)


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def get_rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def get_world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def is_main() -> bool:
    """True on rank 0 (and in a single process): the one that logs and writes checkpoints."""
    return get_rank() == 0


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def all_reduce_sum(tensor: Tensor) -> Tensor:
    """Sum ``tensor`` over ranks in place and return it."""
    if is_distributed():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def all_reduce_mean(tensor: Tensor) -> Tensor:
    """Average ``tensor`` over ranks in place and return it."""
    if is_distributed():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        tensor /= dist.get_world_size()
    return tensor


def all_gather_object(obj) -> list:
    """Every rank's ``obj`` as a list indexed by rank (``[obj]`` in a single process)."""
    if not is_distributed():
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def on_main(fn: Callable[[], T]) -> T:
    """Run ``fn`` on rank 0 only and hand its result to every rank.

    For what only rank 0 may do (take the run folder's lock, read and write its files): a
    ``ValueError`` raised there is raised on every rank, so none is left waiting in a collective; the
    other ranks raise an ``InputError`` for bad input, a ``RuntimeError`` naming rank 0's for a bug.
    """
    value, error = None, None
    if is_main():
        try:
            value = fn()
        except ValueError as e:
            error = e
    if is_distributed():
        shared = [(value, None if error is None else (type(error), str(error)))]
        dist.broadcast_object_list(shared, src=0)
        value, failure = shared[0]
        if failure is not None and error is None:
            kind, message = failure
            error = InputError(message) if issubclass(kind, InputError) else RuntimeError(f"rank 0: {kind.__name__}: "
                                                                                       f"{message}")
    if error is not None:
        raise error
    return value


def wrap_model(model: nn.Module, device: torch.device, find_unused_parameters: bool = False) -> nn.Module:
    """``model`` wrapped in DDP when several processes run, else ``model`` itself."""
    if not is_distributed():
        return model
    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids, find_unused_parameters=find_unused_parameters)


def unwrap_model(model: nn.Module) -> nn.Module:
    """The plain module inside a DDP (or ``torch.compile``) wrapper."""
    while True:
        if isinstance(model, DistributedDataParallel):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model


def cleanup() -> None:
    """Leave the process group (safe to call when none was joined)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
