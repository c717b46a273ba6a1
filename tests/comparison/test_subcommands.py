"""`synthesizer compare run|plan|render|time|index`: each subcommand with its own options; the flag forms of the
release before (--preset, --plan, --render, --time, --index) still work, each with a one-line notice."""

import re

import pytest

import synthesizer.comparison.main as compare
from synthesizer.cli import main as cli_main
from synthesizer.comparison.main import SUBCOMMANDS, main
from synthesizer.comparison.study import SCALE, TUNING, resolve
from synthesizer.runs.results import Results

from .test_compare import FakeRunner, no_plots, run


def test_help_lists_the_five_subcommands_one_line_each(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as stop:
        cli_main(["compare", "--help"])
    out = capsys.readouterr().out
    assert stop.value.code == 0
    listed = re.findall(r"^    (\w+) +(.+)$", out, flags=re.M)
    assert listed == [(name, line) for name, line in SUBCOMMANDS.items()]
    assert list(SUBCOMMANDS) == ["run", "plan", "render", "time", "index"]


def recording(monkeypatch) -> list:
    """Every handler of main replaced by one that records (its name, its options, the command line)."""
    calls = []
    for name in SUBCOMMANDS:
        monkeypatch.setattr(compare, f"_{name}", lambda args, command, name=name: calls.append(
            (name, {k: v for k, v in vars(args).items() if k != "handler"}, command)) or 0)
    return calls


@pytest.mark.parametrize("old, new", [
    (["--preset", "lm", "--kinds", "vanilla", "random", "--jobs", "2", "--out", "x"],
     ["run", "--preset", "lm", "--kinds", "vanilla", "random", "--out", "x", "--jobs", "2"]),
    (["--kinds", "vanilla", "--preset", "scale", "--no-heatmaps", "--seeds", "3"],
     ["run", "--preset", "scale", "--kinds", "vanilla", "--seeds", "3", "--no-heatmaps"]),
    (["--preset", "lm", "--size", "standard", "--seeds", "3", "--plan", "--out", "x"],
     ["plan", "--preset", "lm", "--size", "standard", "--seeds", "3", "--out", "x"]),
    (["--plan", "--preset", "lm", "--jobs", "2", "--set", "train.lr=1e-3"],  # --jobs meant nothing to a plan
     ["plan", "--preset", "lm", "--set", "train.lr=1e-3"]),
    (["--render", "a", "b", "--out", "c"], ["render", "a", "b", "--out", "c"]),
    (["--render", "study", "--against", "lm", "mt"], ["render", "study", "--against", "lm", "mt"]),
    (["--time", "a"], ["time", "a"]),
    (["--index", "docs/results"], ["index", "docs/results"]),
])
def test_each_flag_form_says_its_subcommand_in_one_line_and_does_the_same(old, new, monkeypatch, capsys):
    calls = recording(monkeypatch)
    assert main(old) == 0
    notice = capsys.readouterr().err
    assert main(new) == 0
    assert capsys.readouterr().err == ""  # the new form says nothing
    (name, options, command), (new_name, new_options, new_command) = calls
    assert (name, options) == (new_name, new_options) == (new[0], new_options)
    assert notice.count("\n") == 1 and notice.endswith(f"synthesizer compare {' '.join(new)}\n"), notice
    assert re.match(r"note: `synthesizer compare --(preset|plan|render|time|index) \.\.\.` is deprecated", notice)
    assert command == "synthesizer compare " + " ".join(old)  # recorded as typed
    assert new_command == "synthesizer compare " + " ".join(new)


@pytest.mark.parametrize("old, flag", [(["--preset", "lm"], "--preset"), (["--preset", "lm", "--plan"], "--plan"),
                                       (["--render", "a"], "--render"), (["--time", "a"], "--time"),
                                       (["--index", "a"], "--index")])
def test_the_notice_names_the_old_flag(old, flag, monkeypatch, capsys):
    recording(monkeypatch)
    main(old)
    assert capsys.readouterr().err.startswith(f"note: `synthesizer compare {flag} ...` is deprecated and goes in the "
                                              "next release; the same command now: synthesizer compare ")


def test_what_a_flag_form_never_took_is_still_refused(capsys):
    with pytest.raises(SystemExit):
        main(["--time", "x", "--plan"])
    assert "unrecognized arguments: --plan" in capsys.readouterr().err
    with pytest.raises(ValueError, match="give one subcommand .*not --preset and --render together"):
        main(["--preset", "lm", "--render", "x"])


def test_the_old_plan_prints_the_lines_of_the_new(tmp_path, capsys):
    options = ["--preset", "lm", "--kinds", "vanilla", "random", "--baselines", "", "--seeds", "2", "--out",
               str(tmp_path / "cmp")]
    assert main(["plan", *options]) == 0
    new = capsys.readouterr()
    assert main([*options, "--plan"]) == 0
    old = capsys.readouterr()
    assert old.out == new.out and len(new.out.splitlines()) == 4
    assert old.err.splitlines()[1:] == new.err.splitlines() and "compare plan" in old.err.splitlines()[0]


def test_the_old_render_writes_the_report_and_records_the_command_as_typed(tmp_path, monkeypatch, capsys):
    no_plots(monkeypatch)
    run(tmp_path, FakeRunner(), heatmaps=False)
    (tmp_path / "report.md").unlink()
    assert main(["--render", str(tmp_path)]) == 0
    assert (tmp_path / "report.md").is_file()
    assert f"- command: `synthesizer compare --render {tmp_path}`" in (tmp_path / "report.md").read_text()
    assert f"synthesizer compare render {tmp_path}" in capsys.readouterr().err


def test_run_and_plan_resolve_once_and_hand_on_that_study(tmp_path, monkeypatch):
    resolved, handed = [], []
    monkeypatch.setattr(compare, "resolve", lambda options: resolved.append(resolve(options)) or resolved[-1])
    monkeypatch.setattr(compare, "run_study", lambda study: handed.append(study) or Results({"runs": [1]}))
    monkeypatch.setattr(compare, "plan_commands", lambda study: handed.append(study) or [])
    assert main(["run", "--preset", "scale", "--out", str(tmp_path)]) == 0
    assert main(["plan", "--preset", "lm", "--lrs", "1e-3", "--out", str(tmp_path)]) == 0
    assert handed == resolved and [study.design for study in handed] == [SCALE, TUNING]
