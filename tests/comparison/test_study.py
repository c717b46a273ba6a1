"""`resolve(options) -> Study`: what a compare is asked for, decided once (the folder, the kinds, the tasks,
the widths, rates and schemes, and so the study's design), and what `run` and `plan` then read."""

import dataclasses
from pathlib import Path

import pytest

from synthesizer.comparison import presets
from synthesizer.comparison.command import plan_commands
from synthesizer.comparison.study import BASELINES, COMPARISON, SCALE, TUNING, Options, resolve
from synthesizer.tasks.config import ExperimentConfig


@pytest.mark.parametrize("options, design", [
    (Options("lm"), COMPARISON),
    (Options("lm", lrs=(1e-3, 1e-2)), TUNING),
    (Options("lm", positions=("rope",)), BASELINES),
    (Options("lm", widths=(16,)), SCALE),
    (Options("scale"), SCALE),
    (Options("baselines"), BASELINES),  # its rates are swept inside each task's study
    (Options("recall"), SCALE),  # widths and rates: one tuning study per width
    (Options("recall", widths=()), TUNING),  # an empty list turns the widths off
    (Options("baselines", positions=(), lrs=()), COMPARISON),
])
def test_the_design_is_decided_from_the_options_or_the_presets_defaults(options, design):
    assert resolve(options).design == design


def test_the_defaults_are_filled_in_once_the_default_folder_from_the_preset_and_size():
    study = resolve(Options("scale", "standard", kinds=["vanilla", "R"], baselines=[]))
    assert study.out == Path("runs/compare-scale-standard") == study.options.out
    assert study.kinds == ("vanilla", "random") and study.widths == (32, 64, 128) == study.options.widths
    assert [t.config for t in study.tasks] == [t.config for t in presets.PRESETS["scale"].tasks]
    assert resolve(Options("lm", out="x")).out == Path("x")
    only = resolve(Options("glue", "standard", tasks=("cls-spam-small",)))
    assert [t.config for t in only.tasks] == ["cls-spam-small"] and "cls-bible-pairs-small" in only.left_out
    assert only.kinds[-1] == "none"  # the preset's baseline after the kinds


@pytest.mark.parametrize("options, named", [
    (Options("nope"), "unknown preset 'nope'"),
    (Options("lm", seeds=0), "--seeds must be a positive integer"),
    (Options("lm", jobs=0), "--jobs must be a positive integer"),
    (Options("lm", steps=0), "--steps must be a positive integer"),
    (Options("lm", kinds=["vanila"]), "vanila"),
    (Options("lm", tasks=("nope",)), "--tasks: preset 'lm' has no task 'nope'"),
    (Options("lm", "huge"), "unknown size 'huge'"),
    (Options("demo", "standard"), "has no standard size"),
    (Options("lm", widths=(16, -2)), "--widths must be a positive integer"),
])
def test_every_option_is_checked_before_anything_is_built(options, named, tmp_path):
    with pytest.raises(ValueError, match=named):
        resolve(dataclasses.replace(options, out=tmp_path / "study"))
    assert not (tmp_path / "study").exists()


def test_plan_reads_the_studys_decisions_not_the_preset_again(tmp_path, monkeypatch):
    """The widths are decided when the study is resolved: the plan of a resolved scale study follows it even
    where the preset has changed since, and each width is a study of its own, resolved once."""
    study = resolve(Options("scale", "quick", kinds=["vanilla"], baselines=[], tasks=("lm-sotu-small",),
                            out=tmp_path))
    monkeypatch.setitem(presets.PRESETS, "scale", dataclasses.replace(presets.PRESETS["scale"], widths={}))
    import synthesizer.comparison.command as command

    resolved = []
    monkeypatch.setattr(command, "resolve", lambda options: resolved.append(options.out) or resolve(options))
    lines = plan_commands(study, ExperimentConfig.from_file, log=lambda line: None)
    assert len(lines) == 2 and [p.name for p in resolved] == ["width-16", "width-32"]
    assert "--set model.d_model=16" in lines[0] and "--set model.d_model=32" in lines[1]
