"""One-at-a-time timing of a comparison's kinds at each task's shapes: what its speed verdicts read.

Runs trained side by side share the machine, so a run's speed also depends on its neighbour's; the report
shows those speeds as information only. Here every kind's self-attention layer, built as the task's model
builds it (width, heads, ``max_len``, causal for lm), takes a training step (forward and backward) on one
random batch of the task's shape, round-robin in one process with one torch thread (as each run of a
comparison trains), so that the machine's load hits every kind alike. A kind per layer
(``"random,vanilla"``) times the attention layers of the task's stack, each on the same batch, and
records the mean per layer, so that its ratio to a single kind's layer reads as its model's would. The batch: ``batch.block_size`` (lm) or ``batch.max_len`` / ``batch.max_src_len`` tokens a sequence
(else ``model.max_len``), ``batch.max_tokens`` / that many sequences (else ``DEFAULT_BATCH``).

The same pass counts each factorized kind's attention parameters against its full kind's at growing
``max_len``, so that claim 3 can say where the factorization saves parameters at all. Stored in results.json
under ``"timings"`` by group (``<task>-<data>``)::

    {"task", "seq", "batch", "d_model", "n_heads", "max_len", "causal", "repeats", "threads",
     "load_average_1min", "measured",
     "kinds": {kind: {"step_s": [seconds a step, per repeat], "median_s", "steps_per_sample"}},
     "params": {kind: {"reference", "attention", "reference_attention", "saves_from"}}}

``saves_from``: the smallest ``max_len`` (of ``SAVING_LENGTHS`` and the task's own) at which the factorized
layer has fewer attention parameters than its full kind, 0 where none of them does.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
import time
from typing import Callable

import torch

from ..attention import registry
from ..attention.factory import build_mixer
from ..bench.timing import interleaved_medians
from ..models import ModelConfig
from ..models.config import parse_attention, stack_kinds
from ..runs.files import group_key
from ..runs.results import Results
from .machine import load_average

FACTORIZED = {"factorized_random": "random", "factorized_dense": "dense"}  # claim 3's pairs
SAVING_LENGTHS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
DEFAULT_BATCH = 8
REPEATS, WARMUP = 15, 3
MIN_SAMPLE_S = 0.05  # a timed sample runs enough steps to last this long
THREADS = 1  # as each run of a comparison trains (one thread per job): steady timings on a shared machine
SKIPPED_TASKS = ("glue",)  # the GLUE-style average is not a model of its own


def task_shape(config: dict) -> dict:
    """The layer and batch a run of ``config`` (a run record's config) trains with, for the timing."""
    model = ModelConfig.from_dict({"vocab_size": 64, **config["model"]})  # the vocabulary does not touch attention
    batch = config.get("batch") or {}
    seq = next((batch[k] for k in ("block_size", "max_len", "max_src_len") if batch.get(k)), model.max_len)
    n = max(1, batch["max_tokens"] // seq) if batch.get("max_tokens") else DEFAULT_BATCH
    return {"task": config["task"], "seq": seq, "batch": n, "d_model": model.d_model, "n_heads": model.n_heads,
            "max_len": model.max_len, "causal": config["task"] == "lm",
            "layers": model.n_layers if config["task"] == "lm" else model.encoder_layers}


def logits_params(layer: torch.nn.Module) -> int:
    """The parameters that make the attention weights (the records' ``attention_logits``, for one layer)."""
    if not hasattr(layer, "param_counts"):
        return sum(p.numel() for p in layer.parameters())
    counts = layer.param_counts()
    components = registry.names()
    named = [v for k, v in counts.items() if k in components]
    # a baseline names its own parts: everything but its values and output
    return sum(named) if named else sum(v for k, v in counts.items() if k != "values_output")


def saves_from(kind: str, shape: dict) -> dict:
    """Attention parameters of ``kind`` and of its full kind at the task's ``max_len``, and the smallest
    ``max_len`` at which the factorization has fewer (0: at none of the lengths counted)."""
    full = FACTORIZED[kind]

    def count(name: str, max_len: int) -> int:
        with torch.device("meta"):  # shapes only: a random synthesizer at max_len 4096 would allocate 268 MB
            return logits_params(build_mixer(name, shape["d_model"], shape["n_heads"], max_len, causal=shape["causal"]))

    lengths = sorted({*SAVING_LENGTHS, shape["max_len"]})
    first = next((n for n in lengths if count(kind, n) < count(full, n)), 0)
    return {"reference": full, "attention": count(kind, shape["max_len"]),
            "reference_attention": count(full, shape["max_len"]), "saves_from": first}


class _Layers(torch.nn.Module):
    """The attention layers of a kind per layer, each applied to the same input (outputs summed)."""

    def __init__(self, layers: list[torch.nn.Module]):
        super().__init__()
        self.layers = torch.nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum(layer(x) for layer in self.layers)


def timed_layers(kind: str, shape: dict) -> tuple[torch.nn.Module, int]:
    """What a step of ``kind`` runs, and the number of attention layers in it: one layer of one kind, or
    every layer of a kind per layer over the task's stack (``shape["layers"]``, 1 where not recorded)."""
    build = lambda k: build_mixer(k, shape["d_model"], shape["n_heads"], shape["max_len"], causal=shape["causal"])  # noqa: E731
    if len(parse_attention(kind)) == 1:
        return build(kind), 1
    n = max(shape.get("layers", 1), len(parse_attention(kind)))
    return _Layers([build(k) for k in stack_kinds(kind, n)]), n


def _step(layer: torch.nn.Module, x: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        layer.zero_grad(set_to_none=True)
        x.grad = None
        layer(x).sum().backward()
    return step


def _repeated(step: Callable[[], None], calls: int) -> Callable[[], None]:
    def steps() -> None:
        for _ in range(calls):
            step()
    return steps


def calls_per_sample(step: Callable[[], None], warmup: int) -> int:
    """How many steps one timed sample runs, so that it lasts at least ``MIN_SAMPLE_S``: a step of a
    few milliseconds is too short to time on a shared machine."""
    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    step()
    return max(1, math.ceil(MIN_SAMPLE_S / max(time.perf_counter() - t0, 1e-6)))


def time_group(kinds: list[str], shape: dict, repeats: int = REPEATS, warmup: int = WARMUP) -> dict:
    """The timing record of one group (see the module's docstring)."""
    torch.manual_seed(0)
    x = torch.randn(shape["batch"], shape["seq"], shape["d_model"], requires_grad=True)
    steps, calls, layers = {}, {}, {}
    samples: dict[str, list[float]] = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        for kind in kinds:
            layer, layers[kind] = timed_layers(kind, shape)
            step = _step(layer.train(), x)
            calls[kind] = calls_per_sample(step, warmup)
            steps[kind] = _repeated(step, calls[kind])
        interleaved_medians(steps, torch.device("cpu"), repeats, 1, samples=samples)
    finally:
        torch.set_num_threads(threads)
    per_step = {k: [t / calls[k] / layers[k] for t in samples[k]] for k in kinds}  # a step of one layer
    return {**shape, "repeats": repeats, "threads": THREADS,
            "load_average_1min": load_average(),
            "measured": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "kinds": {k: {"step_s": [round(t, 7) for t in per_step[k]], "median_s": round(statistics.median(per_step[k]), 7),
                          "steps_per_sample": calls[k]} for k in kinds},
            "params": {k: saves_from(k, shape) for k in kinds if k in FACTORIZED and FACTORIZED[k] in kinds}}


def add_timings(results: Results, log: Callable[[str], None] = print) -> Results:
    """Time the kinds of every group of ``results`` one at a time (:func:`time_group`) and store the records
    in its timings; returns ``results``."""
    groups: dict[str, tuple[dict, list[str]]] = {}
    for record in results.runs:
        if record.get("task") in SKIPPED_TASKS or "config" not in record:
            continue
        key = group_key(record["task"], record["data"])
        config, kinds = groups.setdefault(key, (record["config"], []))
        if record["attention"] not in kinds:
            kinds.append(record["attention"])
    results.start_timings()
    for key, (config, kinds) in groups.items():
        shape = task_shape(config)
        log(f"timing {key}: {len(kinds)} kinds one at a time, batch {shape['batch']} x {shape['seq']} tokens")
        results.set_timing(key, time_group(kinds, shape))
    return results
