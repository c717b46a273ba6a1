"""`synthesizer compare --plan`: one `synthesizer train` line per run still to train, each training exactly
the run the local pool would; after they ran, the same `compare` writes the report without training again."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import synthesizer
from synthesizer.cli import _parser as train_parser
from synthesizer.cli import main as cli_main
from synthesizer.comparison.command import plan_commands, train_command
from synthesizer.comparison.plan import build_comparison, from_pretrained, plan_runs, run_config
from synthesizer.comparison.study import Options, resolve
from synthesizer.runs.results import Results
from synthesizer.runs.files import RESULT_FILE
from synthesizer.tasks.config import ExperimentConfig


def trained_by(line: str) -> tuple[ExperimentConfig, object]:
    """The config a plan line trains, built as `synthesizer train` builds it, and its parsed options."""
    words = shlex.split(line)
    assert words[:2] == ["synthesizer", "train"]
    args = train_parser().parse_args(words[1:])
    return ExperimentConfig.from_file(args.config, args.overrides).with_attention(args.attention), args


def the_pools_runs(options: Options) -> list:
    comparison = build_comparison(resolve(options), ExperimentConfig.from_file, lambda line: None)
    return plan_runs(comparison, Results.empty()).runs


def test_each_line_trains_the_config_the_pool_would_into_its_folder(tmp_path):
    # a user's own seed loses to the comparison's, as in the pool; a value with a space survives the shell
    options = Options("lm", kinds=["vanilla", "random+vanilla"], baselines=[], seeds=2, out=tmp_path / "cmp", steps=7,
                      overrides=("seed=5", "model.d_ff=96", "data.name=my data"), threads=1)
    said = []
    lines = plan_commands(resolve(options), log=said.append)
    runs = the_pools_runs(options)
    assert len(lines) == len(runs) == 4
    for line, run in zip(lines, runs):
        cfg, args = trained_by(line)
        assert cfg == run_config(run) and cfg.seed == run.seed and cfg.model["d_ff"] == 96
        assert Path(args.out) == run.folder and args.resume and args.quiet and args.threads == 1
    assert "4 run(s) to train" in said[-1] and "compare run with the same options writes the report" in said[-1]
    assert not (tmp_path / "cmp").exists()  # planning writes nothing


def test_finished_runs_drop_out_and_one_with_another_config_is_refused(tmp_path):
    options = Options("lm", kinds=["vanilla", "random"], baselines=[], out=tmp_path, steps=7)
    first, _ = the_pools_runs(options)
    first.folder.mkdir(parents=True)
    (first.folder / RESULT_FILE).write_text(json.dumps({"config": run_config(first).to_dict()}))
    (line,) = plan_commands(resolve(options), log=lambda line: None)
    assert "--attention random" in line
    with pytest.raises(ValueError, match=r"seed0 finished with train\.eval_every=1, but this comparison trains train\.eval_every=2"):
        plan_commands(resolve(Options("lm", kinds=["vanilla"], baselines=[], out=tmp_path, steps=8)), log=lambda line: None)


def test_a_pretrained_preset_plans_its_pretraining_first_then_fine_tuning_from_those_folders(tmp_path):
    options = Options("glue", kinds=["vanilla", "random"], baselines=[], out=tmp_path)
    said = []
    lines = plan_commands(resolve(options), log=said.append)
    assert len(lines) == 2 and all("/runs/pretrain-" in trained_by(line)[1].out for line in lines)
    assert re.search(r"2 pretraining run\(s\) to train first; .* the same compare plan gives the \d+ fine-tuning run", said[-1])
    for line in lines:  # as if a scheduler ran them
        folder = Path(trained_by(line)[1].out)
        folder.mkdir(parents=True)
        (folder / RESULT_FILE).write_text("{}")
    fine_tuning = plan_commands(resolve(options), log=said.append)
    runs = the_pools_runs(options)
    assert len(fine_tuning) == len(runs) > 2
    pretrain = build_comparison(resolve(options), ExperimentConfig.from_file, lambda line: None).pretrain
    for line, run in zip(fine_tuning, runs):
        cfg, _ = trained_by(line)
        pretraining = pretrain.run(tmp_path, run.kind, run.seed).folder
        assert cfg.init_from == str(pretraining.resolve())
        assert cfg == run_config(from_pretrained(run, pretraining))


def test_a_line_needs_a_config_built_from_a_config_name(tmp_path):
    run = the_pools_runs(Options("lm", kinds=["vanilla"], baselines=[], out=tmp_path))[0]
    with pytest.raises(ValueError, match="no command trains it"):
        train_command(type(run)(run.task, run.data, run.kind, run.seed, run.config, run.folder))


def test_render_takes_no_option_of_the_plan(capsys):
    with pytest.raises(SystemExit):
        cli_main(["compare", "render", "x", "--threads", "1"])
    assert "unrecognized arguments: --threads 1" in capsys.readouterr().err


# The tiny demo: 2 tasks x 2 kinds, a few steps of a 16-wide model, one thread.
TINY = ["--preset", "demo", "--kinds", "vanilla", "random", "--baselines", "", "--set", "train.max_steps=2",
        "--set", "train.eval_every=1", "--set", "data.limit=32", "--set", "model.d_model=16", "--set", "model.d_ff=32",
        "--threads", "1"]
TIMING = re.compile(r"^- (command|machine|wall time|finished|speeds)")  # the header's lines of when and how


def same_report(folder: Path) -> tuple[str, dict]:
    """The report without its timings (the header's when and how, every number masked: speeds and times differ)
    and every run's numbers."""
    md = "\n".join(re.sub(r"[0-9][0-9.,]*", "#", line) for line in (folder / "report.md").read_text().splitlines()
                   if not TIMING.match(line))
    results = Results.load(folder)
    numbers = {(r["task"], r["data"], r["attention"], r["seed"]): (r["test_metrics"], r["valid_metrics"], r["curve"],
                                                                   r["params"], r["run_dir"])
               for r in results.runs}
    return md, {"runs": numbers, "attention": results.attention}


def test_the_plan_run_by_a_shell_then_compare_gives_the_report_of_the_local_pool(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli_main(["compare", "plan", *TINY, "--out", "planned"]) == 0
    plan = tmp_path / "plan.txt"
    plan.write_text(capsys.readouterr().out)
    assert len(plan.read_text().splitlines()) == 4
    shim = tmp_path / "bin" / "synthesizer"  # `synthesizer` as installed, from this source tree
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m synthesizer "$@"\n')
    shim.chmod(0o755)
    src = str(Path(synthesizer.__file__).resolve().parents[1])
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    shell = subprocess.run(["sh", "-e", str(plan)], capture_output=True, text=True, timeout=300, env=env)
    assert shell.returncode == 0, shell.stderr
    assert cli_main(["compare", "run", *TINY, "--out", "planned"]) == 0
    assert "(done earlier)" in capsys.readouterr().out  # read back, not trained again
    assert cli_main(["compare", "run", *TINY, "--out", "pooled", "--jobs", "2"]) == 0
    capsys.readouterr()
    assert same_report(tmp_path / "planned") == same_report(tmp_path / "pooled")
    assert cli_main(["compare", "plan", *TINY, "--out", "planned"]) == 0
    assert capsys.readouterr().out == ""  # nothing left to train
