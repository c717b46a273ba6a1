"""The command line in-process (fast), plus `python -m synthesizer` and a 2-process torchrun smoke test."""

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from synthesizer.cli import main
from synthesizer.tasks import run_experiment
from tests.helpers import free_port
from tests.tasks.test_experiment import tiny_config, write_data


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    out = {}
    for task, kind in (("lm", "lm"), ("translation", "mt"), ("classification", "cls")):
        out[task] = root / task
        run_experiment(tiny_config(task, write_data(root / f"data-{kind}", kind)), out[task], progress=False)
    return out


def write_config(path: Path, cfg) -> Path:
    path.write_text(yaml.safe_dump(cfg.to_dict()))
    return path


@pytest.mark.parametrize("command", [[], ["train"], ["evaluate"], ["generate"], ["configs"]])
def test_help_of_every_command(command, capsys):
    code, out, _ = run_cli(command + ["--help"], capsys)
    assert code == 0 and "usage: synthesizer" in out
    if command == ["train"]:
        assert all(opt in out for opt in ("--config", "--attention", "--out", "--resume", "--set"))
    if command == ["generate"]:
        assert all(opt in out for opt in ("--prompt", "--input", "--beam", "--sample", "--top-k", "--max-new-tokens"))


def test_configs_lists_the_shipped_configs(capsys):
    code, out, _ = run_cli(["configs"], capsys)
    assert code == 0 and "lm-sotu-small" in out and "wmt14-ende-base" in out


def test_train_from_the_command_line_with_overrides(tmp_path, capsys):
    cfg = tiny_config("classification", write_data(tmp_path / "d", "cls"))
    config = write_config(tmp_path / "c.yaml", cfg)
    code, out, _ = run_cli(["train", "--config", str(config), "--attention", "random", "--out", str(tmp_path / "r"),
                            "--set", "train.max_steps=2", "--set", "train.eval_every=0", "--quiet"], capsys)
    assert code == 0
    summary = json.loads(out)
    assert summary["attention"] == "random" and summary["steps"] == 2 and "accuracy" in summary["test"]
    result = json.loads((tmp_path / "r" / "result.json").read_text())
    assert result["config"]["train"]["max_steps"] == 2


