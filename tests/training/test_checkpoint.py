import json
import os
import random
import re

import numpy as np
import pytest
import torch

from synthesizer.training import (build_optimizer, build_scheduler, load_checkpoint, load_model_weights,
                                  save_checkpoint)
from tests.training.test_toy import TinyLM, make_data, step_fn, weights


def trained(seed=0, steps=3):
    torch.manual_seed(seed)
    model = TinyLM()
    opt = build_optimizer(model, lr=1e-2)
    sched = build_scheduler(opt, 2, 10, "cosine")
    x, y = make_data()
    for _ in range(steps):
        loss, n = step_fn(model, {"x": x[:8], "y": y[:8]})
        (loss / n).backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    return model, opt, sched


def draws():
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_round_trip_restores_weights_optimizer_scheduler_rng_and_tying(tmp_path):
    model, opt, sched = trained()
    torch.manual_seed(7), np.random.seed(7), random.seed(7)
    folder = save_checkpoint(tmp_path, model, opt, sched, step=3, extra={"epoch": 1, "batch_in_epoch": 2},
                             config={"d": 8}, tokenizer=lambda d: (d / "tok.json").write_text("{}"))
    expected = draws()
    assert sorted(os.listdir(folder)) == ["config.json", "model.safetensors", "tokenizer", "trainer_state.pt"]
    assert (tmp_path / "last").resolve() == folder.resolve()

    fresh, fresh_opt, fresh_sched = trained(seed=1, steps=1)
    state = load_checkpoint(tmp_path, fresh, fresh_opt, fresh_sched)
    assert draws() == expected
    assert state["step"] == 3 and state["extra"] == {"epoch": 1, "batch_in_epoch": 2} and state["config"] == {"d": 8}
    for k, v in weights(model).items():
        assert torch.equal(v, fresh.state_dict()[k]), k
    assert fresh.head.weight is fresh.embed.weight
    assert fresh_sched.state_dict()["last_epoch"] == 3
    assert fresh_opt.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    for p, q in zip(model.parameters(), fresh.parameters()):
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(opt.state[p][key], fresh_opt.state[q][key])
    # the two models now take identical steps
    x, y = make_data()
    for m, o in ((model, opt), (fresh, fresh_opt)):
        loss, n = step_fn(m, {"x": x[8:16], "y": y[8:16]})
        (loss / n).backward()
        o.step()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), fresh.parameters()))


def test_load_model_weights_from_run_folder_checkpoint_folder_or_file(tmp_path):
    model, opt, sched = trained()
    folder = save_checkpoint(tmp_path, model, step=3)
    for path in (tmp_path, folder, folder / "model.safetensors"):
        other = TinyLM()
        load_model_weights(path, other)
        assert torch.equal(other.mix.weight, model.mix.weight)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_model_weights(tmp_path / "missing", TinyLM())


def test_weights_of_another_revision_are_refused_by_every_loader(tmp_path):
    """A 0.1.0 file (no weights_revision: unscaled token embeddings) would load silently and mean other
    outputs: loading it into a model or resuming from it names the file and the revisions."""
    from safetensors.torch import load_file, save_file

    from synthesizer.training.checkpoint import WEIGHTS_REVISION, CheckpointError

    model, opt, sched = trained()
    folder = save_checkpoint(tmp_path, model, opt, sched, step=3)
    file = folder / "model.safetensors"
    load_model_weights(file, TinyLM())  # the current revision loads
    save_file(load_file(str(file)), str(file), metadata={"step": "3"})  # what 0.1.0 wrote
    message = f"{file} holds weights of revision 1, this synthesizer reads revision {WEIGHTS_REVISION}"
    with pytest.raises(CheckpointError, match=message):
        load_model_weights(tmp_path, TinyLM())
    with pytest.raises(CheckpointError, match="retrain it"):
        load_checkpoint(tmp_path, TinyLM(), build_optimizer(TinyLM(), lr=1e-2))


def test_failed_save_leaves_last_on_the_previous_complete_checkpoint(tmp_path):
    model, opt, sched = trained()
    save_checkpoint(tmp_path, model, opt, sched, step=1, best=True)
    before = weights(model)
    with torch.no_grad():
        model.mix.weight.add_(1.0)

    def broken_tokenizer(folder):
        (folder / "partial").write_text("x")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, model, opt, sched, step=2, tokenizer=broken_tokenizer)
    assert sorted(os.listdir(tmp_path)) == ["best", "last", "step-00000001"]  # no partial folder left
    fresh = TinyLM()
    assert load_checkpoint(tmp_path, fresh, restore_rng=False)["step"] == 1
    assert torch.equal(fresh.mix.weight, before["mix.weight"])


