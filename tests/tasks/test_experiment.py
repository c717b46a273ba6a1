"""Each task family end to end on tiny data: a few steps, metrics, result.json schema, resume, loading."""

import dataclasses
import json
import math
import random
import re
import shutil
from pathlib import Path

import pytest
import torch

from synthesizer.data.records import DataError
from synthesizer.tasks import ExperimentConfig, load_trained, run_experiment
from synthesizer.tasks.lm import LMTask
from synthesizer.tasks.trained import evaluate_run

WORDS = "the cat sat on a mat and dog ran to big red house".split()
RESULT_KEYS = {"task", "data", "attention", "seed", "config", "test_metrics", "valid_metrics", "baselines",
               "primary_metric", "higher_is_better", "curve", "mixture_weights", "components", "params",
               "train_time_s", "train_tokens_per_s", "steps", "checkpoint", "log", "diverged"}
TINY_MODEL = {"d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32, "max_len": 32, "dropout": 0.0}



def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 7)))


def write_data(folder: Path, kind: str, n: int = 60) -> dict:
    """Tiny train/valid/test files: "lm" (.txt), "mt" (reverse the words) or "cls" (pairs: does b contain cat?)."""
    rng = random.Random(0)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, count in (("train", n), ("valid", n // 4), ("test", n // 4)):
        if kind == "lm":
            text = "\n\n".join(f"= doc {i} =\n" + " ".join(sentence(rng) + "." for _ in range(4)) for i in range(count // 5))
            path = folder / f"{split}.txt"
        elif kind == "mt":
            rows = [sentence(rng) for _ in range(count)]
            text = "\n".join(f"{r}\t{' '.join(reversed(r.split()))}" for r in rows)
            path = folder / f"{split}.tsv"
        else:
            rows = [(sentence(rng), sentence(rng)) for _ in range(count)]
            text = "\n".join(f"{'yes' if 'cat' in b else 'no'}\t{a}\t{b}" for a, b in rows)
            path = folder / f"{split}.tsv"
        path.write_text(text + "\n")
        paths[split] = str(path)
    return paths


def tiny_config(task: str, data: dict, attention: str = "vanilla", **sections) -> ExperimentConfig:
    cfg = {"task": task, "data": data, "model": {**TINY_MODEL, "attention": attention},
           "train": {"max_steps": 4, "eval_every": 2, "log_every": 1, "lr": 3e-3},
           "tokenizer": {"vocab_size": 300}, "batch": {"max_tokens": 128, "block_size": 16},
           "eval": {"beam_size": 2, "max_eval_examples": 4, "max_new_tokens": 12}}
    for name, values in sections.items():
        cfg[name] = {**cfg.get(name, {}), **values}
    return ExperimentConfig.from_dict(cfg)


def check_result(result: dict, out: Path, task: str, metrics: set) -> None:
    assert RESULT_KEYS <= set(result)
    assert json.loads((out / "result.json").read_text()) == result
    assert result["task"] == task and not result["diverged"]
    assert metrics <= set(result["test_metrics"])
    assert all(isinstance(v, float) for k, v in result["test_metrics"].items() if k in metrics)
    assert [p["step"] for p in result["curve"]] == [2, 4]
    assert all("train_loss" in p and "valid_loss" in p for p in result["curve"])
    assert result["params"]["total"] == sum(result["params"]["by_component"].values())
    assert result["train_time_s"] > 0 and result["train_tokens_per_s"] > 0 and result["steps"] == 4
    assert Path(result["checkpoint"]).name in ("best", "last") and (out / "tokenizer" / "tokenizer.json").is_file()


def test_language_model_with_a_mixture_logs_weights_and_resumes(tmp_path):
    out = tmp_path / "lm"
    cfg = tiny_config("lm", write_data(tmp_path / "d", "lm"), "random+vanilla")
    result = run_experiment(cfg, out, progress=False)
    check_result(result, out, "lm", {"perplexity", "bits_per_token"})
    assert result["primary_metric"] == "perplexity" and result["higher_is_better"] is False
    assert result["components"] == ["random", "vanilla"]
    assert result["params"]["attention_logits"] == (result["params"]["by_component"]["attention.random"]
                                                    + result["params"]["by_component"]["attention.vanilla"])
    history = result["mixture_weights"]
    assert [h["step"] for h in history] == [2, 4]
    assert len(history[0]["layers"]) == 1 and sum(history[0]["layers"][0]) == pytest.approx(1.0, abs=1e-4)
    base = result["baselines"]["unigram_perplexity"]
    assert 1 < base < 300 and result["test_metrics"]["perplexity"] > 1

    tokenizer_bytes = (out / "tokenizer" / "tokenizer.json").read_bytes()
    with pytest.raises(ValueError, match="already holds a finished run"):
        run_experiment(cfg, out, progress=False)
    more = ExperimentConfig.from_dict({**cfg.to_dict(), "train": {**cfg.train, "max_steps": 6}})
    resumed = run_experiment(more, out, resume=True, progress=False)
    assert resumed["steps"] == 6 and [p["step"] for p in resumed["curve"]] == [2, 4, 6]
    assert (out / "tokenizer" / "tokenizer.json").read_bytes() == tokenizer_bytes

    changed = ExperimentConfig.from_dict({**more.to_dict(), "model": {**more.model, "d_model": 32}})
    with pytest.raises(ValueError, match="model"):
        run_experiment(changed, out, resume=True, progress=False)

    model, tok, loaded = load_trained(out)
    assert loaded == more and not model.training and tok.vocab_size == model.config.vocab_size
    again = evaluate_run(out, "test")
    assert again["perplexity"] == pytest.approx(resumed["test_metrics"]["perplexity"], rel=1e-5)


def test_translation_beam_search_bleu_and_copy_baseline(tmp_path):
    out = tmp_path / "mt"
    cfg = tiny_config("translation", write_data(tmp_path / "d", "mt"), "random")
    result = run_experiment(cfg, out, progress=False)
    check_result(result, out, "translation", {"bleu", "loss", "perplexity"})
    assert result["primary_metric"] == "bleu" and result["higher_is_better"] is True
    assert result["test_metrics"]["n_generated"] == 4 and "bleu" in result["valid_metrics"]
    assert "copy_source_bleu" in result["baselines"] and result["mixture_weights"] == []


def test_classification_of_text_pairs(tmp_path):
    out = tmp_path / "cls"
    cfg = tiny_config("classification", write_data(tmp_path / "d", "cls"), "dense")
    result = run_experiment(cfg, out, progress=False)
    check_result(result, out, "classification", {"accuracy", "f1", "mcc"})
    assert 0.5 <= result["baselines"]["majority_accuracy"] <= 1
    assert json.loads((out / "labels.json").read_text()) == {"labels": ["no", "yes"]}
    model, _, _ = load_trained(out)
    assert model.config.n_classes == 2


def test_divergence_is_reported_not_raised(tmp_path, monkeypatch):
    calls = {"n": 0}
    original = LMTask.step_fn

    def exploding(self, model, batch):
        loss, n = original(self, model, batch)
        calls["n"] += 1
        return (loss * float("nan"), n) if calls["n"] > 2 else (loss, n)

    monkeypatch.setattr(LMTask, "step_fn", exploding)
    out = tmp_path / "nan"
    with pytest.warns(UserWarning, match="diverged"):
        result = run_experiment(tiny_config("lm", write_data(tmp_path / "d", "lm")), out, progress=False)
    assert result["diverged"] is True and result["steps"] == 2
    assert Path(result["checkpoint"]).name == "best" and "perplexity" in result["test_metrics"]


def test_too_long_sequences_error_unless_truncation_was_chosen(tmp_path):
    data = write_data(tmp_path / "d", "mt")
    long = " ".join(["house"] * 40)
    Path(data["train"]).write_text(Path(data["train"]).read_text() + f"{long}\t{long}\n")
    with pytest.raises(DataError, match=r"split 'train' example 61 .* source: \d+ tokens.*on_too_long=truncate"):
        run_experiment(tiny_config("translation", data), tmp_path / "a", progress=False)
    cfg = tiny_config("translation", data, model={"on_too_long": "truncate"}, train={"max_steps": 1, "eval_every": 0})
    with pytest.warns(UserWarning, match="truncated"):
        assert run_experiment(cfg, tmp_path / "b", progress=False)["steps"] == 1


def test_data_errors_name_the_file(tmp_path):
    data = write_data(tmp_path / "d", "mt")
    Path(data["valid"]).write_text("")
    with pytest.raises(DataError, match=r"valid.tsv: empty split"):
        run_experiment(tiny_config("translation", data), tmp_path / "a", progress=False)
    Path(data["valid"]).write_text("only one field\n")
    with pytest.raises(DataError, match=r"valid.tsv:1: expected 2 tab-separated fields"):
        run_experiment(tiny_config("translation", data), tmp_path / "a", progress=False)
    with pytest.raises(DataError, match="no such file"):
        run_experiment(tiny_config("translation", {**data, "test": str(tmp_path / "nope.tsv")}), tmp_path / "a",
                       progress=False)
    with pytest.raises(ValueError, match="is a lm corpus but task is 'translation'"):
        run_experiment(tiny_config("translation", {"corpus": "sotu-subset"}), tmp_path / "a", progress=False)


@pytest.mark.parametrize("task, metrics", [("summarization", {"rouge1", "rouge2", "rougeL"}),
                                           ("dialogue", {"bleu1", "rougeL", "perplexity"})])
def test_summarization_and_dialogue_metrics(task, metrics, tmp_path):
    cfg = tiny_config(task, write_data(tmp_path / "d", "mt"), train={"max_steps": 1, "eval_every": 0},
                      eval={"beam_size": 1})
    result = run_experiment(cfg, tmp_path / "r", progress=False)
    assert metrics <= set(result["test_metrics"]) and result["primary_metric"] in metrics
    assert {f"copy_source_{m}" for m in metrics if m != "perplexity"} | {"unigram_perplexity"} == set(result["baselines"])


def test_a_dialogue_run_judged_by_perplexity_against_the_unigram_model_of_its_targets(tmp_path):
    from synthesizer.tasks.data import load_data
    from synthesizer.tasks.seq2seq import Seq2SeqTask

    files = write_data(tmp_path / "d", "mt")
    cfg = tiny_config("dialogue", files, train={"max_steps": 1, "eval_every": 0}, eval={"beam_size": 1,
                                                                                        "metric": "perplexity"})
    result = run_experiment(cfg, tmp_path / "r", progress=False)
    assert (result["primary_metric"], result["higher_is_better"]) == ("perplexity", False)
    assert "per_example" not in result  # the BLEU-1 statistics are not the primary metric's
    assert {"bleu1", "rougeL"} <= set(result["test_metrics"])  # still generated and scored

    # the unigram model recomputed by hand: add-one counts of the training targets' tokens and ends,
    # scored on every test target's tokens and end
    task = Seq2SeqTask(cfg, load_data(cfg), load_trained(tmp_path / "r")[1])
    train, test = task.encoded("train")[1], task.encoded("test")[1]
    eos, vocab = task.tok.eos_id, task.tok.vocab_size
    counts = [1.0] * vocab
    for t in train:
        for i in [*t, eos]:
            counts[i] += 1
    total = sum(counts)
    nll = [-math.log(counts[i] / total) for t in test for i in [*t, eos]]
    assert result["baselines"]["unigram_perplexity"] == pytest.approx(math.exp(sum(nll) / len(nll)), rel=1e-9)

    with pytest.raises(ValueError, match="eval.metric must be one of bleu1, perplexity for task 'dialogue', got 'bleu'"):
        tiny_config("dialogue", files, eval={"metric": "bleu"})
    with pytest.raises(ValueError, match="eval.metric is for translation, summarization and dialogue"):
        tiny_config("lm", files, eval={"metric": "perplexity"})


def test_regression_on_numeric_labels(tmp_path):
    data = write_data(tmp_path / "d", "cls")
    for path in data.values():  # labels yes/no -> 1.0/0.0
        rows = Path(path).read_text().replace("yes\t", "1.0\t").replace("no\t", "0.0\t")
        Path(path).write_text(rows)
    result = run_experiment(tiny_config("regression", data, train={"max_steps": 2, "eval_every": 0}),
                            tmp_path / "r", progress=False)
    assert {"pearson", "spearman", "mse"} <= set(result["test_metrics"])
    assert result["primary_metric"] == "pearson" and "train_mean_mse" in result["baselines"]
    model, _, _ = load_trained(tmp_path / "r")
    assert model.config.n_classes == 1


def test_resume_refuses_a_different_run_even_one_that_crashed_before_its_first_checkpoint(tmp_path, monkeypatch):
    from synthesizer.training.loop import Trainer

    data = write_data(tmp_path / "d", "lm")
    out = tmp_path / "run"
    cfg = tiny_config("lm", data)

    def crash(self, resume=False):
        raise RuntimeError("crash before the first checkpoint")

    with monkeypatch.context() as m:
        m.setattr(Trainer, "train", crash)
        with pytest.raises(RuntimeError, match="crash"):
            run_experiment(cfg, out, progress=False)
    assert not (out / "last").exists() and (out / "experiment.json").is_file()
    saved = json.loads((out / "data.json").read_text())
    assert saved["data"]["name"] == "train" and set(saved["data"]["splits"]) == {"train", "valid", "test"}

    other = tiny_config("lm", data, train={"lr": 1e-2})
    with pytest.raises(ValueError, match=r"cannot resume .*train\.lr \(0\.003 before, 0\.01 now\)") as err:
        run_experiment(other, out, resume=True, progress=False)
    assert "\n" not in str(err.value)
    Path(data["train"]).write_text(Path(data["train"]).read_text().replace("cat", "cow"))
    with pytest.raises(ValueError, match="cannot resume .*the train split"):
        run_experiment(cfg, out, resume=True, progress=False)
    assert not (out / "last").exists()


def test_results_record_the_data_and_tokenizer_provenance(tmp_path):
    from synthesizer.data.provenance import file_hash

    out = tmp_path / "run"
    result = run_experiment(tiny_config("lm", write_data(tmp_path / "d", "lm"), train={"max_steps": 1}), out,
                            progress=False)
    prov = result["provenance"]
    assert prov == json.loads((out / "data.json").read_text())
    assert prov["data"]["origin"] and all(len(s["sha256"]) == 64 for s in prov["data"]["splits"].values())
    assert prov["tokenizer"]["sha256"] == file_hash(out / "tokenizer" / "tokenizer.json")


def test_a_run_folder_in_use_by_another_process_is_refused(tmp_path):
    from tests.runs.test_lock import hold_in_another_process

    out = tmp_path / "run"
    proc = hold_in_another_process(out)
    try:
        with pytest.raises(ValueError, match=rf"run folder {out} is in use by another process"):
            run_experiment(tiny_config("lm", write_data(tmp_path / "d", "lm")), out, progress=False)
    finally:
        proc.kill()
        proc.wait()
    assert sorted(p.name for p in out.iterdir()) == [".lock"]


def test_a_real_divergence_stops_the_run_and_a_healthy_run_is_not_flagged(tmp_path):
    data = write_data(tmp_path / "d", "lm")
    steady = {"max_steps": 10, "eval_every": 1, "warmup_steps": 0, "schedule": "constant"}
    with pytest.warns(UserWarning, match="diverged at step"):
        bad = run_experiment(tiny_config("lm", data, train={**steady, "lr": 10.0, "clip_norm": None}),
                             tmp_path / "bad", progress=False)
    assert bad["diverged"] is True and bad["stopped"] == "diverged" and bad["steps"] < 10
    log = [json.loads(line) for line in open(tmp_path / "bad" / "log.jsonl")]
    saved = sorted(int(p.name.split("-")[1]) for p in (tmp_path / "bad").glob("step-*"))
    assert all(step < bad["diverged_step"] for step in saved)  # nothing saved once the loss ran away
    assert not any(r["kind"] == "eval" and r["step"] >= bad["diverged_step"] for r in log)
    good = run_experiment(tiny_config("lm", data, train={**steady, "lr": 3e-3}), tmp_path / "good", progress=False)
    assert good["diverged"] is False and good["diverged_step"] is None and good["steps"] == 10


def test_classification_records_per_example_scores_that_give_its_accuracy(tmp_path):
    from synthesizer.report.stats import metric_of

    cfg = tiny_config("classification", write_data(tmp_path / "d", "cls"), train={"max_steps": 2, "eval_every": 0})
    result = run_experiment(cfg, tmp_path / "r", progress=False)
    stats = result["per_example"]
    assert stats["metric"] == "accuracy" and stats["kind"] == "accuracy"
    assert len(stats["values"]) == 15 and set(stats["values"]) <= {0, 1}  # every test example, 0/1 ints
    assert all(isinstance(v, int) for v in stats["values"])
    assert metric_of("accuracy", stats["values"]) == result["test_metrics"]["accuracy"]


def test_translation_records_per_sentence_bleu_statistics_that_give_its_bleu(tmp_path, monkeypatch):
    from synthesizer.report.stats import metric_of
    from synthesizer.tasks.seq2seq import Seq2SeqTask

    def half_right(self, model, srcs, *args, **kwargs):
        """The task's answer (the source words reversed) for every other sentence, nothing for the rest:
        a score strictly between 0 and 100 whatever a 2-step model would have said."""
        words = [text.split() for text in self.tok.decode_batch(srcs)]
        return [" ".join(reversed(w)) if i % 2 == 0 else "" for i, w in enumerate(words)]

    monkeypatch.setattr(Seq2SeqTask, "decode", half_right)
    cfg = tiny_config("translation", write_data(tmp_path / "d", "mt"), train={"max_steps": 2, "eval_every": 0},
                      eval={"beam_size": 1, "max_eval_examples": 100})
    result = run_experiment(cfg, tmp_path / "r", progress=False)
    stats = result["per_example"]
    assert stats["metric"] == "bleu" and stats["kind"] == "bleu"
    assert len(stats["values"]) == 15 == result["test_metrics"]["n_generated"]
    assert all(len(s) == 10 and all(isinstance(v, int) for v in s) for s in stats["values"])  # BLEU-4
    assert 0 < result["test_metrics"]["bleu"] < 100  # a real score, neither the all-zero nor the perfect case
    assert metric_of("bleu", stats["values"]) == pytest.approx(result["test_metrics"]["bleu"], abs=1e-6)


def test_language_model_records_no_per_example_statistics(tmp_path):
    cfg = tiny_config("lm", write_data(tmp_path / "d", "lm"), train={"max_steps": 1, "eval_every": 0})
    assert "per_example" not in run_experiment(cfg, tmp_path / "r", progress=False)


@pytest.mark.parametrize("task, metric, kind, width", [("summarization", "rougeL", "rouge", None),
                                                       ("dialogue", "bleu1", "bleu", 4)])
def test_summarization_and_dialogue_record_per_example_statistics_of_their_primary_metric(task, metric, kind, width,
                                                                                          tmp_path):
    from synthesizer.report.stats import metric_of

    cfg = tiny_config(task, write_data(tmp_path / "d", "mt"), train={"max_steps": 1, "eval_every": 0},
                      eval={"beam_size": 1})
    result = run_experiment(cfg, tmp_path / "r", progress=False)
    stats = result["per_example"]
    assert (stats["metric"], stats["kind"]) == (metric, kind) and len(stats["values"]) == 4  # max_eval_examples
    if width:  # BLEU-1: [hyp_len, ref_len, correct_1, total_1]
        assert all(len(s) == width for s in stats["values"])
    # ROUGE values are rounded to 4 decimals in points
    assert metric_of(kind, stats["values"]) == pytest.approx(result["test_metrics"][metric], abs=1e-4)


def test_max_words_keeps_the_short_examples_of_every_split_before_the_limit(tmp_path):
    from synthesizer.tasks.data import load_data

    files = write_data(tmp_path / "mt", "mt", n=80)
    full = load_data(tiny_config("translation", files))
    short = load_data(tiny_config("translation", {**files, "max_words": 5}))
    for split in ("train", "valid", "test"):
        kept = [r for r in full[split] if len(r["source"].split()) <= 5]  # reversal: the target as long
        assert short[split] == kept and 0 < len(kept) < len(full[split])
    limited = load_data(tiny_config("translation", {**files, "max_words": 5, "limit": 7}))
    assert limited["train"] == short["train"][:7]  # 7 short examples, not the short ones among the first 7
    with pytest.raises(DataError, match="empty or missing 'train' split after data.max_words=2 "
                                        "\\(no example that short\\)"):
        load_data(tiny_config("translation", {**files, "max_words": 2}))
    with pytest.raises(ValueError, match="data.max_words keeps the short examples .* a 'lm' run reads documents"):
        load_data(tiny_config("lm", {**write_data(tmp_path / "lm", "lm"), "max_words": 5}))
    with pytest.raises(ValueError, match="data.max_words must be"):
        tiny_config("translation", {**files, "max_words": 0})


@pytest.mark.parametrize("data", [{}, {"name": "mine"}])
def test_the_data_name_of_a_config_is_the_loaded_corpus_name(tmp_path, data):
    from synthesizer.tasks.data import load_data

    cfg = tiny_config("translation", {**write_data(tmp_path / "d", "mt"), **data})
    assert cfg.data_name == load_data(cfg).name == (data.get("name") or "train")
    assert ExperimentConfig.from_dict({"task": "lm", "data": {"corpus": "sotu-subset"},
                                       "train": {"max_steps": 1}}).data_name == load_data(
        ExperimentConfig.from_dict({"task": "lm", "data": {"corpus": "sotu-subset"}, "train": {"max_steps": 1}})).name
    pooled = ExperimentConfig.from_dict({"task": "pretrain", "data": {"corpora": ["sotu-subset", "spam"]},
                                         "tokenizer": {"vocab_size": 400}, "train": {"max_steps": 1}})
    assert pooled.data_name == "sotu-subset+spam"


def test_a_finished_run_whose_checkpoint_links_are_gone_is_never_trained_again(tmp_path):
    # finished is what result.json says: a run whose links were removed (to save disk) is not retrained from step 0
    out = tmp_path / "lm"
    cfg = tiny_config("lm", write_data(tmp_path / "d", "lm"))
    run_experiment(cfg, out, progress=False)
    kept = {name: (out / name).read_bytes() for name in ("result.json", "log.jsonl", "experiment.json")}
    for link in ("last", "best", "previous"):
        if (out / link).is_symlink():
            (out / link).unlink()
    for step in out.glob("step-*"):
        shutil.rmtree(step)
    other_seed = dataclasses.replace(cfg, seed=1)
    for config, resume, named in ((other_seed, False, "already holds a finished run"),
                                  (cfg, True, "whose checkpoints are gone (no last)")):
        with pytest.raises(ValueError, match=re.escape(named)):
            run_experiment(config, out, resume=resume, progress=False)
    assert {name: (out / name).read_bytes() for name in kept} == kept
    (out / "last").symlink_to("step-00000004")  # a link left dangling counts as a checkpoint too
    (out / "result.json").unlink()
    with pytest.raises(ValueError, match="already holds a trained run"):
        run_experiment(cfg, out, progress=False)
