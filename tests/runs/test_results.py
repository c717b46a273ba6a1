"""results.json: one corpus per task, the run records' types, the file checked whole, merged and saved."""

import copy
import re
from pathlib import Path

import pytest

from synthesizer.runs.results import Results, describe_code, lowest_valid_loss


def record(seed, train_hash="aaa", tokenizer="ttt", origin="/data/lm/sotu (shared data folder)", code=None):
    provenance = {"data": {"name": "sotu", "origin": origin, "task": "lm",
                           "splits": {"train": {"examples": 213, "sha256": train_hash},
                                      "test": {"examples": 10, "sha256": "bbb"}}},
                  "tokenizer": {"file": "tokenizer.json", "sha256": tokenizer}}
    if code is not None:
        provenance["code"] = code
    return {"task": "lm", "data": "sotu", "attention": "vanilla", "seed": seed, "provenance": provenance}


def test_a_run_on_other_data_is_not_added_and_both_origins_are_named():
    # how two of lm's committed seeds came to train on the packaged subset: a copy without the shared data
    results = Results.empty()
    results.put_run(record(0))
    results.put_run(record(1))
    subset = record(3, train_hash="ccc", tokenizer="uuu", origin="/pkg/corpora/lm/sotu (packaged subset)")
    with pytest.raises(ValueError, match=r"lm-sotu vanilla seed 3 and lm-sotu vanilla seed 0 differ in the train split, "
                                         r"the tokenizer .*packaged subset\) vs /data/lm/sotu \(shared data folder\)"):
        results.put_run(subset)
    assert [r["seed"] for r in results.runs] == [0, 1]
    with pytest.raises(ValueError, match="differ in the tokenizer"):
        results.put_run(record(2, tokenizer="vvv"))
    # merging two folders is the same rule
    other = Results.empty()
    other.put_run(subset)
    with pytest.raises(ValueError, match="one comparison holds one corpus per task"):
        Results.merge([results, other])


def test_the_same_run_again_and_records_without_provenance_are_fine():
    results = Results.empty()
    results.put_run(record(0))
    results.put_run(record(0, train_hash="new"))  # replaces its own earlier record: nothing to compare
    bare = {k: v for k, v in record(1).items() if k != "provenance"}
    results.put_run(bare)
    assert len(results.runs) == 2


def test_the_code_is_described_by_version_commit_and_a_modified_tree():
    assert describe_code({"version": "1.0", "commit": "0123456789abcdef", "modified": True}) == "1.0 at 0123456 (modified)"
    assert describe_code({"version": "1.0", "commit": "0123456789abcdef", "modified": False}) == "1.0 at 0123456"
    assert describe_code({"version": "1.0", "commit": None, "modified": None}) == "1.0 (not a git checkout)"
    assert describe_code(None) == "not recorded"


def test_a_run_record_is_finished_failed_or_stopped():
    from synthesizer.runs.results import FAILED, FINISHED, STOPPED, failed, outcome

    finished = {"task": "lm", "data": "sotu", "attention": "dense", "seed": 0, "test_metrics": {"perplexity": 9.0}}
    failure = {"task": "lm", "data": "sotu", "attention": "dense", "seed": 0, "error": "ValueError: bad"}
    stopped = {"stopped": "SIGTERM", "steps": 12, "checkpoint": "runs/x/last"}
    assert [outcome(r) for r in (finished, failure, stopped)] == [FINISHED, FAILED, STOPPED]
    assert [failed(r) for r in (finished, failure, stopped)] == [False, True, False]
    assert outcome({**finished, "error": "after the metrics"}) == FAILED  # an error wins: the run is not counted


def _results_file(tmp_path, runs):
    import json

    from synthesizer.runs.results import FORMAT

    (tmp_path / "results.json").write_text(json.dumps({"format": FORMAT, "runs": runs}))
    return tmp_path


RECORD = {"task": "lm", "data": "sotu", "attention": "dense", "seed": 1, "test_metrics": {"perplexity": 9.0,
          "loss": None}, "primary_metric": "perplexity", "higher_is_better": False, "run_dir": "runs/x"}


@pytest.mark.parametrize("change, named", [
    ({"task": None}, "no 'task' string"),
    ({"seed": "1"}, "'seed' is '1', not an integer"),
    ({"test_metrics": {"perplexity": "9"}}, "'test_metrics' is not an object of numbers"),
    ({"primary_metric": "bleu"}, "'primary_metric' (one of its test_metrics: perplexity, loss)"),
    ({"higher_is_better": "no"}, "'higher_is_better' (true or false)"),
    ({"error": 3}, "'error' is 3"),
    ({"test_metrics": "gone"}, "neither 'test_metrics' (a finished run) nor 'error'"),
])
def test_a_record_missing_what_readers_count_on_is_refused_naming_the_file_and_record(tmp_path, change, named):
    from synthesizer.runs.results import Results

    record = {**RECORD, **change}
    if change.get("test_metrics") == "gone":  # a stopped run's place, which results.json never holds
        del record["test_metrics"]
    folder = _results_file(tmp_path, [RECORD, record])
    with pytest.raises(ValueError) as e:
        Results.load(folder)
    assert f"{folder / 'results.json'}: runs[1]: " in str(e.value) and named in str(e.value)