def test_best_and_last_links_and_old_checkpoints_are_pruned(tmp_path):
    model, opt, sched = trained()
    save_checkpoint(tmp_path, model, opt, sched, step=1, best=True)
    save_checkpoint(tmp_path, model, opt, sched, step=2)
    save_checkpoint(tmp_path, model, opt, sched, step=3)
    assert os.readlink(tmp_path / "best") == "step-00000001" and os.readlink(tmp_path / "last") == "step-00000003"
    # "previous" keeps the checkpoint before "last", a fallback should "last" be damaged later
    assert os.readlink(tmp_path / "previous") == "step-00000002"
    assert sorted(os.listdir(tmp_path)) == ["best", "last", "previous", "step-00000001", "step-00000002",
                                            "step-00000003"]
    save_checkpoint(tmp_path, model, opt, sched, step=3, best=True)  # same step again never overwrites in place
    assert os.readlink(tmp_path / "best") == os.readlink(tmp_path / "last") == "step-00000003.1"
    assert sorted(os.listdir(tmp_path)) == ["best", "last", "previous", "step-00000003", "step-00000003.1"]
    assert load_checkpoint(tmp_path, TinyLM(), which="best", restore_rng=False)["step"] == 3
    from synthesizer.training.checkpoint import step_of

    assert [step_of(tmp_path / name) for name in ("step-00000003", "step-00000003.1")] == [3, 3]
    assert step_of((tmp_path / "last").resolve()) == 3
    with pytest.raises(ValueError, match="'last' is not a checkpoint folder's name"):
        step_of(tmp_path / "last")


def test_a_truncated_checkpoint_names_the_file_and_resume_falls_back_to_the_previous_one(tmp_path):
    from synthesizer.training.checkpoint import CheckpointError
    from tests.training.test_toy import make_trainer

    make_trainer(tmp_path, max_steps=4, save_every=3).train()
    assert os.readlink(tmp_path / "last") == "step-00000004" and os.readlink(tmp_path / "previous") == "step-00000003"
    weights_file = tmp_path / "step-00000004" / "model.safetensors"
    weights_file.write_bytes(weights_file.read_bytes()[:100])
    with pytest.raises(CheckpointError, match=rf"checkpoint file {weights_file} is truncated or corrupt") as err:
        load_model_weights(tmp_path, TinyLM())
    assert "\n" not in str(err.value)
    resumed = make_trainer(tmp_path, max_steps=6)
    with pytest.warns(UserWarning, match=r"step-00000004/model.safetensors is truncated.*resuming from the older "
                                         r"checkpoint step-00000003 \(step 3\)"):
        result = resumed.train(resume=True)
    assert result.step == 6 and os.readlink(tmp_path / "last") == "step-00000006"
    assert not (tmp_path / "step-00000004").exists()  # the damaged one was pruned


class NotWeights:
    """An object torch.load(weights_only=True) refuses to build (no code of a checkpoint ever runs)."""


def damage(path, how: str) -> None:
    if how == "not weights-only":
        torch.save({"step": 4, "payload": NotWeights()}, path)
    elif how == "not a zip":
        path.write_bytes(b"this is not a checkpoint at all")
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    elif how == "missing keys":
        torch.save({"step": 4}, path)
    elif how == "config not JSON":
        path.write_text('{"vocab": 4')


@pytest.mark.parametrize("how, name", [("not weights-only", "trainer_state.pt"), ("not a zip", "trainer_state.pt"),
                                       ("truncated", "trainer_state.pt"), ("missing keys", "trainer_state.pt"),
                                       ("config not JSON", "config.json")])
def test_any_unreadable_checkpoint_file_is_corrupt_and_resume_falls_back(tmp_path, how, name):
    """Whatever is wrong with a file of the newest checkpoint: one line naming it, and --resume goes on
    from the older intact checkpoint (as docs/training.md promises for a corrupt one)."""
    from synthesizer.training.checkpoint import CheckpointError
    from tests.training.test_toy import make_trainer

    make_trainer(tmp_path, max_steps=4, save_every=3).train()
    broken = tmp_path / "step-00000004" / name
    damage(broken, how)
    model = TinyLM()
    with pytest.raises(CheckpointError, match=rf"^checkpoint file {broken} is truncated or corrupt") as err:
        load_checkpoint(tmp_path, model, build_optimizer(model, lr=1e-2))
    assert "\n" not in str(err.value) and "weights_only" not in str(err.value)
    with pytest.warns(UserWarning, match=rf"step-00000004/{name} is truncated or corrupt.*resuming from the older "
                                         r"checkpoint step-00000003 \(step 3\)"):
        result = make_trainer(tmp_path, max_steps=5).train(resume=True)
    assert result.step == 5


