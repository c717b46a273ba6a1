"""`synthesizer compare` with a fake experiment runner: run folders, skip/resume, failures, report files, --render."""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from synthesizer.models.config import ModelConfig
from synthesizer.models.lm import LanguageModel
from synthesizer.report import plots as plots_mod
from synthesizer.comparison import run_comparison
from synthesizer.comparison.main import main
from synthesizer.comparison.pace import Pace
from synthesizer.comparison.presets import PRESETS, SIZES, Preset, PresetTask, task_overrides
from synthesizer.runs.code import code_provenance
from synthesizer.runs.results import Results
from synthesizer.runs.files import window_speed
from synthesizer.tasks.config import ExperimentConfig

BASE = {"task": "lm", "data": {"corpus": "sotu"}, "model": {"d_model": 16, "n_heads": 2, "n_layers": 1, "max_len": 16},
        "train": {"max_steps": 5}, "tokenizer": {"vocab_size": 300}, "batch": {"block_size": 16}}


def config_fn(name, overrides):
    # the preset's quick overrides must all be valid config keys; the tiny base keeps the model small
    ExperimentConfig.from_file(name, overrides)
    return ExperimentConfig.from_dict(BASE, [o for o in overrides if o.startswith("train.max_steps")])


class FakeRunner:
    """Writes result.json like run_experiment; perplexity depends on the kind so the table has content."""

    def __init__(self, fail=(), stop=(), die=(), warn=False):
        self.calls, self.fail, self.stop, self.die, self.warn = [], set(fail), set(stop), set(die), warn

    def __call__(self, cfg, out_dir, resume=False, progress=True):
        kind = cfg.attention
        self.calls.append((kind, cfg.seed, resume, cfg.train["max_steps"]))
        out_dir.mkdir(parents=True, exist_ok=True)
        if self.warn:  # as a task warns about its data (the same in every run) and a run about itself
            warnings.warn("sotu train: 3 sequences were truncated to the length limit", stacklevel=2)
            warnings.warn("sotu train: 3 sequences were truncated to the length limit", stacklevel=2)
            warnings.warn(f"{out_dir.name} of {kind}: something of this run alone", stacklevel=2)
        if kind in self.fail:
            raise RuntimeError(f"boom in {kind}")
        if kind in self.die:  # as the kernel's out-of-memory killer ends a process: no word, no exception
            os.kill(os.getpid(), signal.SIGKILL)
        if kind in self.stop:
            (out_dir / "last").mkdir()
            return {"stopped": "SIGINT", "steps": 2, "checkpoint": str(out_dir / "last")}
        ppl = {"vanilla": 100.0, "random": 104.0, "random+vanilla": 98.0, "none": 110.0}.get(kind, 120.0) + cfg.seed
        (out_dir / "log.jsonl").write_text("\n".join(json.dumps({"kind": "train", "step": s, "tokens_per_s": t})
                                                     for s, t in ((1, 900.0), (2, 1000.0), (3, 100.0))))
        result = {"task": cfg.task, "data": cfg.data["corpus"], "attention": kind, "seed": cfg.seed,
                  "config": cfg.to_dict(), "test_metrics": {"perplexity": ppl}, "valid_metrics": {"perplexity": ppl},
                  "baselines": {"unigram_perplexity": 500.0}, "primary_metric": "perplexity",
                  "higher_is_better": False,
                  # flattened: 0.2% over the last quarter of the 5 steps (from the eval at step 3)
                  "curve": [{"step": 1, "train_loss": 5.0, "valid_loss": 4.8}, {"step": 3, "train_loss": 4.0, "valid_loss": 4.6},
                            {"step": 5, "train_loss": 3.9, "valid_loss": 4.59}],
                  "mixture_weights": ([{"step": 1, "layers": [[0.5, 0.5]]}, {"step": 2, "layers": [[0.4, 0.6]]}]
                                      if "+" in kind else []),
                  "components": kind.split("+"), "params": {"total": 5000, "attention_logits": 500},
                  "train_time_s": 10.0, "train_tokens_per_s": 700.0, "steps": 5, "diverged": False}
        (out_dir / "result.json").write_text(json.dumps(result))
        return result


def set_valid_loss(result: dict, loss: float) -> None:
    """A fake run's validation loss, as a run that keeps the checkpoint of its lowest one reports it: in
    valid_metrics and as the lowest point of its curve (what every "lowest validation loss" choice reads)."""
    result.setdefault("valid_metrics", {})["loss"] = loss
    result["curve"] = [{**point, "valid_loss": loss + 0.01 * (len(result["curve"]) - i)}
                       for i, point in enumerate(result["curve"], 1)]


class Tok:
    def encode(self, text):
        return [(ord(c) % 50) + 3 for c in text]


def load_fn(run_dir):
    kind = json.loads((run_dir / "result.json").read_text())["attention"]
    model = LanguageModel(ModelConfig(vocab_size=64, d_model=16, n_heads=2, n_layers=2, max_len=16, attention=kind))
    return model.eval(), Tok(), None


def run(tmp_path, runner, **kw):
    lines = []
    kw.setdefault("kinds", ["vanilla", "random", "random+vanilla"])
    kw.setdefault("baselines", [])  # only the kinds given (the presets' own baselines: tested on their own)
    results = run_comparison("lm", "quick", out=tmp_path, run_fn=runner, config_fn=config_fn, load_fn=load_fn,
                      log=lines.append, **kw)
    return results, lines


