"""A comparison's results are analysed once: the report, the closing summary and the lead read one Analysis."""

import json
import re
import sys
from pathlib import Path

import synthesizer.report.baselines  # noqa: F401  (every report module that could build groups is loaded)
import synthesizer.report.index  # noqa: F401
import synthesizer.report.scale  # noqa: F401
from synthesizer.report import claims, groups
from synthesizer.report.analysis import analyse
from synthesizer.report.summary import render
from synthesizer.runs.results import Results

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report"
KEY = "lm-sotu-subset"
TIMING = {"kinds": {k: {"step_s": [0.01, 0.011], "median_s": 0.0105, "steps_per_sample": 1}
                    for k in ("vanilla", "random", "none")},
          "params": {}, "seq": 64, "batch": 8, "d_model": 32, "n_heads": 2, "max_len": 64}


def _counted(monkeypatch, name: str, real, calls: list) -> None:
    """Every report module's ``name`` (each binds it at import) replaced by ``real`` that records its calls."""
    def wrapper(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)
    for module in [m for n, m in list(sys.modules.items()) if n.startswith("synthesizer.report")]:
        if getattr(module, name, None) is real:
            monkeypatch.setattr(module, name, wrapper)


def _timed_copy(tmp_path: Path) -> Path:
    """The fixture with a timing of its kinds and a lead (so the summary prints the demo's reading too)."""
    data = json.loads((FIXTURE / "results.json").read_text())
    data["timings"] = {KEY: TIMING}
    data["lead"] = [["sotu-subset", "random", "what it shows"]]
    folder = tmp_path / "cmp"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(data))
    return folder


def test_one_render_builds_the_groups_and_judges_the_claims_once(tmp_path, monkeypatch):
    monkeypatch.setattr("synthesizer.report.plots._save", lambda fig, path: None)
    folder = _timed_copy(tmp_path)
    built, judged = [], []
    _counted(monkeypatch, "build_groups", groups.build_groups, built)
    _counted(monkeypatch, "evaluate_claims", claims.evaluate_claims, judged)
    lines = []
    render([str(folder)], log=lines.append)
    assert len(built) == 1 and len(judged) == 1
    (args, kwargs), = built
    assert args[1] == {KEY: TIMING}  # the timings too: the summary judges the report's groups
    # the closing summary says the verdicts the report's table gives
    said = {int(m[1]): m[2] for m in (re.match(r"claim (\d+): (.+?): ", line) for line in lines) if m}
    table = (folder / "report.md").read_text()
    assert len(said) == len(claims.CLAIMS)
    for number, label in said.items():
        verdict = label.split(" (")[0]
        assert f"| {number}. " in table and f"**{verdict}**{label[len(verdict):]} |" in table
    assert any("learned by" in line for line in lines)  # the lead's reading, from the same groups


def test_the_analysis_holds_the_groups_with_their_timings_and_the_verdicts_of_them(tmp_path):
    results = Results.load(_timed_copy(tmp_path))
    analysis = analyse(results)
    (group,) = analysis.groups
    assert group.key == KEY and group.timing == TIMING
    assert [v.number for v in analysis.verdicts] == [c.number for c in claims.CLAIMS]
    assert analysis.pretraining == []
    assert analysis.notes == claims.attention_notes(analysis.groups)


def test_a_scale_study_analyses_each_width_once(tmp_path, monkeypatch):
    from synthesizer.report.scale import Study

    for width in (16, 32):
        data = json.loads((FIXTURE / "results.json").read_text())
        for run in data["runs"]:
            run["config"] = {"model": {"d_model": width}}
        (tmp_path / f"width-{width}").mkdir()
        (tmp_path / f"width-{width}" / "results.json").write_text(json.dumps(data))
    built, judged = [], []
    _counted(monkeypatch, "build_groups", groups.build_groups, built)
    _counted(monkeypatch, "evaluate_claims", claims.evaluate_claims, judged)
    study = Study(tmp_path)
    assert len(built) == len(judged) == 2 and study.widths == [16, 32]
    assert study.groups[KEY][16] is study.analyses[16].groups[0]
