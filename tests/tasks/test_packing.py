"""batch.pack through the tasks: packed training batches hold every training example once, each at its own
positions, and a packed run trains, evaluates and resumes like a padded one."""

from __future__ import annotations

import pytest
import torch

from synthesizer.data import Tokenizer
from synthesizer.tasks import ExperimentConfig, run_experiment
from synthesizer.tasks.data import load_data, task_class

from .test_experiment import check_result, tiny_config, write_data


def task_of(cfg: ExperimentConfig):
    corpus = load_data(cfg)
    return task_class(cfg)(cfg, corpus, Tokenizer.train(corpus.texts("train"), vocab_size=300))


@pytest.mark.parametrize("task, kind", [("translation", "mt"), ("classification", "cls")])
def test_packed_batches_hold_each_training_example_once_within_the_token_budget(tmp_path, task, kind):
    cfg = tiny_config(task, write_data(tmp_path, kind), batch={"pack": True, "max_tokens": 64})
    t = task_of(cfg)
    batches = list(t.train_batches(0, 0))
    key = "src" if task == "translation" else "ids"
    docs = "src_documents" if task == "translation" else "documents"
    n = sum(int(b[docs].amax(dim=1).add(1).sum()) for b in batches)
    assert n == len(t.encoded("train")[0])  # every example once, none split
    for b in batches:
        assert b[key].shape[0] <= 64 // 32  # rows of max_len tokens within max_tokens
        real = ~(b["src_mask"] if task == "translation" else b["mask"])
        pos = b["src_positions" if task == "translation" else "positions"]
        d = b[docs]
        starts = real & torch.cat([torch.ones_like(d[:, :1], dtype=torch.bool), d[:, 1:] != d[:, :-1]], dim=1)
        assert bool((pos[starts] == 0).all()) and bool((pos[real & ~starts] > 0).all())
    if task == "classification":  # one label per packed input
        assert all(b["labels"].shape[0] == int(b["documents"].amax(dim=1).add(1).sum()) for b in batches)


def test_the_lm_packs_document_pieces_and_never_predicts_across_documents(tmp_path):
    cfg = tiny_config("lm", write_data(tmp_path, "lm"), batch={"pack": True})
    t = task_of(cfg)
    batch = next(iter(t.train_batches(0, 0)))
    d, real = batch["documents"], ~batch["padding"]
    assert bool((batch["targets"][~real] == t.tok.pad_id).all())
    # within a document the target of token i is the input of token i + 1
    same = (d[:, 1:] == d[:, :-1]) & real[:, 1:]
    assert bool((batch["targets"][:, :-1][same] == batch["ids"][:, 1:][same]).all())
    total = sum(int((~b["padding"]).sum()) for b in t.train_batches(0, 0))
    assert total == sum(len(p) - 1 for p in t.pieces())


@pytest.mark.parametrize("task, kind, metrics", [("lm", "lm", {"perplexity"}), ("translation", "mt", {"bleu"}),
                                                 ("classification", "cls", {"accuracy"})])
def test_a_packed_run_trains_and_reports(tmp_path, task, kind, metrics):
    out = tmp_path / "run"
    cfg = tiny_config(task, write_data(tmp_path / "d", kind), "random+vanilla", batch={"pack": True})
    result = run_experiment(cfg, out, progress=False)
    check_result(result, out, task, metrics)


def test_pack_is_refused_where_it_cannot_hold(tmp_path):
    with pytest.raises(ValueError, match="batch.pack must be true or false"):
        tiny_config("lm", write_data(tmp_path, "lm"), batch={"pack": "yes"})
    cfg = tiny_config("translation", write_data(tmp_path / "m", "mt"), "lightconv", batch={"pack": True})
    with pytest.raises(ValueError, match="cannot take packed rows"):
        run_experiment(cfg, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
