"""The one-at-a-time timing that the speed verdicts read, and claim 3's parameter counts by length."""

from pathlib import Path

import pytest

from synthesizer.attention.factory import build_mixer
from synthesizer.comparison.plan import check_same_code
from synthesizer.comparison.timing import (SAVING_LENGTHS, add_timings, logits_params, task_shape, time_group,
                                          timed_layers)
from synthesizer.runs.code import code_provenance
from synthesizer.runs.results import Results

LM_CONFIG = {"task": "lm", "model": {"d_model": 16, "n_heads": 2, "n_layers": 1, "max_len": 32},
             "batch": {"block_size": 16, "max_tokens": 64}}


def test_the_shape_is_the_tasks_batch():
    assert task_shape(LM_CONFIG) == {"task": "lm", "seq": 16, "batch": 4, "d_model": 16, "n_heads": 2, "max_len": 32,
                                     "causal": True, "layers": 1}
    cls = {"task": "classification", "model": {"d_model": 16, "n_heads": 2, "max_len": 24}, "batch": {}}
    assert task_shape(cls)["seq"] == 24 and task_shape(cls)["batch"] == 8 and not task_shape(cls)["causal"]


def test_a_kind_per_layer_times_the_tasks_stack_and_records_a_layers_mean():
    shape = {**task_shape(LM_CONFIG), "layers": 4}
    stack, n = timed_layers("vanilla,random,random,random", shape)
    assert n == 4 and [m.kind for m in stack.layers] == ["vanilla", "random", "random", "random"]
    assert timed_layers("random", shape)[1] == 1
    record = time_group(["vanilla", "random", "random,vanilla"], shape, repeats=3, warmup=1)
    steps = {kind: k["median_s"] for kind, k in record["kinds"].items()}
    assert all(t > 0 for t in steps.values()) and record["layers"] == 4
    # one layer's step, the mean of its layers': well under the four layers' sum
    assert steps["random,vanilla"] < 1.5 * max(steps["vanilla"], steps["random"])


def test_every_kind_is_timed_in_the_same_repeats_and_the_factorized_savings_are_counted():
    kinds = ["vanilla", "random", "factorized_random", "dense", "factorized_dense"]
    shape = task_shape(LM_CONFIG)
    record = time_group(kinds, shape, repeats=3, warmup=1)
    assert set(record["kinds"]) == set(kinds)
    assert all(len(k["step_s"]) == 3 and k["median_s"] > 0 for k in record["kinds"].values())
    assert record["repeats"] == 3 and record["max_len"] == 32
    for kind, full in (("factorized_random", "random"), ("factorized_dense", "dense")):
        params = record["params"][kind]

        def count(name, n):
            return logits_params(build_mixer(name, 16, 2, n, causal=True))

        assert (params["attention"], params["reference_attention"]) == (count(kind, 32), count(full, 32))
        first = params["saves_from"]
        assert first in SAVING_LENGTHS and count(kind, first) < count(full, first)
        assert all(count(kind, n) >= count(full, n) for n in SAVING_LENGTHS if n < first)


def test_add_timings_times_each_group_once_and_skips_the_glue_average():
    runs = [{"task": "lm", "data": "x", "attention": k, "seed": s, "config": LM_CONFIG}
            for k in ("vanilla", "none") for s in (0, 1)]
    runs.append({"task": "glue", "data": "average", "attention": "vanilla", "seed": 0})
    results = add_timings(Results({"runs": runs}), log=lambda line: None)
    assert list(results.timings) == ["lm-x"] and set(results.timings["lm-x"]["kinds"]) == {"vanilla", "none"}


def test_new_runs_do_not_join_runs_of_other_code():
    now = code_provenance()
    ours = {"task": "lm", "data": "x", "attention": "vanilla", "seed": 0, "provenance": {"data": {}, "code": now}}
    check_same_code(Results({"runs": [ours, {"task": "lm", "data": "x", "attention": "none", "seed": 0}]}), Path("r.json"))
    old = {**ours, "seed": 1, "provenance": {"data": {}}}  # trained before runs recorded their code
    other = {**ours, "seed": 2, "provenance": {"data": {}, "code": {**now, "commit": "0" * 40, "modified": False}}}
    with pytest.raises(ValueError, match=r"r\.json holds runs trained by other code \(not recorded: 1 run\(s\); "
                                         r".* at 0000000: 1 run\(s\)\).*--allow-other-code"):
        check_same_code(Results({"runs": [ours, old, other]}), Path("r.json"))