@pytest.mark.parametrize("args, message", [
    (["--attention", "banana"], "unknown attention kind 'banana'"),
    (["--set", "model.d_modle=8"], "unknown config key model.'d_modle' (did you mean 'd_model'?)"),
    (["--set", "task=parsing"], "unknown task 'parsing'; allowed: lm, translation"),
])
def test_bad_options_exit_2_with_one_clear_line(args, message, tmp_path, capsys):
    config = write_config(tmp_path / "c.yaml", tiny_config("lm", {"corpus": "sotu-subset"}))
    code, out, err = run_cli(["train", "--config", str(config), "--out", str(tmp_path / "r")] + args, capsys)
    assert code == 2 and err.startswith("error: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_missing_files_exit_2(tmp_path, capsys):
    code, _, err = run_cli(["train", "--config", str(tmp_path / "none.yaml")], capsys)
    assert code == 2 and "no such file and no shipped config" in err
    data = write_data(tmp_path / "d", "mt")
    config = write_config(tmp_path / "c.yaml", tiny_config("translation", {**data, "valid": str(tmp_path / "gone.tsv")}))
    code, _, err = run_cli(["train", "--config", str(config), "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and err.strip() == f"error: {tmp_path / 'gone.tsv'}: no such file"
    code, _, err = run_cli(["evaluate", "--run", str(tmp_path)], capsys)
    assert code == 2 and "not a run folder" in err


def test_a_trained_run_is_never_overwritten(runs, capsys, tmp_path):
    config = write_config(tmp_path / "c.yaml", tiny_config("lm", {"corpus": "sotu-subset"}))
    before = sorted(p.name for p in runs["lm"].iterdir())
    code, _, err = run_cli(["train", "--config", str(config), "--out", str(runs["lm"])], capsys)
    assert code == 2 and "already holds a finished run" in err and "--resume" in err
    assert sorted(p.name for p in runs["lm"].iterdir()) == before


def test_evaluate_prints_the_metrics(runs, capsys):
    code, out, _ = run_cli(["evaluate", "--run", str(runs["lm"]), "--split", "valid"], capsys)
    assert code == 0 and json.loads(out)["perplexity"] > 1


def test_generate_from_trained_runs(runs, tmp_path, capsys):
    code, out, _ = run_cli(["generate", "--run", str(runs["lm"]), "--prompt", "the cat", "--max-new-tokens", "5"], capsys)
    assert code == 0 and out.startswith("the cat") and len(out.splitlines()) == 1
    code, out, _ = run_cli(["generate", "--run", str(runs["lm"]), "--prompt", "the", "--sample", "--top-k", "5",
                            "--top-p", "0.9", "--temperature", "0.8", "--max-new-tokens", "4"], capsys)
    assert code == 0 and out.startswith("the")
    inputs = tmp_path / "in.txt"
    inputs.write_text("the cat sat\na red house\n")
    code, out, _ = run_cli(["generate", "--run", str(runs["translation"]), "--input", str(inputs), "--beam", "2",
                            "--max-new-tokens", "8"], capsys)
    assert code == 0 and len(out.splitlines()) == 2
    code, out, _ = run_cli(["generate", "--run", str(runs["classification"]), "--prompt", "a dog\tthe cat"], capsys)
    label, prob = out.split("\t")
    assert code == 0 and label in ("no", "yes") and 0.5 <= float(prob) <= 1
    code, _, err = run_cli(["generate", "--run", str(runs["lm"]), "--prompt", "x", "--max-new-tokens", "500"], capsys)
    assert code == 2 and "exceeds max_len=32" in err


def test_generate_by_default_fits_the_models_max_len_and_says_what_fits(runs, capsys):
    """The default number of new tokens fits max_len (32 here); too many asked names the option, not a
    setting the command line does not offer."""
    for run in ("lm", "translation"):
        code, out, err = run_cli(["generate", "--run", str(runs[run]), "--prompt", "the cat sat"], capsys)
        assert code == 0 and out.count("\n") == 1, err
    code, _, err = run_cli(["generate", "--run", str(runs["lm"]), "--prompt", "the cat", "--max-new-tokens", "40"],
                           capsys)
    fits = re.search(r"prompt length (\d+) \+ --max-new-tokens 40 exceeds max_len=32; give at most (\d+)", err)
    assert code == 2 and fits and int(fits[1]) + int(fits[2]) == 32, err
    assert "on_too_long" not in err and err.count("\n") == 1


def test_bench_and_compare_forward_the_rest_of_the_command_line(monkeypatch, capsys):
    seen = {}
    fake = types.ModuleType("synthesizer.comparison.main")
    fake.main = lambda argv: seen.setdefault("compare", argv) and 0
    monkeypatch.setitem(sys.modules, "synthesizer.comparison.main", fake)
    code, _, _ = run_cli(["compare", "runs/a", "--out", "x"], capsys)
    assert code == 0 and seen["compare"] == ["runs/a", "--out", "x"]
    import synthesizer.bench.__main__ as bench
    monkeypatch.setattr(bench, "main", lambda argv, prog: seen.setdefault("bench", (argv, prog)))
    assert run_cli(["bench", "attention", "--n", "64"], capsys)[0] == 0
    assert seen["bench"] == (["attention", "--n", "64"], "synthesizer bench")


def test_python_dash_m_reports_errors_with_exit_code_2():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "synthesizer", "train", "--config", "lm-sotu-small",
                           "--attention", "nope"], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and proc.stderr.startswith("error: unknown attention kind 'nope'")


def test_only_the_projects_bad_input_errors_are_one_line(monkeypatch, capsys):
    """An InputError raised inside a command is the user's: one line, exit 2. Any other ValueError (here a
    statistics.StatisticsError, the kind a bug in the report raises) is a bug: it reaches the caller."""
    import statistics

    import synthesizer.tasks.config as config
    from synthesizer.errors import InputError

    def bad_input():
        raise InputError("configs: the folder holds a broken config")

    monkeypatch.setattr(config, "shipped_configs", bad_input)
    code, out, err = run_cli(["configs"], capsys)
    assert (code, out, err) == (2, "", "error: configs: the folder holds a broken config\n")

    def bug():
        raise statistics.StatisticsError("mean requires at least one data point")

    monkeypatch.setattr(config, "shipped_configs", bug)
    with pytest.raises(statistics.StatisticsError, match="at least one data point"):
        main(["configs"])


def test_a_bug_inside_a_command_keeps_its_traceback():
    """`python -m synthesizer`: a ValueError that is not the project's InputError prints its traceback and
    exits 1 (Python's status for an uncaught exception), not the one line and status 2 of bad input."""
    script = ("import sys, synthesizer.tasks.config as c\n"
              "def bug():\n    raise ValueError('an internal check failed')\n"
              "c.shipped_configs = bug\n"
              "from synthesizer.cli import main\nsys.argv = ['synthesizer', 'configs']\nmain()\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("Traceback (most recent call last):")
    assert proc.stderr.splitlines()[-1] == "ValueError: an internal check failed"
    assert "error: " not in proc.stderr


# two fresh interpreters plus the launcher take 20-45 s on 2 cores, over this file's time budget
@pytest.mark.skipif(not os.environ.get("SYNTHESIZER_TEST_TORCHRUN"), reason="set SYNTHESIZER_TEST_TORCHRUN=1 to run")
def test_torchrun_with_two_processes_trains_and_only_rank_0_reports(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    config = write_config(tmp_path / "c.yaml", tiny_config("translation", write_data(tmp_path / "d", "mt")))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()), "-m", "synthesizer", "train",
           "--config", str(config), "--out", str(tmp_path / "ddp"), "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count('"task": "translation"') == 1  # only rank 0 reports
    result = json.loads((tmp_path / "ddp" / "result.json").read_text())
    assert result["steps"] == 4 and "bleu" in result["test_metrics"]
    import torch
    state = torch.load(tmp_path / "ddp" / "last" / "trainer_state.pt", weights_only=True)
    assert state["extra"]["world_size"] == 2


# ----------------------------------------------------------------------------- optional dependencies

def cli_without(module: str, argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``synthesizer ARGV`` in a fresh interpreter where ``import MODULE`` fails as if it were not installed."""
    code = (f"import sys; sys.modules[{module!r}] = None; from synthesizer.cli import main; "
            f"sys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.mark.parametrize("argv", [["train", "--config", "lm-sotu-small"], ["generate", "--run", "lm", "--prompt", "x"]])
def test_a_missing_extra_is_one_line_naming_it(argv, runs):
    proc = cli_without("safetensors", argv, runs["lm"].parent)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"error: synthesizer {argv[0]} needs the 'train' extra (missing module 'safetensors'): "
                           f"pip install 'synthesizer-pytorch[train]'\n")


@pytest.mark.parametrize("module", ["safetensors", "numpy", "tokenizers"])
def test_configs_needs_no_training_extra(module, tmp_path):
    proc = cli_without(module, ["configs"], tmp_path)
    assert proc.returncode == 0 and "lm-sotu-small" in proc.stdout, proc.stderr


def test_python_dash_m_bench_names_the_bench_extra(tmp_path):
    """The layer benchmark runs, then its plots need matplotlib: one line, the results so far are on disk."""
    code = ("import runpy, sys; sys.modules['matplotlib'] = None; "
            "sys.argv = ['synthesizer.bench', *sys.argv[1:]]; runpy.run_module('synthesizer.bench', run_name='__main__')")
    argv = ["layer", "--kinds", "random", "--baselines", "--seqs", "8", "--batch", "1", "--d-model", "16", "--heads",
            "2", "--repeats", "1", "--warmup", "0", "--no-memory", "--out", str(tmp_path / "b")]
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 2 and proc.stderr.splitlines()[-1] == (
        "error: python -m synthesizer.bench needs the 'bench' extra (missing module 'matplotlib'): "
        "pip install 'synthesizer-pytorch[bench]'")
    assert "Traceback" not in proc.stderr and (tmp_path / "b" / "results.jsonl").is_file()


# ----------------------------------------------------------------------------- bench and compare help

@pytest.mark.parametrize("argv, usage", [(["bench", "--help"], "usage: synthesizer bench [-h]"),
                                         (["bench", "layer", "--help"], "usage: synthesizer bench layer [-h]"),
                                         (["compare", "--help"], "usage: synthesizer compare [-h]")])
def test_help_of_forwarded_commands_names_them(argv, usage, capsys):
    code, out, _ = run_cli(argv, capsys)
    assert code == 0 and out.startswith(usage)


# ----------------------------------------------------------------------------- blank and failing inputs

def test_generate_blank_inputs(runs, tmp_path, capsys):
    """A blank line gives an empty output line (seq2seq, classifier); an empty LM prompt starts a document."""
    inputs = tmp_path / "in.txt"
    inputs.write_text("the cat sat\n\na red house\n")
    for run, extra in (("translation", ["--beam", "2"]), ("translation", []), ("classification", [])):
        code, out, _ = run_cli(["generate", "--run", str(runs[run]), "--input", str(inputs), "--max-new-tokens", "6",
                                *extra], capsys)
        lines = out.split("\n")
        assert code == 0 and len(lines) == 4 and lines[1] == "" and lines[3] == ""
        if run == "classification":  # a label for every text (a 2-step translation model may stop at once)
            assert lines[0] and lines[2]
    code, out, _ = run_cli(["generate", "--run", str(runs["translation"]), "--prompt", "", "--max-new-tokens", "6"],
                           capsys)
    assert code == 0 and out == "\n"
    code, out, _ = run_cli(["generate", "--run", str(runs["lm"]), "--prompt", "", "--max-new-tokens", "5"], capsys)
    assert code == 0 and out.count("\n") == 1 and out[:-1] == out[:-1].lstrip()  # may be empty: a 2-step model


def test_generate_names_the_failing_input_line_and_keeps_the_outputs_before_it(runs, tmp_path, capsys):
    inputs = tmp_path / "in.txt"
    inputs.write_text("the cat\n" + "cat " * 40 + "\nthe dog\n")
    code, out, err = run_cli(["generate", "--run", str(runs["lm"]), "--input", str(inputs), "--max-new-tokens", "4"],
                             capsys)
    assert code == 2 and out.startswith("the cat") and out.count("\n") == 1
    assert err.startswith(f"error: --input {inputs}:2: prompt length ") and err.endswith(" exceeds max_len=32\n")
    assert err.count("\n") == 1


# ----------------------------------------------------------------------------- --out folders and OS errors

def test_out_naming_a_file_is_one_line_for_every_command(runs, tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.write_text("not a folder\n")
    config = write_config(tmp_path / "c.yaml", tiny_config("lm", {"corpus": "sotu-subset"}))
    for argv in (["train", "--config", str(config), "--out", str(taken)],
                 ["export", "--run", str(runs["lm"]), "--out", str(taken)],
                 ["compare", "run", "--preset", "lm", "--out", str(taken)],
                 ["compare", "plan", "--preset", "lm", "--out", str(taken)],
                 ["compare", "render", str(tmp_path), "--out", str(taken / "sub")],
                 ["bench", "layer", "--out", str(taken)]):
        code, out, err = run_cli(argv, capsys)
        assert code == 2 and err.startswith("error: --out ") and err.count("\n") == 1, (argv, err)
        assert str(taken) in err and "Traceback" not in err
    assert taken.read_text() == "not a folder\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="permissions do not stop root")
def test_out_under_a_read_only_folder_is_refused_before_any_work(runs, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        config = write_config(tmp_path / "c.yaml", tiny_config("lm", {"corpus": "sotu-subset"}))
        for argv in (["train", "--config", str(config), "--out", str(locked / "r")],
                     ["export", "--run", str(runs["lm"]), "--out", str(locked / "hf")]):
            code, _, err = run_cli(argv, capsys)
            assert code == 2 and err == f"error: --out {locked / argv[-1].split('/')[-1]}: no permission to write in {locked}\n"
    finally:
        locked.chmod(0o755)


def test_an_os_error_is_one_line_with_exit_code_1(tmp_path, capsys, monkeypatch):
    """A permission denied where no check could see it coming (root, a network file system): one line."""
    real_mkdir = Path.mkdir

    def mkdir(self, *args, **kwargs):
        if "locked" in self.parts:
            raise PermissionError(13, "Permission denied", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    config = write_config(tmp_path / "c.yaml", tiny_config("lm", {"corpus": "sotu-subset"}))
    code, _, err = run_cli(["train", "--config", str(config), "--out", str(tmp_path / "locked" / "r"), "--quiet"], capsys)
    assert code == 1 and err == f"error: {tmp_path / 'locked' / 'r'}: Permission denied; check the folder's permissions\n"


def test_ctrl_c_outside_training_is_one_line_with_exit_code_130(tmp_path, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("synthesizer.tasks.experiment.run_experiment", interrupted)
    config = write_config(tmp_path / "c.yaml", tiny_config("lm", {"corpus": "sotu-subset"}))
    code, out, err = run_cli(["train", "--config", str(config), "--out", str(tmp_path / "r")], capsys)
    assert code == 130 and out == "" and err == "synthesizer train: interrupted\n"


def test_a_config_with_a_python_tag_runs_no_code_and_is_one_line(tmp_path, capsys):
    """Configs are read with yaml.safe_load: a tag that would build a Python object is an error."""
    marker = tmp_path / "ran"
    config = tmp_path / "c.yaml"
    config.write_text(f"task: lm\nseed: !!python/object/apply:os.system ['touch {marker}']\n")
    code, _, err = run_cli(["train", "--config", str(config), "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and err.startswith(f"error: {config}:2: invalid YAML") and err.count("\n") == 1, err
    assert not marker.exists()


def test_evaluate_falls_back_from_a_damaged_best_checkpoint_to_last(runs, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(runs["lm"], run, symlinks=True)
    damaged = run / "step-damaged"
    shutil.copytree(run / "last", damaged)
    (damaged / "config.json").write_text('{"vocab_size": 3')
    (run / "best").unlink()
    (run / "best").symlink_to("step-damaged")
    expected = run_cli(["evaluate", "--run", str(run), "--checkpoint", "last"], capsys)
    with pytest.warns(UserWarning, match=rf"checkpoint file {damaged / 'config.json'} is truncated or corrupt.*"
                                         r"using 'last' instead"):
        code, out, err = run_cli(["evaluate", "--run", str(run)], capsys)
    assert (code, out) == expected[:2] and code == 0
    (run / "last").unlink()
    (run / "last").symlink_to("step-damaged")
    code, _, err = run_cli(["evaluate", "--run", str(run)], capsys)
    assert code == 2 and err.startswith(f"error: checkpoint file {damaged / 'config.json'} is truncated or corrupt")
    assert err.count("\n") == 1


def test_data_prints_the_origin_and_the_hashes_a_run_records(capsys):
    from synthesizer.data import load_corpus
    from synthesizer.data.provenance import data_provenance

    code, out, _ = run_cli(["data", "sotu-subset"], capsys)
    expected = data_provenance(load_corpus("sotu-subset"))
    assert code == 0 and out.splitlines()[0] == f"sotu-subset: {expected['origin']}"
    for split, v in expected["splits"].items():
        assert f"{split:<5} {v['examples']:>7} examples  sha256 {v['sha256']}" in out


def test_a_classifier_input_too_long_for_the_model_follows_its_length_policy(runs, capsys):
    """generate encodes a classifier's input as the task does (tasks.classification.encode_input): past
    max_len it applies the model's on_too_long (here "error"), naming the length and the limit."""
    long_pair = " ".join(["the cat"] * 40) + "\ta dog"
    code, _, err = run_cli(["generate", "--run", str(runs["classification"]), "--prompt", long_pair], capsys)
    assert code == 2 and "more than the model's max_len=32 (its on_too_long: error)" in err


def test_the_classifier_input_is_the_tasks_encoding_cut_longer_part_first():
    from synthesizer.data.generated import fixed_tokenizer
    from synthesizer.tasks.classification import encode_input

    tok = fixed_tokenizer(["a", "b", "c"])
    ids, segs = encode_input(tok, "a a a a a a", "b b", 8, fit=lambda n: None)  # 6 + 2 + 3 special > 8
    assert len(ids) == 8 and segs == [0, 0, 0, 0, 0, 1, 1, 1]  # the first part lost 3, the pair kept its 2
    assert ids[0] == tok.cls_id and ids.count(tok.sep_id) == 2
    with pytest.raises(ValueError, match="too long"):
        encode_input(tok, "a a a a a a", None, 4, fit=lambda n: (_ for _ in ()).throw(ValueError("too long")))


def test_an_impl_is_checked_with_the_kind_before_anything_is_printed_or_written(tmp_path, capsys):
    config = write_config(tmp_path / "c.yaml", tiny_config("lm", {"corpus": "sotu-subset"}))
    code, out, err = run_cli(["train", "--config", str(config), "--set", "model.attention_options.impl=bogus",
                              "--print-config"], capsys)
    assert code == 2 and out == "" and "impl must be one of auto, reference" in err and err.count("\n") == 1
    for extra in (["--print-config"], ["--out", str(tmp_path / "run")]):
        code, out, err = run_cli(["train", "--config", str(config), "--attention", "vanilla", "--set",
                                  "model.attention_options.impl=wide_qk", *extra], capsys)
        assert code == 2 and out == "" and "model.attention_options.impl='wide_qk' does not apply to kind 'vanilla'" in err
    assert not (tmp_path / "run").exists()  # no folder of a run that never trained
    code, out, _ = run_cli(["train", "--config", str(config), "--attention", "dense+vanilla", "--set",
                            "model.attention_options.impl=wide_qk", "--print-config"], capsys)
    assert code == 0 and "impl: wide_qk" in out  # the kind given on the command line is the one checked


def test_a_truncated_experiment_json_is_named(runs, tmp_path, capsys):
    import shutil

    run = tmp_path / "lm"
    shutil.copytree(runs["lm"], run, symlinks=True)
    (run / "experiment.json").write_text((run / "experiment.json").read_text()[:40])
    code, _, err = run_cli(["evaluate", "--run", str(run)], capsys)
    assert code == 2 and err.startswith(f"error: {run / 'experiment.json'}: not valid JSON") and err.count("\n") == 1
