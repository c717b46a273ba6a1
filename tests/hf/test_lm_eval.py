"""``synthesizer lm-eval`` (the ``eval`` extra): the harness's numbers on local tasks equal the same
scores computed directly with the project's model. Offline: the tasks read JSON-lines files in
tests/fixtures/lm_eval, and the harness runs with the hub and datasets set offline."""

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("lm_eval") is None or importlib.util.find_spec("transformers") is None:
    pytest.skip("needs the 'eval' extra (lm-eval, transformers)", allow_module_level=True)

import torch  # noqa: E402

from synthesizer.tasks import run_experiment  # noqa: E402
from synthesizer.tasks.trained import load_trained  # noqa: E402
from tests.test_cli import run_cli  # noqa: E402
from tests.tasks.test_experiment import tiny_config, write_data  # noqa: E402
from tests.tolerances import SUM  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval"
SRC = Path(__file__).resolve().parents[2] / "src"
TASKS = "synthesizer_tiny_choice,synthesizer_tiny_perplexity"


def _jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    """A tiny causal LM trained enough that its scores differ between texts."""
    root = tmp_path_factory.mktemp("lm-eval")
    cfg = tiny_config("lm", write_data(root / "data", "lm"), "random", train={"max_steps": 30, "eval_every": 0})
    run_experiment(cfg, root / "run", progress=False)
    return root / "run"