def test_compare_runs_every_kind_and_writes_the_report(tmp_path):
    runner = FakeRunner()
    results, lines = run(tmp_path, runner, seeds=2, steps=7)
    assert sorted(runner.calls) == sorted((k, s, False, 7) for k in ("vanilla", "random", "random+vanilla") for s in (0, 1))
    assert runner.calls[0][1] == 0 and runner.calls[3][1] == 1  # all kinds of seed 0 come first
    for kind in ("vanilla", "random", "random+vanilla"):
        assert (tmp_path / "runs" / "lm-sotu" / kind / "seed1" / "result.json").exists()
    assert any(re.match(r"\[1/6\] lm-sotu vanilla seed0: test perplexity 100", line) for line in lines)
    assert re.search(r"^random\+vanilla +98.50 ± 0.71", "\n".join(lines), re.M)  # the final table
    saved = Results.load(tmp_path)
    assert len(saved.runs) == 6 and saved.presets == ["lm"]
    assert saved.runs[0]["train_tokens_per_s_median"] == 900.0  # median of the log windows
    maps = saved.attention["lm-sotu"]
    assert [m["source"] for m in maps["random"]][0].startswith("softmax(R)")
    assert maps["vanilla"][0]["source"] == "sample input" and len(maps["vanilla"]) == 2
    md = (tmp_path / "report.md").read_text()
    assert "| random+vanilla | 98.50 ± 0.71 | -2.0% |" in md
    assert "## The paper's claims" in md and "Claim 7:" in md
    for png in ("lm-sotu-curves.png", "lm-sotu-speed.png", "lm-sotu-mixtures.png", "lm-sotu-attention-random.png"):
        assert (tmp_path / png).stat().st_size > 1000 and f"]({png})" in md
    page = (tmp_path / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == md.count("![")
    assert not re.search(r'src="(?!data:)', page)  # self-contained


def test_finished_runs_are_skipped_and_partial_ones_resumed(tmp_path, monkeypatch):
    monkeypatch.setattr("synthesizer.report.summary.build_report", lambda results, folder, analysis=None: (folder, folder))
    first, lines = FakeRunner(stop={"random"}), []
    with pytest.raises(KeyboardInterrupt):  # a run stopped by a signal stops the comparison: the command exits 130
        run_comparison("lm", "quick", out=tmp_path, run_fn=first, config_fn=config_fn, load_fn=load_fn,
                       log=lines.append, kinds=["vanilla", "random", "random+vanilla"], baselines=[], heatmaps=False)
    assert [c[0] for c in first.calls] == ["vanilla", "random"]  # stopped at the interrupted run
    assert any("interrupted" in line for line in lines) and not any("report:" in line for line in lines)
    assert [r["attention"] for r in Results.load(tmp_path).runs] == ["vanilla"]  # what finished is saved
    second = FakeRunner()
    results, _ = run(tmp_path, second, heatmaps=False)
    assert [(c[0], c[2]) for c in second.calls] == [("random", True), ("random+vanilla", False)]
    assert len(results.runs) == 3 and len(results.sessions) == 2
    third = FakeRunner()
    run(tmp_path, third, heatmaps=False)
    assert third.calls == []  # everything finished: nothing retrained


def test_a_run_read_back_from_its_folder_keeps_the_load_measured_as_it_finished(tmp_path, monkeypatch):
    monkeypatch.setattr("synthesizer.report.summary.build_report", lambda results, folder, analysis=None: (folder, folder))
    run(tmp_path, FakeRunner(), heatmaps=False)
    loads = {r["attention"]: r["load_average_1min"] for r in Results.load(tmp_path).runs}
    assert len(loads) == 3 and all(isinstance(v, float) for v in loads.values())
    again = FakeRunner()
    run(tmp_path, again, heatmaps=False)  # every folder still there: each run is read back, none trained
    assert again.calls == []
    assert {r["attention"]: r.get("load_average_1min") for r in Results.load(tmp_path).runs} == loads


def test_a_comparison_resumes_from_its_results_json_alone(tmp_path, monkeypatch):
    # as on another machine: the run folders (checkpoints) are gone, the committed results.json is not
    monkeypatch.setattr("synthesizer.report.summary.build_report", lambda results, folder, analysis=None: (folder, folder))
    with pytest.raises(KeyboardInterrupt):  # interrupted before the end-of-comparison maps
        run(tmp_path, FakeRunner(stop={"random+vanilla"}))
    saved = Results.load(tmp_path)
    assert set(saved.attention["lm-sotu"]) == {"vanilla", "random"}  # taken as each run finished
    shutil.rmtree(tmp_path / "runs")
    runner = FakeRunner()
    results, lines = run(tmp_path, runner, seeds=2)
    assert sorted(runner.calls) == sorted([("random+vanilla", 0, False, 200)]
                                          + [(k, 1, False, 200) for k in ("vanilla", "random", "random+vanilla")])
    assert any("2 finished run(s) recorded in" in line and "kept, not retrained" in line for line in lines)
    assert len(results.runs) == 6 and not any("error" in r for r in results.runs)
    assert {k: len(v) for k, v in results.attention["lm-sotu"].items()} == {
        "vanilla": 2, "random": 2, "random+vanilla": 2}  # each kind's from its seed-0 run


def test_a_finished_run_with_another_config_is_refused_not_mixed_in(tmp_path, monkeypatch):
    monkeypatch.setattr("synthesizer.report.summary.build_report", lambda results, folder, analysis=None: (folder, folder))
    run(tmp_path, FakeRunner(), heatmaps=False, steps=5)
    with pytest.raises(ValueError, match=r"runs/lm-sotu/vanilla/seed0 finished with train.max_steps=5, but this "
                                         r"comparison trains train.max_steps=7; give the comparison a new --out"):
        run(tmp_path, FakeRunner(), heatmaps=False, steps=7)
    shutil.rmtree(tmp_path / "runs")  # the same from the results.json record alone
    with pytest.raises(ValueError, match="finished with train.max_steps=5"):
        run(tmp_path, FakeRunner(), heatmaps=False, steps=7)
    runner = FakeRunner()
    run(tmp_path, runner, heatmaps=False, steps=5)
    assert runner.calls == []  # the same options as before: every run kept


def test_finished_runs_of_an_older_synthesizer_are_refused_not_mixed_in(tmp_path, monkeypatch):
    from safetensors.torch import load_file, save_file
    from torch import nn

    from synthesizer.training import save_checkpoint

    monkeypatch.setattr("synthesizer.report.summary.build_report", lambda results, folder, analysis=None: (folder, folder))
    run(tmp_path, FakeRunner(), heatmaps=False)
    run_dir = tmp_path / "runs/lm-sotu/random/seed0"
    file = save_checkpoint(run_dir, nn.Linear(2, 2), step=5, best=True) / "model.safetensors"
    run(tmp_path, FakeRunner(), heatmaps=False)  # this synthesizer's checkpoint: read back
    save_file(load_file(str(file)), str(file), metadata={"step": "5"})  # as 0.1.0 wrote it
    with pytest.raises(ValueError, match=f"{run_dir} was trained by an older synthesizer .*give the comparison a new --out"):
        run(tmp_path, FakeRunner(), heatmaps=False)


def test_parallel_jobs_train_every_run_once_and_match_one_job(tmp_path, monkeypatch):
    monkeypatch.setattr("synthesizer.report.summary.build_report", lambda results, folder, analysis=None: (folder, folder))
    serial, _ = run(tmp_path / "serial", FakeRunner(), seeds=2, heatmaps=False)
    finished = "runs/lm-sotu/random/seed1"  # finished before: only read back
    shutil.copytree(tmp_path / "serial" / finished, tmp_path / "parallel" / finished)
    parallel, lines = run(tmp_path / "parallel", FakeRunner(), seeds=2, heatmaps=False, jobs=2, threads=1)
    key = lambda r: (r["attention"], r["seed"])
    drop = ("load_average_1min", "run_dir")
    assert sorted(({k: v for k, v in r.items() if k not in drop} for r in parallel.runs), key=key) == \
        sorted(({k: v for k, v in r.items() if k not in drop} for r in serial.runs), key=key)
    assert sorted(re.match(r"\[(\d)/6\]", line).group(1) for line in lines if line.startswith("[")) == list("123456")
    assert any("random seed1: " in line and "(done earlier)" in line for line in lines)
    assert parallel.machine["parallel_runs"] == 2 and parallel.machine["torch_threads"] == 1
    with pytest.raises(ValueError, match="--jobs must be a positive integer"):
        run(tmp_path / "bad", FakeRunner(), jobs=0)


def test_a_run_whose_process_dies_is_a_failed_record_and_the_others_go_on(tmp_path, monkeypatch):
    monkeypatch.setattr("synthesizer.report.summary.build_report", lambda results, folder, analysis=None: (folder, folder))
    results, lines = run(tmp_path, FakeRunner(die={"random"}), heatmaps=False, jobs=2, threads=1)
    assert [r["attention"] for r in results.runs if "error" in r] == ["random"] and len(results.runs) == 3
    assert any("random seed0: FAILED: the process training it died (killed by SIGKILL)" in line for line in lines)


class SlowRunner:
    """Trains a toy model slowly in ``out_dir`` (the real Trainer, so signals stop it as they stop a run)."""

    def __call__(self, cfg, out_dir, resume=False, progress=True):
        sys.path.insert(0, str(ROOT))
        from tests.training.test_toy import make_trainer, step_fn

        def slow(model, batch):
            time.sleep(0.05)
            return step_fn(model, batch)

        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "pid").write_text(str(os.getpid()))
        result = make_trainer(out_dir, max_steps=5000, step=slow).train(resume=resume)
        return {"stopped": result.stopped, "steps": result.step}