def test_finished_and_failed_records_load_as_they_are(tmp_path):
    from synthesizer.runs.results import Results

    identity = {k: RECORD[k] for k in ("task", "data", "attention")}  # no seed: read as seed 0
    runs = [RECORD, {**identity, "error": "ValueError: bad"}, {**RECORD, "seed": 2, "run_dir": None}]
    assert Results.load(_results_file(tmp_path, runs)).runs == runs


def _results_text(tmp_path, text):
    (tmp_path / "results.json").write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("field, value, named", [
    ("commands", "synthesizer compare --preset lm", "commands is 'synthesizer compare --preset lm', not a list of strings"),
    ("presets", "lm", "presets is 'lm', not a list of strings"),
    ("wall_time_s", "10 min", "wall_time_s is '10 min', not a number"),
    ("labels", ["lm-sotu"], "labels is ['lm-sotu'], not an object of strings"),
    ("machine", "a laptop", "machine is 'a laptop', not an object"),
    ("sessions", [{"started": 3}], "sessions[0].started is 3, not a string"),
    ("timings", {"lm-sotu": {"kinds": {"vanilla": {"step_s": "fast"}}}},
     "timings.lm-sotu.kinds.vanilla.step_s is 'fast', not a list of numbers"),
    ("attention", {"lm-sotu": {"random": [{"heads": [[["x"]]]}]}},
     "attention.lm-sotu.random[0].heads[0][0][0] is 'x', not a number"),
    ("lead", [["sotu", "random"]], "lead[0] is ['sotu', 'random'], not a [corpus, kind, what it shows] list"),
    ("left_out", {"x": 3}, "left_out.x is 3, not a string"),
])
def test_every_field_outside_the_runs_is_checked_at_load_naming_the_file_and_field(tmp_path, field, value, named):
    import json

    from synthesizer.runs.results import FORMAT, Results

    folder = _results_text(tmp_path, json.dumps({"format": FORMAT, "runs": [RECORD], field: value}))
    with pytest.raises(ValueError) as e:
        Results.load(folder)
    assert str(e.value).startswith(f"{folder / 'results.json'}: {named}"), str(e.value)


@pytest.mark.parametrize("change, named", [
    ({"curve": [{"step": 1, "valid_loss": "low"}]}, "runs[0].curve[0].valid_loss is 'low', not a number or null"),
    ({"params": {"total": "5k"}}, "runs[0].params.total is '5k', not an integer"),
    ({"train_time_s": [1]}, "runs[0].train_time_s is [1], not a number or null"),
    ({"baselines": {"unigram_perplexity": "500"}}, "runs[0].baselines.unigram_perplexity is '500'"),
    ({"diverged": "no"}, "runs[0].diverged is 'no', not true or false"),
])
def test_the_other_fields_of_a_run_record_are_checked_too(tmp_path, change, named):
    from synthesizer.runs.results import Results

    folder = _results_file(tmp_path, [{**RECORD, **change}])
    with pytest.raises(ValueError, match=re.escape(f"{folder / 'results.json'}: {named}")):
        Results.load(folder)


@pytest.mark.parametrize("text, named", [
    ('"test_metrics": {"perplexity": NaN}', "runs[0].test_metrics.perplexity is not a finite number"),
    ('"test_metrics": {"perplexity": 9.0}, "train_time_s": Infinity', "runs[0].train_time_s is not a finite number"),
])
def test_a_number_that_is_not_finite_is_refused_where_it_is(tmp_path, text, named):
    from synthesizer.runs.results import FORMAT, Results

    record = ('{"task": "lm", "data": "sotu", "attention": "dense", "primary_metric": "perplexity", '
              f'"higher_is_better": false, {text}}}')
    folder = _results_text(tmp_path, f'{{"format": {FORMAT}, "wall_time_s": 1, "runs": [{record}]}}')
    with pytest.raises(ValueError, match=re.escape(f"{folder / 'results.json'}: {named}")):
        Results.load(folder)
    folder = _results_text(tmp_path, f'{{"format": {FORMAT}, "wall_time_s": -Infinity, "runs": []}}')
    with pytest.raises(ValueError, match=re.escape(f"{folder / 'results.json'}: wall_time_s is not a finite")):
        Results.load(folder)


def test_a_results_file_that_is_not_utf8_is_named(tmp_path):
    from synthesizer.runs.results import Results

    (tmp_path / "results.json").write_bytes(b'{"format": 1, "runs": [], "size": "\xff"}')
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'results.json'}: not UTF-8 text")):
        Results.load(tmp_path)


