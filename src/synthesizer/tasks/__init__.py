"""Task families (how to batch, the loss, the metrics) and the experiment runner that wires them up."""

from .config import ExperimentConfig, resolve_config, shipped_configs
from .experiment import TASK_CLASSES, evaluate_run, load_trained, run_experiment

__all__ = ["ExperimentConfig", "TASK_CLASSES", "evaluate_run", "load_trained", "resolve_config", "run_experiment",
           "shipped_configs"]
