"""Task families (how to batch, the loss, the metrics) and the experiment runner that wires them up.

The runner's names load on first use: reading or listing configs (``tasks.config``) then needs no
training extra, while ``from synthesizer.tasks import run_experiment`` works as before.
"""

from .config import ExperimentConfig, resolve_config, shipped_configs

# name -> the module that defines it
_RUNNER = {"TASK_CLASSES": "data", "evaluate_run": "trained", "load_trained": "trained",
           "run_experiment": "experiment"}

__all__ = ["ExperimentConfig", "TASK_CLASSES", "evaluate_run", "load_trained", "resolve_config", "run_experiment",
           "shipped_configs"]


def __getattr__(name: str):
    if name in _RUNNER:
        import importlib

        return getattr(importlib.import_module(f".{_RUNNER[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