def _session(n, wall):
    return {"id": f"s{n}", "started": f"2026-01-0{n}T00:00:00+00:00", "finished": f"2026-01-0{n}T01:00:00+00:00",
            "wall_time_s": wall}


def test_merging_counts_each_run_and_session_once_and_keeps_every_other_key():
    first = Results({**Results.empty().to_dict(), "wall_time_s": 100.0, "sessions": [_session(1, 100.0)],
                     "commands": ["a"], "lead": [["diag-mqar", "vanilla", "lookup"]], "rendered_by": {"version": "1"},
                     "future_field": {"x": 1}})
    first.put_run(record(0))
    continued = Results(first.to_dict())  # the documented way on: a later compare extends a copy of its results.json
    continued.add_session(_session(2, 50.0))
    continued.put_run(record(1))
    for parts in ([first, first], [first, continued], [continued, first], [continued, continued, first]):
        merged = Results.merge(copy.deepcopy(parts))
        expected = 100.0 if all(p is first for p in parts) else 150.0
        assert merged.wall_time_s == expected, parts
        assert [s["id"] for s in merged.sessions] == (["s1"] if expected == 100.0 else ["s1", "s2"])
        assert len(merged.runs) == (1 if expected == 100.0 else 2) and merged.commands == ["a"]
        assert merged.lead == [("diag-mqar", "vanilla", "lookup")] and merged.to_dict()["future_field"] == {"x": 1}


COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "results"


@pytest.mark.parametrize("name", ["lm-quick", "glue"])
def test_a_committed_results_file_read_and_saved_again_is_the_same_bytes(tmp_path, name):
    Results.load(COMMITTED / name).save(tmp_path)
    assert (tmp_path / "results.json").read_bytes() == (COMMITTED / name / "results.json").read_bytes()


def test_the_fields_an_older_file_lacks_have_their_defaults_and_setters_keep_the_key_order(tmp_path):
    results = Results({"format": 1, "runs": [record(1), record(0)]})
    assert (results.pretraining, results.labels, results.timings, results.left_out, results.attention) == (
        [], {}, None, {}, {})
    assert (results.lead, results.rendered_by, results.size, results.presets, results.wall_time_s) == (
        None, None, None, [], 0.0)
    assert results.seeds == [0, 1] and results.runs_of("lm-sotu") == results.runs and results.runs_of("lm-x") == []
    fresh = Results.empty({"cpu": "x"})
    fresh.add_command("c")
    fresh.add_command("c")
    fresh.set_timing("lm-sotu", {"seq": 8})
    fresh.set_rendered_by({"version": "1"})
    fresh.add_session({"id": "s", "started": "a", "finished": "b", "wall_time_s": 12.345, "code": None})
    fresh.maps_of("lm-sotu")["vanilla"] = []
    assert list(fresh.to_dict()) == ["format", "presets", "size", "commands", "machine", "wall_time_s", "sessions",
                                     "labels", "runs", "attention", "timings", "rendered_by"]
    assert fresh.commands == ["c"] and fresh.wall_time_s == 12.345 and fresh.sessions[0]["wall_time_s"] == 12.3
    assert Results.load(fresh.save(tmp_path)).to_dict() == fresh.to_dict()
    assert Results.folder_of(tmp_path / "results.json") == tmp_path and Results.folder_of(tmp_path) == tmp_path
    assert Results.exists(tmp_path) and not Results.exists(tmp_path / "none")


def test_the_lowest_validation_loss_is_the_lowest_the_run_reached_not_its_kept_checkpoints():
    # a recall run on its plateau: the checkpoint of best accuracy is its first evaluation, loss 5.33
    plateau = {"test_metrics": {"accuracy": 0.109}, "valid_metrics": {"loss": 5.33, "accuracy": 0.108},
               "curve": [{"step": 250, "valid_loss": 5.33, "valid_accuracy": 0.108},
                         {"step": 2500, "valid_loss": 4.08, "valid_accuracy": 0.088},
                         {"step": 2750, "valid_loss": float("nan")}, {"step": 6000, "valid_loss": 4.36}]}
    assert lowest_valid_loss(plateau) == 4.08
    # kept by loss: the same number either way; without a curve, the kept checkpoint's
    assert lowest_valid_loss({**plateau, "valid_metrics": {"loss": 4.08}}) == 4.08
    assert lowest_valid_loss({"test_metrics": {}, "valid_metrics": {"loss": 3.5}}) == 3.5
    assert lowest_valid_loss({"test_metrics": {}, "valid_metrics": {"loss": float("inf")}}) is None
    assert lowest_valid_loss({**plateau, "diverged": True}) is None
    assert lowest_valid_loss({"task": "lm", "data": "d", "attention": "vanilla", "seed": 0, "error": "x"}) is None
