"""Span-corruption pretraining, then fine-tuning a classifier from it (``init_from``), for every kind."""

import json
import math
import random

import pytest
import torch

from synthesizer.data.span_corruption import reconstruct, sentinel_tokens
from synthesizer.comparison.presets import DEFAULT_KINDS
from synthesizer.tasks import experiment
from synthesizer.tasks.config import ExperimentConfig
from synthesizer.tasks.data import load_data, task_class
from synthesizer.tasks.experiment import run_experiment
from synthesizer.tasks.trained import load_trained

WORDS = "the cat sat on a mat while dogs ran far away from home under blue skies and green trees".split()
MODEL = {"d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32, "max_len": 32, "dropout": 0.0}
TRAIN = {"max_steps": 2, "eval_every": 2, "log_every": 1, "warmup_steps": 0, "lr": 1e-3}


def sentence(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny text corpus (.txt) and a tiny sentiment-like classification corpus (.tsv) in each split."""
    root = tmp_path_factory.mktemp("data")
    rng = random.Random(0)
    paths = {}
    for split, n in (("train", 40), ("valid", 8), ("test", 8)):
        (root / f"{split}.txt").write_text("\n\n".join(sentence(rng, rng.randint(5, 60)) for _ in range(n)) + "\n")
        (root / f"{split}.tsv").write_text("".join(f"{i % 2}\t{sentence(rng, rng.randint(3, 12))}\n" for i in range(n)))
        paths[split] = root / split
    return paths


def pretrain_cfg(files, kind="vanilla", **model):
    return ExperimentConfig.from_dict({
        "task": "pretrain", "data": {s: str(files[s]) + ".txt" for s in ("train", "valid", "test")},
        "model": {**MODEL, **model, "attention": kind}, "tokenizer": {"vocab_size": 400, "min_frequency": 1},
        "batch": {"max_tokens": 512}, "train": TRAIN})


def finetune_cfg(files, init_from, kind="vanilla", **model):
    return ExperimentConfig.from_dict({
        "task": "classification", "data": {s: str(files[s]) + ".tsv" for s in ("train", "valid", "test")},
        "model": {**MODEL, **model, "attention": kind}, "batch": {"max_tokens": 256}, "train": TRAIN,
        "init_from": str(init_from)})


class Recorder(experiment.Trainer):
    """The real Trainer, keeping a copy of the model's weights as they are before the first update."""

    initial: dict = {}

    def __init__(self, model, *args, **kwargs):
        Recorder.initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
        super().__init__(model, *args, **kwargs)


ENCODER = {"embed.token.": "src_embed.token.", "embed.position.": "src_embed.position.", "blocks.": "encoder.",
           "ln_f.": "ln_enc."}


@pytest.mark.parametrize("kind", [*DEFAULT_KINDS, "none"])
def test_finetuning_starts_from_the_pretrained_encoder(files, tmp_path, monkeypatch, kind):
    pre = run_experiment(pretrain_cfg(files, kind), tmp_path / "pre", progress=False)
    assert pre["task"] == "pretrain" and pre["steps"] == 2 and pre["test_metrics"]["loss"] > 0
    pretrained, _, _ = load_trained(tmp_path / "pre")
    source = pretrained.state_dict()

    monkeypatch.setattr(experiment, "Trainer", Recorder)
    result = run_experiment(finetune_cfg(files, tmp_path / "pre", kind), tmp_path / "ft", progress=False)
    assert result["steps"] == 2 and "accuracy" in result["test_metrics"]
    assert result["init_from"]["run_dir"] == str(tmp_path / "pre") and result["init_from"]["attention"] == kind
    copied = 0
    for name, value in Recorder.initial.items():
        prefix = next((p for p in ENCODER if name.startswith(p)), None)
        if prefix is None:
            continue
        assert torch.equal(value, source[ENCODER[prefix] + name[len(prefix):]]), name
        copied += 1
    assert copied == sum(1 for n in source if n.startswith(("src_embed.", "encoder.", "ln_enc.")))
    # the pretrained tokenizer, not a new one
    assert (tmp_path / "ft" / "tokenizer" / "tokenizer.json").read_bytes() == \
        (tmp_path / "pre" / "tokenizer" / "tokenizer.json").read_bytes()


@pytest.fixture(scope="module")
def pretrained(files, tmp_path_factory):
    out = tmp_path_factory.mktemp("pre") / "run"
    run_experiment(pretrain_cfg(files), out, progress=False)
    return out


@pytest.mark.parametrize("change, message", [
    ({"kind": "random"}, "pretrained with attention 'vanilla', but model.attention is 'random'"),
    ({"d_model": 32}, r"the encoder does not fit: model.d_model=32 \(pretrained: 16\)"),
    ({"n_heads": 4}, r"model.n_heads=4 \(pretrained: 2\)"),
    ({"n_layers": 2}, r"model.n_layers=2 \(pretrained: 1\)"),
    ({"max_len": 64}, "model.max_len=64 is longer than the pretrained model's 32"),
])
def test_a_mismatched_finetuning_is_refused_in_one_line(files, pretrained, tmp_path, change, message):
    with pytest.raises(ValueError, match=message) as e:
        run_experiment(finetune_cfg(files, pretrained, **change), tmp_path / "ft", progress=False)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "ft").exists()  # refused before any folder is written


def test_a_run_without_a_checkpoint_or_not_a_run_is_refused(files, pretrained, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "experiment.json").write_text((pretrained / "experiment.json").read_text())
    with pytest.raises(ValueError, match="no checkpoint yet"):
        run_experiment(finetune_cfg(files, empty), tmp_path / "ft", progress=False)
    with pytest.raises(ValueError, match="not a run folder"):
        run_experiment(finetune_cfg(files, tmp_path / "nothing"), tmp_path / "ft", progress=False)


def test_a_shorter_max_len_keeps_the_pretrained_sizes_and_resume_works(files, pretrained, tmp_path):
    cfg = finetune_cfg(files, pretrained, max_len=24, on_too_long="truncate")
    first = run_experiment(cfg, tmp_path / "ft", progress=False)
    saved = json.loads((tmp_path / "ft" / "last" / "config.json").read_text())
    assert saved["max_len"] == 32 and first["steps"] == 2
    more = ExperimentConfig.from_dict({**cfg.to_dict(), "train": {**TRAIN, "max_steps": 3}})
    assert run_experiment(more, tmp_path / "ft", resume=True, progress=False)["steps"] == 3
    other = ExperimentConfig.from_dict({**more.to_dict(), "init_from": str(tmp_path / "elsewhere")})
    with pytest.raises(ValueError, match="not a run folder"):
        run_experiment(other, tmp_path / "ft", resume=True, progress=False)


def test_pretraining_trains_on_train_texts_with_sentinels(files, pretrained):
    cfg = pretrain_cfg(files)
    corpus = load_data(cfg)
    assert corpus.task == "lm" and corpus.splits["train"][0] == (files["train"].with_suffix(".txt")).read_text().split("\n\n")[0]
    model, tok, _ = load_trained(pretrained)
    sentinels = tok.special_ids(sentinel_tokens())
    assert sentinels == list(range(6, 106))
    task = task_class(cfg)(cfg, corpus, tok)
    srcs, tgts = task.encoded("valid")
    for src, tgt, ids in zip(srcs, tgts, task.chunks("valid")):
        assert reconstruct(src, tgt, sentinels) == ids and tgt[0] == sentinels[0]
    # a training chunk is corrupted afresh each epoch, the same way for the same epoch
    assert task.corrupt("train", 0, task.chunks("train")[0], 1) == task.corrupt("train", 0, task.chunks("train")[0], 1)


def test_the_trivial_predictor_of_pretraining_is_a_unigram_model_of_the_targets(files, pretrained):
    cfg = pretrain_cfg(files)
    _, tok, _ = load_trained(pretrained)
    task = task_class(cfg)(cfg, load_data(cfg), tok)
    counts = [0] * tok.vocab_size  # add-one counts of the training targets, each ending in </s>
    for target in task.encoded("train")[1]:
        for i in (*target, tok.eos_id):
            counts[i] += 1
    total = sum(counts) + tok.vocab_size
    test = [i for target in task.encoded("test")[1] for i in (*target, tok.eos_id)]
    nll = -sum(math.log((counts[i] + 1) / total) for i in test) / len(test)
    assert task.baselines("test") == {"unigram_perplexity": pytest.approx(math.exp(nll), rel=1e-9)}
    assert json.loads((pretrained / "result.json").read_text())["baselines"]["unigram_perplexity"] > 1


def test_config_checks_for_pretraining_and_init_from(files):
    with pytest.raises(ValueError, match="tokenizer.vocab_size must be an integer >= 362 for pretraining"):
        ExperimentConfig.from_dict({**pretrain_cfg(files).to_dict(), "tokenizer": {"vocab_size": 300}})
    with pytest.raises(ValueError, match="data.corpora .* is for task 'pretrain' only"):
        ExperimentConfig.from_dict({"task": "classification", "data": {"corpora": ["spam"]}})
    with pytest.raises(ValueError, match="task 'pretrain' reads data.corpora"):
        ExperimentConfig.from_dict({"task": "pretrain", "data": {"corpus": "sotu"}})
    with pytest.raises(ValueError, match="init_from is for the tasks classification, regression, not 'lm'"):
        ExperimentConfig.from_dict({"task": "lm", "data": {"corpus": "sotu"}, "init_from": "x"})
    cfg = ExperimentConfig.from_dict({"task": "pretrain", "data": {"corpora": ["spam", "sotu"]}})
    assert cfg.data["corpora"] == ["spam", "sotu"]


def test_a_glue_hub_task_fine_tunes_from_a_pretraining_run(files, pretrained, tmp_path):
    # the hub loader's local-file path (rows in the hub's format) feeds the same fine-tuning path
    rng = random.Random(1)
    for split, n in (("train", 120), ("validation", 16)):
        rows = [{"sentence": sentence(rng, rng.randint(2, 6)), "label": i % 2, "idx": i} for i in range(n)]
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = finetune_cfg(files, pretrained).to_dict()
    base["data"] = {"corpus": "rotten-tomatoes"}  # a shipped config's data, replaced on the command line
    files_arg = f"{{train: {tmp_path / 'train.jsonl'}, validation: {tmp_path / 'validation.jsonl'}}}"
    cfg = ExperimentConfig.from_dict(base, ["data.corpus=null", "data.hub=glue-sst2", f"data.data_files={files_arg}"])
    assert "corpus" not in cfg.data
    result = run_experiment(cfg, tmp_path / "ft", progress=False)
    assert result["data"] == "glue-sst2" and result["init_from"]["checkpoint"].startswith(str(pretrained))
    assert set(result["test_metrics"]) >= {"accuracy", "f1"}
