"""Task-agnostic training: the loop, optimizer/schedule, distributed set-up, checkpoints, losses."""

from .checkpoint import load_checkpoint, load_model_weights, resolve_checkpoint, save_checkpoint
from .distributed import DistInfo, barrier, cleanup, init_distributed, is_main
from .loop import Trainer, TrainConfig, TrainResult, seed_everything, to_device
from .losses import sequence_cross_entropy
from .optim import SCHEDULES, build_optimizer, build_scheduler

__all__ = [
    "DistInfo", "SCHEDULES", "TrainConfig", "TrainResult", "Trainer", "barrier", "build_optimizer",
    "build_scheduler", "cleanup", "init_distributed", "is_main", "load_checkpoint", "load_model_weights",
    "resolve_checkpoint", "save_checkpoint", "seed_everything", "sequence_cross_entropy", "to_device",
]
