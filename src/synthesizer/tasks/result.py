"""A finished run's summary, result.json (and what :func:`~synthesizer.tasks.experiment.run_experiment`
returns): task, data, attention, seed, config, test_metrics, valid_metrics, baselines, primary_metric,
higher_is_better, curve, mixture_weights, components, params, train_time_s, train_tokens_per_s, steps,
checkpoint, log, diverged, diverged_step (the first update of the divergent stretch, or None), stopped,
provenance (data.json's content), init_from (a run that started from a pretraining run), and
per_example (the test split's per-example statistics of the primary metric, in the split's order, where
the task has them: ``{"metric", "kind", "values"}``, see ``report.stats``; none for perplexity).
"""

from __future__ import annotations

import warnings
from pathlib import Path

from torch import nn

from ..attention import registry
from ..models.config import parse_attention
from ..data.records import Corpus
from ..runs.files import BEST, LAST, LOG_FILE, json_safe, read_log
from ..training.checkpoint import CheckpointError, load_model_weights, resolve_checkpoint
from .base import Task
from .config import ExperimentConfig


def components_of(kind: str) -> list[str]:
    """The components (or baselines) of ``kind``; with a kind per layer, those of every layer, each once."""
    found: dict[str, None] = {}
    for parsed in parse_attention(kind):  # a Kind, or a baseline's name, per layer
        found.update(dict.fromkeys([parsed] if isinstance(parsed, str) else parsed))
    return list(found)


def self_attention_layers(model: nn.Module) -> list[nn.Module]:
    """Every block's self-attention module (encoder first for an encoder-decoder)."""
    return [m for name, m in model.named_modules() if name.endswith(".attn")]


def mixture_weights(model: nn.Module) -> list | None:
    """softmax(alpha) of every self-attention layer as nested lists, or None unless every layer mixes the
    same components (a kind per layer may mix in some layers only)."""
    layers = []
    attention = self_attention_layers(model)
    if len({getattr(m, "kind", None) for m in attention}) > 1:
        return None
    for m in attention:
        w = m.mixture_weights() if hasattr(m, "mixture_weights") else None
        if w is None:
            return None
        layers.append([round(float(x), 6) for x in w] if w.dim() == 1 else [[round(float(x), 6) for x in h] for h in w])
    return layers or None


def param_summary(model: nn.Module) -> dict:
    counts = model.param_counts()
    components = registry.names()  # built-in and registered: every logits component counts
    logits = sum(v for k, v in counts.items() if k.startswith("attention.") and k.split(".", 1)[1] in components)
    by_layer = [{"layer": layer["layer"], "kind": layer["kind"], "params": layer["params"]}
                for layer in model.layer_param_counts()]  # the kind and attention parameters of every layer
    return {"total": sum(counts.values()), "attention_logits": logits, "by_component": counts, "by_layer": by_layer}


def summarize(cfg: ExperimentConfig, task: Task, model: nn.Module, corpus: Corpus, out_dir: Path, step: int,
               diverged_step: int | None, stopped: str) -> dict:
    """Evaluate the best checkpoint (valid and test; ``last`` if ``best`` is missing or damaged) and
    assemble the result dict."""
    checkpoint, link = None, None
    for which in (BEST, LAST):
        try:
            load_model_weights(resolve_checkpoint(out_dir, which), model)
        except FileNotFoundError:
            continue
        except CheckpointError as e:
            warnings.warn(f"{e}; trying the next checkpoint", stacklevel=2)
            continue
        checkpoint, link = out_dir / which, which
        break
    valid_metrics, test_metrics, per_example = {}, {}, None
    if checkpoint is not None:
        model.eval()
        valid_metrics = task.metrics(model, "valid")
        test_metrics = task.metrics(model, "test")
        per_example = task.per_example("test")  # what a comparison's bootstrap resamples
    log = read_log(out_dir / LOG_FILE)
    kind = cfg.attention
    return {
        "task": cfg.task, "data": corpus.name, "attention": kind, "seed": cfg.seed, "config": cfg.to_dict(),
        "test_metrics": json_safe(test_metrics), "valid_metrics": json_safe(valid_metrics),
        "baselines": task.baselines("test"),
        "primary_metric": task.primary_metric, "higher_is_better": task.higher_is_better,
        "curve": log["curve"], "mixture_weights": log["mixture_weights"], "components": components_of(kind),
        "params": param_summary(model), "train_time_s": log["train_time_s"],
        "train_tokens_per_s": log["train_tokens_per_s"], "steps": step,
        "checkpoint": str(out_dir / link) if link is not None else None,
        "log": str(out_dir / LOG_FILE), "diverged": diverged_step is not None, "diverged_step": diverged_step,
        "stopped": stopped,
        **({"per_example": per_example} if per_example else {}),
    }
