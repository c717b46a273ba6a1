"""Metric loggers (``train.loggers``): TensorBoard events carry the numbers log.jsonl has; bad names are
config errors."""

import importlib.util
import json

import pytest

from synthesizer.tasks import ExperimentConfig, run_experiment
from synthesizer.training.loggers import scalars_of
from tests.tasks.test_experiment import tiny_config, write_data

needs_tensorboard = pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None,
                                       reason="needs the 'log' extra (tensorboard)")


def _events(folder) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value), ...] of the scalar events under ``folder``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})  # 0: keep every event
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


@needs_tensorboard
def test_tensorboard_events_equal_log_jsonl(tmp_path):
    cfg = tiny_config("lm", write_data(tmp_path / "d", "lm"), "random+vanilla",
                      train={"loggers": ["jsonl", "tensorboard"], "log_every": 1, "eval_every": 2})
    out = tmp_path / "run"
    run_experiment(cfg, out, progress=False)
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    expected: dict[str, list[tuple[int, float]]] = {}
    for record in records:
        for tag, value in scalars_of(record).items():
            expected.setdefault(tag, []).append((record["step"], value))
    events = _events(out / "tensorboard")

    # what the records hold, by name: loss, lr, tokens/s, the validation metrics, the mixture weights
    assert {"train/loss", "train/lr", "train/tokens_per_s", "valid/loss", "valid/perplexity",
            "mixture/layer0/0", "mixture/layer0/1"} <= set(expected)
    assert [s for s, _ in expected["train/loss"]] == [1, 2, 3, 4]
    assert [s for s, _ in expected["valid/loss"]] == [2, 4]
    losses = [r["loss"] for r in records if r["kind"] == "train"]
    assert [v for _, v in expected["train/loss"]] == losses
    weights = [r["mixture_weights"][0] for r in records if r["kind"] == "eval"]
    assert [v for _, v in expected["mixture/layer0/1"]] == [w[1] for w in weights]

    assert set(events) == set(expected)
    for tag, want in expected.items():  # TensorBoard stores float32
        got = events[tag]
        assert [s for s, _ in got] == [s for s, _ in want], tag
        assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-6), tag


def test_per_head_mixture_weights_and_other_records():
    record = {"kind": "eval", "step": 3, "loss": 2.0, "n": 7, "ok": True, "bad": float("nan"),
              "mixture_weights": [[[0.25, 0.75], [0.5, 0.5]]]}
    assert scalars_of(record) == {"valid/loss": 2.0, "valid/n": 7.0, "mixture/layer0/head0/0": 0.25,
                                  "mixture/layer0/head0/1": 0.75, "mixture/layer0/head1/0": 0.5,
                                  "mixture/layer0/head1/1": 0.5}
    assert scalars_of({"kind": "end", "step": 4, "stopped": "max_steps", "elapsed": 1.0}) == {}


@pytest.mark.parametrize("loggers, message", [
    (["jsonl", "wandb"], "train.loggers: unknown logger 'wandb'; allowed: jsonl, tensorboard"),
    (["tensorboard"], "train.loggers must include 'jsonl'"),
    ("jsonl", "train.loggers must be a list of logger names"),
])
def test_bad_loggers_are_config_errors(tmp_path, loggers, message):
    data = write_data(tmp_path / "d", "lm", n=10)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        ExperimentConfig.from_dict({"task": "lm", "data": data, "train": {"max_steps": 1, "loggers": loggers}})


def test_a_missing_tensorboard_names_the_log_extra(monkeypatch):
    import importlib.util

    from synthesizer.extras import missing_extra_message
    from synthesizer.training.loggers import require_loggers

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else real(name, *a))
    require_loggers(["jsonl"])  # log.jsonl needs nothing
    with pytest.raises(ModuleNotFoundError) as info:
        require_loggers(["jsonl", "tensorboard"])
    assert missing_extra_message(info.value, "synthesizer train") == (
        "synthesizer train needs the 'log' extra (missing module 'tensorboard'): pip install 'synthesizer-pytorch[log]'")


def test_the_jsonl_logger_keeps_whole_records_and_drops_what_a_crash_left_after_the_resume_step(tmp_path):
    import json

    from synthesizer.training.loggers import LOGGERS, JsonlLogger, build_loggers

    first = JsonlLogger(tmp_path)
    for step in (1, 2, 3):
        first.log({"kind": "train", "step": step, "loss": 1.0 / step, "note": "kept whole"})
    with open(first.path, "a") as f:
        f.write('{"kind": "train", "st')  # a line cut short by the crash
    resumed = build_loggers(["jsonl"], tmp_path, resume_step=2)
    assert [type(logger) for logger in resumed] == [JsonlLogger] and LOGGERS["jsonl"] is JsonlLogger
    resumed[0].log({"kind": "end", "step": 4})
    records = [json.loads(line) for line in first.path.read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 4] and records[0]["note"] == "kept whole"