def _harness(run: Path, out: Path, tmp: Path) -> dict:
    """``synthesizer lm-eval`` in a fresh process, offline, run from the task folder (the YAMLs name
    their data files relative to it); returns the JSON it wrote."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_HOME": str(tmp / "hf-home"), "HF_DATASETS_CACHE": str(tmp / "datasets"), "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "synthesizer", "lm-eval", "--run", str(run), "--tasks", TASKS, "--include-path", ".",
           "--batch-size", "3", "--output", str(out), "--log-samples"]
    done = subprocess.run(cmd, cwd=DATA, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "synthesizer_tiny_choice" in done.stdout and "word_perplexity" in done.stdout  # the table
    return json.loads(out.read_text())


def _loglikelihood(model, context: list[int], continuation: list[int]) -> float:
    """log p(continuation | context), summed over the continuation's tokens, by the project's model."""
    ids = torch.tensor([context + continuation[:-1]])
    with torch.no_grad():
        logp = model(ids)[0].double().log_softmax(-1)
    rows = torch.arange(len(context) - 1, len(context) + len(continuation) - 1)
    return float(logp[rows, torch.tensor(continuation)].sum())


def test_harness_scores_equal_the_project_models_own(lm_run, tmp_path):
    results = _harness(lm_run, tmp_path / "results.json", tmp_path)
    model, tok, _ = load_trained(lm_run)

    # multiple choice: the harness scores context + " " + choice, splitting the tokens of the whole
    # text after the context's own tokens; acc takes the best sum, acc_norm the best sum per character
    choice_docs, acc, acc_norm = _jsonl("tiny_choice.jsonl"), [], []
    samples = {s["doc_id"]: s for s in results["samples"]["synthesizer_tiny_choice"]}
    for i, doc in enumerate(choice_docs):
        context = tok.encode(doc["context"])
        lls = []
        for choice in doc["choices"]:
            whole = tok.encode(f"{doc['context']} {choice}")
            assert whole[:len(context)] == context  # the split falls on a token boundary here
            lls.append(_loglikelihood(model, context, whole[len(context):]))
        theirs = [float(r[0]) for r in samples[i]["filtered_resps"]]
        assert theirs == pytest.approx(lls, rel=SUM.rtol, abs=1e-5)
        acc.append(float(max(range(len(lls)), key=lls.__getitem__) == doc["gold"]))
        norm = [ll / len(c) for ll, c in zip(lls, doc["choices"])]
        acc_norm.append(float(max(range(len(norm)), key=norm.__getitem__) == doc["gold"]))
    ours = results["results"]["synthesizer_tiny_choice"]
    assert ours["acc,none"] == pytest.approx(sum(acc) / len(acc), abs=1e-12)
    assert ours["acc_norm,none"] == pytest.approx(sum(acc_norm) / len(acc_norm), abs=1e-12)
    assert len(samples) == len(choice_docs)

    # perplexity: every text scored after the EOS token that starts a document in training
    texts = [d["text"] for d in _jsonl("tiny_perplexity.jsonl")]
    total, words, n_bytes = 0.0, 0, 0
    for text in texts:
        ids = tok.encode(text)
        assert len(ids) < model.config.max_len  # one window: the whole text in one forward
        total += _loglikelihood(model, [tok.eos_id], ids)
        words += len(re.split(r"\s+", text))
        n_bytes += len(text.encode("utf-8"))
    ppl = results["results"]["synthesizer_tiny_perplexity"]
    assert ppl["word_perplexity,none"] == pytest.approx(math.exp(-total / words), rel=1e-5)
    assert ppl["byte_perplexity,none"] == pytest.approx(math.exp(-total / n_bytes), rel=1e-5)
    assert ppl["bits_per_byte,none"] == pytest.approx(-total / n_bytes / math.log(2), rel=1e-5)


def test_lm_eval_refuses_other_families_and_unknown_tasks(lm_run, tmp_path, capsys):
    cls_run = tmp_path / "cls"
    cfg = tiny_config("classification", write_data(tmp_path / "data", "cls"), train={"max_steps": 1, "eval_every": 0})
    run_experiment(cfg, cls_run, progress=False)
    code, _, err = run_cli(["lm-eval", "--run", str(cls_run), "--tasks", "x"], capsys)
    assert code == 2 and "a classifier model; synthesizer lm-eval evaluates causal language models only" in err
    assert run_cli(["export", "--run", str(cls_run), "--out", str(tmp_path / "hf")], capsys)[0] == 0
    code, _, err = run_cli(["lm-eval", "--run", str(tmp_path / "hf"), "--tasks", "x"], capsys)
    assert code == 2 and "a classifier model" in err  # an HF folder is read from its config.json
    code, _, err = run_cli(["lm-eval", "--run", str(cls_run), "--tasks", "x", "--include-path", str(tmp_path / "no")],
                           capsys)
    assert code == 2 and "--include-path" in err and "no such folder" in err
    code, _, err = run_cli(["lm-eval", "--run", str(lm_run), "--tasks", "synthesizer_no_such_task",
                            "--include-path", str(DATA)], capsys)
    assert code == 2 and "unknown task(s) synthesizer_no_such_task" in err


def test_text_the_tokenizer_maps_to_unk_is_warned_about_and_samples_are_kept_only_when_asked(lm_run, monkeypatch):
    import lm_eval

    from synthesizer.hf.harness import evaluate_harness

    from synthesizer.data.generated import GENERATED, fixed_tokenizer
    from synthesizer.data.tokenizer import Tokenizer

    # a run on a diagnostic corpus: its word-level vocabulary of 55 tokens maps English to <unk> only
    monkeypatch.setattr(Tokenizer, "load", staticmethod(lambda folder: fixed_tokenizer(GENERATED["diag-mqar"].vocab)))
    texts = {"synthesizer_tiny_perplexity": "the state of our union", "synthesizer_tiny_choice": "k1 3 k2 4"}

    def scored(model, model_args, tasks, **kw):  # as the harness returns them: the texts each request scored
        assert kw["log_samples"] is True
        return {"results": {}, "samples": {t: [{"arguments": [(texts[t],)]}] for t in tasks}}

    monkeypatch.setattr(lm_eval, "simple_evaluate", scored)
    with pytest.warns(UserWarning, match=r"synthesizer_tiny_perplexity: 100% of the \d+ tokens it scored are "
                                         r"unknown to the model's tokenizer \(<unk>, a vocabulary of 55 tokens\)") as seen:
        results = evaluate_harness(lm_run, TASKS.split(","), include_path=DATA)
    assert not any("synthesizer_tiny_choice" in str(w.message) for w in seen)  # words it knows: no warning
    assert "samples" not in results
    with pytest.warns(UserWarning):
        assert "samples" in evaluate_harness(lm_run, TASKS.split(","), include_path=DATA, log_samples=True)


def test_lm_eval_checks_its_output_and_device_before_evaluating(lm_run, tmp_path, capsys, monkeypatch):
    import torch

    code, _, err = run_cli(["lm-eval", "--run", str(lm_run), "--tasks", "x", "--output", str(tmp_path)], capsys)
    assert code == 2 and err == f"error: --output {tmp_path}: a folder; give a file name (the results are one JSON file)\n"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, _, err = run_cli(["lm-eval", "--run", str(lm_run), "--tasks", "x", "--device", "cuda"], capsys)
    assert code == 2 and "--device cuda: this torch sees no CUDA device" in err and err.count("\n") == 1