def test_a_full_disk_while_saving_is_one_line_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    import errno

    from synthesizer.training import checkpoint as ckpt

    model, opt, sched = trained()
    save_checkpoint(tmp_path, model, opt, sched, step=1)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    import safetensors.torch  # save_checkpoint imports save_model from it at each call

    monkeypatch.setattr(safetensors.torch, "save_model", full)
    with pytest.raises(ckpt.CheckpointError, match="no space left .*step-00000002.*'last' still points to "
                                                   "step-00000001") as err:
        save_checkpoint(tmp_path, model, opt, sched, step=2)
    assert "\n" not in str(err.value)
    assert sorted(os.listdir(tmp_path)) == ["last", "step-00000001"]
    assert load_checkpoint(tmp_path, TinyLM(), restore_rng=False)["step"] == 1


def test_a_finished_run_is_read_from_best_else_last(tmp_path):
    from synthesizer.training.checkpoint import finished_checkpoint

    with pytest.raises(FileNotFoundError, match="no checkpoint yet \\(no 'best' or 'last' folder\\)"):
        finished_checkpoint(tmp_path)
    model = TinyLM()
    only_last = save_checkpoint(tmp_path, model, step=1)
    assert finished_checkpoint(tmp_path) == only_last == finished_checkpoint(tmp_path, "last")
    best = save_checkpoint(tmp_path, model, step=2, best=True)
    save_checkpoint(tmp_path, model, step=3)
    assert finished_checkpoint(tmp_path) == best and finished_checkpoint(best) == best
    assert finished_checkpoint(tmp_path, "last").name == "step-00000003"


def refuse_log_writes_from(monkeypatch, step: int, saves_too: bool = False) -> None:
    """From ``step`` on, the run folder takes no more writes (made read-only mid-run), as root sees it too."""
    import builtins

    from synthesizer.training import loggers, loop

    def guarded(path, *args, **kwargs):
        if str(path).endswith("log.jsonl") and "a" in (args[0] if args else kwargs.get("mode", "r")):
            lines = open(path).read().splitlines() if os.path.exists(path) else []
            if lines and json.loads(lines[-1]).get("step", 0) >= step - 1:
                raise PermissionError(13, "Permission denied", str(path))
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(loggers, "open", guarded, raising=False)  # log.jsonl's writer
    if saves_too:
        def no_save(directory, *args, **kwargs):
            raise PermissionError(13, "Permission denied", str(directory))
        monkeypatch.setattr(loop, "save_checkpoint", no_save)


def test_a_run_folder_made_read_only_mid_run_saves_what_it_can_and_says_so_in_one_line(tmp_path, monkeypatch):
    from tests.training.test_toy import make_trainer

    refuse_log_writes_from(monkeypatch, 5)
    with pytest.raises(OSError) as err:
        make_trainer(tmp_path, max_steps=10, save_every=3).train()
    message = str(err.value)
    assert "\n" not in message, message
    assert message.startswith(f"training stopped at step 5: {tmp_path / 'log.jsonl'}: Permission denied"), message
    assert "saved checkpoint step-00000005 (step 5)" in message and "--resume" in message
    assert os.readlink(tmp_path / "last") == "step-00000005"  # the steps since the last checkpoint are kept


def test_a_run_folder_that_takes_no_checkpoint_either_names_the_last_one_kept(tmp_path, monkeypatch):
    from tests.training.test_toy import make_trainer

    make_trainer(tmp_path, max_steps=3, save_every=3).train()
    refuse_log_writes_from(monkeypatch, 5, saves_too=True)
    with pytest.raises(OSError) as err:
        make_trainer(tmp_path, max_steps=10, save_every=3).train(resume=True)
    message = str(err.value)
    assert "\n" not in message and message.startswith("training stopped at step 5: "), message
    assert "could not save a checkpoint" in message
    assert re.search(r"the last one kept is step-00000003(\.1)? \(step 3\)", message), message
