"""The GLUE-style average of a pretrained preset's fine-tuned tasks: a scoring rule, like the claims'.

:func:`put_averages` adds, for every (kind, seed) fine-tuned on all the tasks, one run record of group
``glue-average`` (``claims.GLUE_TASK``-``claims.GLUE_DATA``), which claim 7 is judged on.
"""

from __future__ import annotations

from .claims import GLUE_DATA, GLUE_TASK, trivial_key
from ..runs.results import Results, failed
from .tables import group_key


def put_averages(results: Results, keys: list[str], kinds: list[str], seeds: int) -> None:
    """Add the GLUE-style average of every (kind, seed) fine-tuned on all the groups ``keys``: a record of
    group ``glue-average`` whose test metric is the mean of the tasks' test metrics (the trivial predictor:
    the mean of theirs), with per-example statistics weighted so that their mean is that average (each task
    counts once, whatever its size; the bootstrap then resamples the pooled test examples)."""
    runs = {(group_key(r["task"], r["data"]), r["attention"], r.get("seed", 0)): r for r in results.runs}
    for kind in kinds:
        for seed in range(seeds):
            parts = [runs.get((key, kind, seed)) for key in keys]
            if any(p is None for p in parts):
                continue
            record = glue_average(parts, kind, seed)
            results.put_run(record)
    results.set_label(group_key(GLUE_TASK, GLUE_DATA), f"GLUE-style average over {len(keys)} fine-tuned tasks")


def glue_average(parts: list[dict], kind: str, seed: int) -> dict:
    """The average record of one (kind, seed) from its fine-tuning records ``parts`` (see :func:`put_averages`)."""
    head = {"task": GLUE_TASK, "data": GLUE_DATA, "attention": kind, "seed": seed, "higher_is_better": True,
            "glue_tasks": [f"{p['task']}-{p['data']}" for p in parts]}
    failures = [f"{p['task']}-{p['data']}: {p['error']}" for p in parts if failed(p)]
    if failures:
        return {**head, "error": "; ".join(failures)}
    metrics = {p.get("primary_metric") for p in parts}
    metric = metrics.pop() if len(metrics) == 1 else "score"
    head["primary_metric"] = metric
    diverged = [p for p in parts if p.get("diverged")]
    values = [(p.get("test_metrics") or {}).get(p.get("primary_metric")) for p in parts]
    if diverged or any(v is None for v in values):
        return {**head, "test_metrics": {}, "diverged": bool(diverged),
                "diverged_step": min((p.get("diverged_step") or 0 for p in diverged), default=None)}
    record = {**head, "test_metrics": {metric: sum(values) / len(values)}, "diverged": False,
              "params": parts[0].get("params"), "steps": parts[0].get("steps"),
              "train_time_s": sum(p.get("train_time_s") or 0.0 for p in parts)}
    trivial = [(p.get("baselines") or {}).get(trivial_key(metric)) for p in parts]
    if all(t is not None for t in trivial):
        record["baselines"] = {trivial_key(metric): sum(trivial) / len(trivial)}
    stats = [p.get("per_example") for p in parts]
    if all(s and s.get("kind") == "accuracy" and s.get("metric") == metric for s in stats):
        n = sum(len(s["values"]) for s in stats)
        weighted = [v * n / (len(parts) * len(s["values"])) for s in stats for v in s["values"]]
        record["per_example"] = {"metric": metric, "kind": "accuracy", "values": [round(v, 6) for v in weighted]}
    return record