ROOT = Path(__file__).resolve().parents[2]  # on sys.path, subprocesses import the tests package
SIGTERM_COMPARE = """
import sys
sys.path.insert(0, {root!r})
from tests.comparison.test_compare import SlowRunner, config_fn, load_fn
from synthesizer.comparison import run_comparison
try:
    run_comparison("lm", "quick", out={out!r}, run_fn=SlowRunner(), config_fn=config_fn, load_fn=load_fn,
                   kinds=["vanilla", "random", "dense"], baselines=[], jobs=2, threads=1, heatmaps=False, log=print)
except KeyboardInterrupt as e:
    print("parent stopped:", e)
"""


def test_sigterm_to_a_parallel_comparison_stops_and_checkpoints_its_runs_leaving_no_process(tmp_path):
    out = tmp_path / "cmp"
    proc = subprocess.Popen([sys.executable, "-c", SIGTERM_COMPARE.format(root=str(ROOT), out=str(out))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = [out / "runs/lm-sotu/vanilla/seed0", out / "runs/lm-sotu/random/seed0"]
    deadline = time.time() + 120
    while not all((d / "log.jsonl").is_file() and len((d / "log.jsonl").read_text().splitlines()) >= 2 for d in started):
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read() if proc.poll() is not None else "timeout"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert "parent stopped: stopped by SIGTERM" in stdout and "run the same command again" in stdout
    for run_dir in started:
        assert (run_dir / "last").exists(), f"{run_dir} was not checkpointed"
        with pytest.raises(ProcessLookupError):  # no child left training
            os.kill(int((run_dir / "pid").read_text()), 0)
    assert not (out / "runs/lm-sotu/dense").exists()  # not started after the signal


# The comparison as a terminal starts it: Ctrl-C handled. A process started in the background by a
# non-interactive shell (`cmd &`, as a CI script may run the suite) inherits SIGINT ignored, and Python
# then leaves it ignored: the child would never see the Ctrl-C this test sends.
CTRL_C_COMPARE = """
import functools, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {root!r})
from tests.comparison.test_compare import SlowRunner, config_fn, load_fn
import synthesizer.comparison.main as compare
compare.run_study = functools.partial(compare.run_study, run_fn=SlowRunner(), config_fn=config_fn, load_fn=load_fn)
from synthesizer.cli import main
sys.exit(main(["compare", "run", "--preset", "lm", "--kinds", "vanilla", "random", "dense", "--baselines", "", "--jobs", "2",
               "--threads", "1", "--no-heatmaps", "--out", {out!r}]))
"""


def test_ctrl_c_on_a_parallel_comparison_is_one_line_and_exit_code_130(tmp_path):
    """Ctrl-C reaches every process of the terminal's group: the comparison and its runs' processes.
    The runs checkpoint, the comparison says how to resume, and no process prints a traceback."""
    out = tmp_path / "cmp"
    proc = subprocess.Popen([sys.executable, "-c", CTRL_C_COMPARE.format(root=str(ROOT), out=str(out))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    started = [out / "runs/lm-sotu/vanilla/seed0", out / "runs/lm-sotu/random/seed0"]
    deadline = time.time() + 120
    while not all((d / "log.jsonl").is_file() and len((d / "log.jsonl").read_text().splitlines()) >= 2 for d in started):
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read() if proc.poll() is not None else "timeout"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C does
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, f"stdout:\n{stdout}\nstderr:\n{stderr}"
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert stderr.splitlines()[-1] == "synthesizer compare: interrupted"
    assert "run the same command again" in stdout
    for run_dir in started:
        assert (run_dir / "last").exists(), f"{run_dir} was not checkpointed"


def test_a_data_name_that_is_not_one_folder_name_is_refused_before_anything_is_written(tmp_path, capsys):
    from synthesizer.cli import main as cli_main

    for name in ("x/../../../../escape", "..", "/abs"):
        with pytest.raises(SystemExit) as stop:
            cli_main(["compare", "run", "--preset", "lm", "--kinds", "vanilla", "--baselines", "", "--no-heatmaps",
                      "--set", f"data={{corpus: sotu-subset, name: '{name}'}}", "--out", str(tmp_path / "nest" / "cmp")])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and f"data.name {name!r} cannot name a folder" in err and err.count("\n") == 1, err
    assert not (tmp_path / "escape").exists() and not (tmp_path / "nest").exists()


def test_every_name_joined_into_a_run_folder_is_one_folder_name():
    from synthesizer.errors import path_component

    for bad in ("", " ", ".", "..", "a/b", "../x", "/etc", "a\0b"):
        with pytest.raises(ValueError, match=r"^attention kind .* cannot name a folder"):
            path_component("attention kind", bad)
    assert path_component("attention kind", "random+vanilla") == "random+vanilla"


def no_plots(monkeypatch):
    """Skip drawing (the slow part) where a test only reads the tables."""
    monkeypatch.setattr("synthesizer.report.plots._save", lambda fig, path: plots_mod.plt.close(fig))


def test_a_failing_variant_is_reported_and_the_rest_continues(tmp_path, monkeypatch):
    no_plots(monkeypatch)
    runner = FakeRunner(fail={"random"})
    results, lines = run(tmp_path, runner, heatmaps=False)
    assert [c[0] for c in runner.calls] == ["vanilla", "random", "random+vanilla"]
    assert any("random seed0: FAILED: RuntimeError: boom in random" in line for line in lines)
    md = (tmp_path / "report.md").read_text()
    assert "| random | n/a |" in md and "boom in random" in md


def test_render_merges_two_comparisons(tmp_path, monkeypatch):
    no_plots(monkeypatch)
    with monkeypatch.context() as m:
        m.setattr("synthesizer.report.summary.build_report", lambda results, folder, analysis=None: (folder, folder))
        run(tmp_path / "a", FakeRunner(), kinds=["vanilla", "random"])
        run(tmp_path / "b", FakeRunner(), kinds=["random+vanilla"])
    main(["render", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "merged")])
    merged = Results.load(tmp_path / "merged")
    assert sorted(r["attention"] for r in merged.runs) == ["random", "random+vanilla", "vanilla"]
    assert set(merged.attention["lm-sotu"]) == {"vanilla", "random", "random+vanilla"}
    assert len(merged.sessions) == 2
    assert "| random+vanilla | 98.00 | -2.0% |" in (tmp_path / "merged" / "report.md").read_text()


def test_bad_arguments_name_the_allowed_values(tmp_path):
    with pytest.raises(ValueError, match="unknown preset 'nope'; allowed: lm, mt"):
        run_comparison("nope", run_fn=FakeRunner(), config_fn=config_fn, load_fn=load_fn)
    with pytest.raises(ValueError, match="unknown attention kind 'rnd'"):
        run(tmp_path, FakeRunner(), kinds=["rnd"])
    with pytest.raises(ValueError, match="--seeds must be a positive integer"):
        run(tmp_path, FakeRunner(), seeds=0)
    with pytest.raises(ValueError, match="not a comparison results file|no such file"):
        main(["render", str(tmp_path / "missing")])


def test_every_preset_builds_valid_configs():
    for preset in PRESETS.values():
        for task in preset.tasks:
            for size in task.sizes:
                cfg = ExperimentConfig.from_file(task.config, task_overrides(task, size))
                assert cfg.train["max_steps"] >= 1
                assert cfg.train.get("max_minutes") is None  # equal step budgets for every variant


def test_the_time_left_follows_the_pace_of_the_runs_trained_here(monkeypatch):
    clock = iter([100.0, 100.0, 130.0, 160.0, 190.0])  # Pace(): 100; a read-back restarts at 100; then 130, ...
    monkeypatch.setattr("synthesizer.comparison.pace.time.perf_counter", lambda: next(clock))
    pace = Pace(5)
    assert pace.after(1, 0.0) == ""  # read back from an earlier invocation: no pace, the clock starts now
    assert pace.after(2, 30.0) == "; about 1.5 min to go for 3 more runs"  # 30 s a run so far
    assert pace.after(3, 55.0) == "; about 1.0 min to go for 2 more runs"
    assert pace.after(4, 30.0) == "; about 30 s to go for 1 more run"
    assert pace.after(5, 30.0) == ""  # nothing left


def test_a_run_read_back_between_trained_ones_does_not_reset_the_pace(monkeypatch):
    clock = iter([0.0, 40.0, 41.0, 81.0])  # one job: trained, read back, trained, each trained run 40 s
    monkeypatch.setattr("synthesizer.comparison.pace.time.perf_counter", lambda: next(clock))
    pace = Pace(4)
    assert pace.after(1, 40.0) == "; about 2.0 min to go for 3 more runs"
    assert pace.after(2, 0.0) == "; about 1.3 min to go for 2 more runs"  # 80 s
    assert pace.after(3, 40.0) == "; about 40 s to go for 1 more run"


def test_window_speed_is_the_median(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text('{"kind": "train", "tokens_per_s": 10}\n{"kind": "eval", "loss": 1}\nnot json\n'
                   '{"kind": "train", "tokens_per_s": 30}\n{"kind": "train", "tokens_per_s": 20}\n')
    assert window_speed(log) == 20
    assert window_speed(tmp_path / "none.jsonl") is None


def test_own_data_replaces_the_preset_corpus(tmp_path, monkeypatch):
    # `--set 'data={...}'` swaps the whole data section: the quick size's limit goes with the corpus
    monkeypatch.setattr("synthesizer.report.summary.build_report", lambda results, folder, analysis=None: (folder, folder))
    seen = []

    def runner(cfg, out_dir, resume=False, progress=True):
        seen.append(cfg.data)
        return FakeRunner()(dataclasses.replace(cfg, data={"corpus": "sotu"}), out_dir, resume, progress)

    own = "data={train: my/train.txt, valid: my/valid.txt, test: my/test.txt, name: mine}"
    run_comparison("lm", "quick", kinds=["vanilla"], baselines=[], out=tmp_path, overrides=[own],
                   heatmaps=False, run_fn=runner, load_fn=load_fn, log=lambda line: None)
    assert seen == [{"train": "my/train.txt", "valid": "my/valid.txt", "test": "my/test.txt", "name": "mine"}]
    assert (tmp_path / "runs" / "lm-mine" / "vanilla" / "seed0" / "result.json").exists()
    seen.clear()  # mt has two corpora; given one data section it trains it once
    run_comparison("mt", "quick", kinds=["vanilla"], baselines=[], out=tmp_path / "mt", overrides=[own],
                   heatmaps=False, run_fn=runner, load_fn=load_fn, log=lambda line: None)
    assert len(seen) == 1


def test_quick_lm_preset_reads_the_shipped_subset_whatever_else_exists(tmp_path, monkeypatch):
    from synthesizer.data import sources
    from synthesizer.tasks.data import load_data

    other = tmp_path / "shared" / "data" / "lm" / "sotu"  # a different copy, as ../shared/data or $SYNTHESIZER_DATA
    other.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (other / f"{split}.txt").write_text(f"= 1790 Someone =\nanother copy, {split}\n", encoding="utf-8")
    monkeypatch.setenv("SYNTHESIZER_DATA", str(tmp_path / "shared" / "data"))
    monkeypatch.setattr(sources, "_REPO_ROOT", tmp_path / "repo")
    (task,) = PRESETS["lm"].tasks
    corpus = load_data(ExperimentConfig.from_file(task.config, task_overrides(task, "quick")))
    shipped = sources.read_documents(sources.PACKAGE_CORPORA / "lm" / "sotu" / "train.txt")
    assert corpus["train"][0] == shipped[0] and len(corpus["train"]) == len(shipped) == 84
    assert "packaged subset" in corpus.origin
    full = load_data(ExperimentConfig.from_file(task.config, task_overrides(task, "full")))
    assert full["train"] == ["another copy, train"]  # the full size keeps `sotu`, whichever copy is found first


def test_each_run_record_carries_its_data_provenance(tmp_path):
    from synthesizer.tasks.experiment import run_experiment

    # the packaged subset: there with or without the shared data beside the checkout
    base = ExperimentConfig.from_dict({**BASE, "data": {"corpus": "sotu-subset"}}, ["data.limit=20", "train.max_steps=1"])
    results = run_comparison("lm", "quick", kinds=["vanilla"], baselines=[], out=tmp_path, heatmaps=False,
                             run_fn=run_experiment, config_fn=lambda name, overrides: base, load_fn=load_fn,
                             log=lambda line: None)
    (record,) = Results.load(tmp_path).runs
    assert record == next(r for r in results.runs)
    prov = record["provenance"]
    assert prov["data"]["name"] == "sotu-subset" and prov["data"]["origin"]
    assert prov["code"] == code_provenance()  # the code it was trained with
    assert set(prov["data"]["splits"]) == {"train", "valid", "test"} and len(prov["tokenizer"]["sha256"]) == 64
    assert prov == json.loads((tmp_path / record["run_dir"] / "data.json").read_text())


def test_a_second_compare_on_the_same_folder_is_refused(tmp_path):
    from tests.runs.test_lock import hold_in_another_process

    proc = hold_in_another_process(tmp_path)
    runner = FakeRunner()
    try:
        with pytest.raises(ValueError, match=rf"comparison folder {tmp_path} is in use by another process"):
            run(tmp_path, runner, kinds=["vanilla"])
    finally:
        proc.kill()
        proc.wait()
    assert runner.calls == [] and not (tmp_path / "runs").exists()


def test_a_report_on_own_data_is_headed_with_its_name_not_the_presets(tmp_path):
    def runner(cfg, out_dir, resume=False, progress=True):  # trains "mine" (the record names it)
        return FakeRunner()(dataclasses.replace(cfg, data={"corpus": "mine"}), out_dir, resume, progress)

    own = "data={train: my/train.txt, valid: my/valid.txt, test: my/test.txt, name: mine}"
    lines = []
    results = run_comparison("lm", "quick", kinds=["vanilla", "random"], baselines=[], out=tmp_path, overrides=[own],
                             heatmaps=False, run_fn=runner, load_fn=load_fn, log=lines.append)
    assert results.labels == {}
    md = (tmp_path / "report.md").read_text()
    assert "## language modelling (mine) — `lm-mine`" in md and "SOTU" not in md
    assert "language modelling (mine) [lm-mine]" in lines
    # the preset's own data keeps the preset's label
    run(tmp_path / "preset", FakeRunner(), heatmaps=False)
    assert "## language modelling (State of the Union) — `lm-sotu`" in (tmp_path / "preset" / "report.md").read_text()


def test_the_closing_summary_gives_each_verdict_with_its_reason(tmp_path):
    _, lines = run(tmp_path, FakeRunner(), seeds=1)
    claims = [line for line in lines if line.startswith("claim ")]
    assert [line.split(":")[0] for line in claims] == [f"claim {n}" for n in range(1, 8)]
    for line in claims:
        verdict, reason = re.match(r"claim \d: (supports|contradicts|cannot tell|not run|does not apply): (.+)$",
                                   line).groups()
        assert len(reason) <= 140
    assert claims[1].startswith("claim 2: cannot tell: lm-sotu: random vs vanilla: loss ")
    assert "1 seed: no uncertainty measured" in claims[1]
    assert claims[4] == "claim 5: not run: lm-sotu: dynamicconv not in this run"


# ----------------------------------------------------------------------------- sizes and default baselines

def fake_preset(monkeypatch, *standards):
    tasks = tuple(PresetTask("lm-sotu-small", ("train.max_steps=3",), f"task {i}", standard=st)
                  for i, st in enumerate(standards))
    monkeypatch.setitem(PRESETS, "fake", Preset("fake", "a fake preset", "perplexity", tasks))


def test_the_standard_size_uses_its_overrides(tmp_path, monkeypatch):
    assert SIZES == ("quick", "standard", "full")
    fake_preset(monkeypatch, ("train.max_steps=9", "train.eval_every=3"))
    (task,) = PRESETS["fake"].tasks
    assert task_overrides(task, "standard") == ["train.max_minutes=null", "train.max_steps=9", "train.eval_every=3"]
    assert task.sizes == SIZES
    runner = FakeRunner()
    run_comparison("fake", "standard", kinds=["vanilla"], out=tmp_path, heatmaps=False, run_fn=runner,
                   config_fn=config_fn, load_fn=load_fn, log=lambda line: None)
    assert runner.calls == [("vanilla", 0, False, 9)]


def test_a_task_without_a_standard_size_is_refused_before_any_run(tmp_path, monkeypatch):
    fake_preset(monkeypatch, ("train.max_steps=9",), None)
    runner, built = FakeRunner(), []
    with pytest.raises(ValueError) as err:
        run_comparison("fake", "standard", kinds=["vanilla"], out=tmp_path / "out", run_fn=runner,
                       config_fn=lambda name, overrides: built.append(name), load_fn=load_fn)
    assert str(err.value) == ("preset 'fake', task 'lm-sotu-small' has no standard size yet; "
                              "sizes it has: quick, full")
    assert runner.calls == [] and built == [] and not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="unknown size 'huge'; allowed: quick, standard, full"):
        task_overrides(PRESETS["fake"].tasks[0], "huge")


def test_a_task_left_out_of_the_standard_size_for_a_reason_is_skipped_and_the_report_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr("synthesizer.report.summary.build_report", lambda results, folder, analysis=None: (folder, folder))
    why = "vanilla still learning after 3000 steps"
    tasks = (PresetTask("lm-sotu-small", ("train.max_steps=3",), "kept", standard=("train.max_steps=9",)),
             PresetTask("cls-rotten-small", ("train.max_steps=3",), "left out", not_standard=why))
    monkeypatch.setitem(PRESETS, "fake", Preset("fake", "a fake preset", "perplexity", tasks))
    runner, lines = FakeRunner(), []
    results = run_comparison("fake", "standard", kinds=["vanilla"], out=tmp_path, heatmaps=False, run_fn=runner,
                             config_fn=config_fn, load_fn=load_fn, log=lines.append)
    assert runner.calls == [("vanilla", 0, False, 9)]
    assert f"cls-rotten-small: left out at the standard size ({why})" in lines
    assert results.left_out == {"cls-rotten-small": why} == Results.load(tmp_path).left_out
    from synthesizer.report.document import _header
    assert f"left out at this size: `cls-rotten-small` ({why})" in _header(results)[1][1]
    quick = FakeRunner()
    run_comparison("fake", "quick", kinds=["vanilla"], out=tmp_path / "quick", heatmaps=False, run_fn=quick,
                   config_fn=config_fn, load_fn=load_fn, log=lines.append)
    assert len(quick.calls) == 1  # both tasks at the quick size (the fake config gives them the same data)
    monkeypatch.setitem(PRESETS, "fake", Preset("fake", "a fake preset", "perplexity", tasks[1:]))
    with pytest.raises(ValueError, match=f"preset 'fake' has no task at the standard size: cls-rotten-small: {why}"):
        run_comparison("fake", "standard", kinds=["vanilla"], out=tmp_path / "none", run_fn=FakeRunner(),
                       config_fn=config_fn, load_fn=load_fn)


def test_compare_help_says_what_each_size_is_for(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "{quick,standard,full}" in text
    assert "quick: a demonstration, at most about 5 minutes" in text
    assert "standard: trained until vanilla's validation curve has flattened, 30 minutes to 3 hours per preset for 3 seeds" in text
    assert "full: the shipped CPU configs as they are" in text


def test_every_preset_trains_none_and_flags_kinds_not_better_than_it(tmp_path):
    assert all("none" in preset.baselines for preset in PRESETS.values())
    runner = FakeRunner()
    results = run_comparison("lm", "quick", kinds=["vanilla", "fixed_random"], seeds=3, out=tmp_path, heatmaps=False,
                             run_fn=runner, config_fn=config_fn, load_fn=load_fn, log=lambda line: None)
    assert sorted({c[0] for c in runner.calls}) == ["fixed_random", "none", "vanilla"]  # none: the preset's baseline
    md = (tmp_path / "report.md").read_text()
    assert re.search(r"^\| fixed_random \|.*\| ok; not clearly better than none \(loss \+\d.*\]\) \|$", md, re.M)  # 120 vs 110
    assert re.search(r"^\| vanilla \|.*\| ok \|$", md, re.M)
    assert len(results.runs) == 9


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_warning_about_the_data_is_printed_once_per_comparison_not_once_per_run(tmp_path, monkeypatch, jobs):
    monkeypatch.setattr("synthesizer.report.summary.build_report", lambda results, folder, analysis=None: (folder, folder))
    results, lines = run(tmp_path, FakeRunner(warn=True), seeds=2, heatmaps=False, jobs=jobs, threads=1)
    data = [line for line in lines if "sequences were truncated" in line]
    assert data == ["lm-sotu: UserWarning: sotu train: 3 sequences were truncated to the length limit"]
    own = [line for line in lines if "something of this run alone" in line]
    assert len(own) == 6 and len(set(own)) == 6  # one per run: each names its run
    assert all("_warnings" not in r for r in results.runs)  # nothing of it in results.json
    assert "_warnings" not in (tmp_path / "results.json").read_text()


def test_more_seeds_on_an_existing_folder_train_only_the_new_ones_and_rerender(tmp_path, monkeypatch):
    rendered = []
    monkeypatch.setattr("synthesizer.report.summary.build_report",
                        lambda results, folder, analysis=None: (rendered.append(sorted({r["seed"] for r in results.runs})),
                                                 (folder, folder))[1])
    run(tmp_path, FakeRunner(), seeds=2, heatmaps=False)
    more = FakeRunner()
    results, _ = run(tmp_path, more, seeds=4, heatmaps=False)
    assert sorted((c[0], c[1]) for c in more.calls) == sorted((k, s) for k in ("vanilla", "random", "random+vanilla")
                                                              for s in (2, 3))
    assert len(results.runs) == 12 and rendered == [[0, 1], [0, 1, 2, 3]]


def test_new_seeds_do_not_join_runs_of_other_code_unless_allowed(tmp_path):
    import json

    run(tmp_path, FakeRunner(), seeds=1)
    saved = json.loads((tmp_path / "results.json").read_text())
    for record in saved["runs"]:  # as if another commit had trained them
        record["provenance"] = {"data": {}, "code": {"version": "0.1", "commit": "0" * 40, "modified": False}}
    (tmp_path / "results.json").write_text(json.dumps(saved))
    for name in [p for p in (tmp_path / "runs").rglob("result.json")]:
        name.unlink()  # their folders gone: only results.json holds them
    with pytest.raises(ValueError, match=r"holds runs trained by other code \(0\.1 at 0000000: 3 run\(s\)\)"):
        run(tmp_path, FakeRunner(), seeds=2)
    runner = FakeRunner()
    results, _ = run(tmp_path, runner, seeds=2, allow_other_code=True)
    assert sorted(c[:3] for c in runner.calls) == sorted((k, 1, False) for k in ("vanilla", "random", "random+vanilla"))
    # nothing new to add: the same command reads back and renders, whatever code trained the runs
    run(tmp_path, FakeRunner(), seeds=2)


def test_time_and_render_hold_the_folder_lock_so_no_stale_copy_is_written_back(tmp_path, monkeypatch):
    from synthesizer.runs.lock import comparison_lock
    from synthesizer.runs.lock import FolderBusy

    no_plots(monkeypatch)
    run(tmp_path, FakeRunner(), heatmaps=False)
    before = (tmp_path / "results.json").read_text()
    timed = []
    monkeypatch.setattr("synthesizer.comparison.main.add_timings", lambda results: timed.append(1) or results)
    with comparison_lock(tmp_path):  # as a compare that adds seeds holds it while it trains
        for argv in (["time", str(tmp_path)], ["render", str(tmp_path)]):
            with pytest.raises(FolderBusy, match=f"comparison folder {tmp_path} is in use by another process"):
                main(argv)
    assert timed == [] and (tmp_path / "results.json").read_text() == before
    # a results.json given for its folder: timed and re-rendered there
    assert main(["time", str(tmp_path / "results.json")]) == 0
    assert timed == [1] and Results.load(tmp_path).commands[-1].startswith("synthesizer compare time ")


@pytest.mark.parametrize("argv, refused", [
    (["time", "x", "--plan"], "unrecognized arguments: --plan"),
    (["render", "x", "--kinds", "vanilla", "--seeds", "2"], "unrecognized arguments: --kinds vanilla --seeds 2"),
    (["time", "x", "--out", "y"], "unrecognized arguments: --out y"),
    (["index", "x", "--against", "y"], "unrecognized arguments: --against y"),
    (["plan", "--preset", "lm", "--jobs", "2"], "unrecognized arguments: --jobs 2"),  # the plan trains nothing here
    (["run", "--preset", "lm", "--against", "y"], "unrecognized arguments: --against y"),
    (["run", "--kinds", "vanilla"], "the following arguments are required: --preset"),
    ([], "the following arguments are required: SUBCOMMAND"),
])
def test_each_subcommand_takes_only_its_own_options(argv, refused, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2 and refused in capsys.readouterr().err


def test_time_names_what_to_give_for_a_scale_study_or_a_folder_without_results(tmp_path):
    (tmp_path / "width-16").mkdir()
    (tmp_path / "width-16" / "results.json").write_text('{"format": 1, "runs": []}')
    with pytest.raises(ValueError, match=re.escape(f"time {tmp_path}: a scale study's folder; give one of its "
                                                   f"comparisons, the width folders ({tmp_path / 'width-16'})")):
        main(["time", str(tmp_path)])
    with pytest.raises(ValueError, match=re.escape(f"time {tmp_path / 'width-16' / 'x.txt'}: no results.json")):
        main(["time", str(tmp_path / "width-16" / "x.txt")])


def test_ctrl_c_of_a_one_job_comparison_after_a_run_finished_exits_130_with_what_finished_saved(tmp_path, monkeypatch,
                                                                                               capsys):
    import functools

    import synthesizer.comparison.main as compare
    from synthesizer.cli import main as cli_main

    monkeypatch.setattr(compare, "run_study", functools.partial(
        compare.run_study, run_fn=FakeRunner(stop={"random"}), config_fn=config_fn, load_fn=load_fn))
    with pytest.raises(SystemExit) as stop:
        cli_main(["compare", "run", "--preset", "lm", "--kinds", "vanilla", "random", "--baselines", "", "--no-heatmaps",
                  "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert stop.value.code == 130 and captured.err.splitlines()[-1] == "synthesizer compare: interrupted"
    assert "report:" not in captured.out and not (tmp_path / "report.md").exists()
    assert [r["attention"] for r in Results.load(tmp_path).runs] == ["vanilla"]


def test_render_keeps_the_lead_and_counts_a_folder_merged_with_itself_once(tmp_path, monkeypatch):
    import json

    no_plots(monkeypatch)
    run(tmp_path / "a", FakeRunner(), heatmaps=False)
    saved = json.loads((tmp_path / "a" / "results.json").read_text())
    saved["lead"] = [["sotu", "vanilla", "what it shows"]]  # as the demo preset records it
    (tmp_path / "a" / "results.json").write_text(json.dumps(saved))
    main(["render", str(tmp_path / "a"), str(tmp_path / "a")])
    again = Results.load(tmp_path / "a")
    assert again.lead == [tuple(item) for item in saved["lead"]]
    assert "## What the attention learned" in (tmp_path / "a" / "report.md").read_text()
    assert again.wall_time_s == saved["wall_time_s"] and again.sessions == saved["sessions"]


def test_maps_that_could_not_be_read_are_tried_again_when_the_comparison_resumes(tmp_path):
    def failing_for_random(run_dir):
        if json.loads((run_dir / "result.json").read_text())["attention"] == "random":
            raise RuntimeError("no checkpoint")
        return load_fn(run_dir)

    lines = []
    run_comparison("lm", "quick", out=tmp_path, run_fn=FakeRunner(), config_fn=config_fn, load_fn=failing_for_random,
                   log=lines.append, kinds=["vanilla", "random"], baselines=[])
    assert "no attention maps for random (runs/lm-sotu/random/seed0): RuntimeError: no checkpoint (tried again when " \
           "the comparison resumes)" in lines
    assert set(Results.load(tmp_path).attention["lm-sotu"]) == {"vanilla"}
    runner = FakeRunner()
    results, _ = run(tmp_path, runner, kinds=["vanilla", "random"])
    assert runner.calls == []  # every run read back: only the missing maps are made
    maps = Results.load(tmp_path).attention["lm-sotu"]
    assert set(maps) == {"vanilla", "random"} and maps["random"][0]["source"].startswith("softmax(R)")
