"""The demo preset (`make demo`): what it trains, and a report that opens with the learned attention maps."""

import re

from synthesizer.data.generated import GENERATED, generate_corpus
from synthesizer.report import plots
from synthesizer.comparison import run_comparison
from synthesizer.report.lead import LEAD_FIGURE, LEAD_TABLE
from synthesizer.comparison.presets import PRESETS, sized_tasks, task_overrides
from synthesizer.runs.results import Results
from synthesizer.tasks.config import ExperimentConfig

KINDS = {"vanilla", "random", "fixed_random", "dense", "random+vanilla", "none"}


def test_the_demo_trains_six_kinds_on_a_position_task_and_a_content_task(tmp_path):
    spec = PRESETS["demo"]
    tasks, left_out = sized_tasks(spec, "quick")
    corpora = [ExperimentConfig.from_file(t.config, task_overrides(t, "quick", "demo")).data["corpus"] for t in tasks]
    assert corpora == ["diag-reverse", "diag-lookup"] and not left_out
    assert {d for d, _, _ in spec.lead} <= set(corpora)
    calls = []

    def runner(cfg, out_dir, resume=False, progress=True):
        calls.append((cfg.data["corpus"], cfg.attention, cfg.seed, cfg.train["max_steps"]))
        raise RuntimeError("planned only")

    run_comparison("demo", out=tmp_path, run_fn=runner, config_fn=ExperimentConfig.from_file, load_fn=None,
                   heatmaps=False, log=lambda line: None)
    steps = {"diag-reverse": 400, "diag-lookup": 300}
    assert sorted(calls) == sorted((c, k, 0, steps[c]) for c in corpora for k in KINDS)


def test_the_lookup_needs_the_query_key_and_holds_its_pair():
    corpus = generate_corpus("diag-lookup")
    for row in corpus.splits["test"][:50]:
        words = row["text"].split()
        (answer,) = row["answers"]
        assert words[answer - 2] == "?" and f"{words[answer - 1]}={words[answer]}" in words[:answer - 2]
    assert set(w for row in corpus.splits["train"][:200] for w in row["text"].split()) <= set(GENERATED["diag-lookup"].vocab)


def test_a_tiny_demo_report_opens_with_the_learned_attention(tmp_path):
    # the real runner at a few steps of a tiny model: the two kinds the picture shows
    tiny = ["train.max_steps=2", "train.eval_every=1", "data.limit=32", "model.d_model=16", "model.d_ff=32"]
    run_comparison("demo", kinds=["vanilla", "random"], baselines=[], out=tmp_path, overrides=tiny,
                   log=lambda line: None)
    report = (tmp_path / "report.md").read_text()
    sections = re.findall(r"^## (.+)$", report, flags=re.M)
    assert sections[0] == "What the attention learned"
    assert report.index(f"]({LEAD_FIGURE})") < report.index("## reversal")
    assert (tmp_path / LEAD_FIGURE).stat().st_size > 0
    table = (tmp_path / LEAD_TABLE).read_text()
    assert "lm-diag-reverse" in table and "lm-diag-lookup" in table
    maps = Results.load(tmp_path).attention
    assert maps["lm-diag-reverse"]["random"][0]["source"].startswith("softmax(R)")
    # vanilla is read on a lookup example (the fixed vocabulary knows no other words), not on the English sample
    assert maps["lm-diag-lookup"]["vanilla"][0]["source"] == "sample input"
    assert len(maps["lm-diag-lookup"]["vanilla"][0]["heads"][0]) == len(generate_corpus("diag-lookup").splits["test"][0]["text"].split())


def _maps(n, heads=2, layers=2, source="sample input"):
    row = [1.0 / n] * n
    return [{"layer": f"blocks.{i}.attn", "stack": "", "index": i, "kind": "k", "source": source,
             "heads": [[row] * n for _ in range(heads)]} for i in range(layers)]


def test_the_side_by_side_figure_has_every_panel_of_both_models(tmp_path):
    fig = plots.attention_panels_figure([("random on reversal", _maps(6, heads=4)), ("vanilla on lookup", _maps(4)),
                                         ("no maps", [])])
    subs = fig.subfigs
    assert len(subs) == 2  # the one without maps is left out
    assert [len([a for a in s.axes if a.images]) for s in subs] == [8, 4]
    assert [s._suptitle.get_text() for s in subs] == ["random on reversal", "vanilla on lookup"]
    path = plots.plot_attention_panels([("a", _maps(5)), ("b", _maps(3))], tmp_path / "both.png")
    assert path == tmp_path / "both.png" and path.read_bytes().startswith(b"\x89PNG")
    assert plots.plot_attention_panels([("a", [])], tmp_path / "none.png") is None


def test_a_lead_of_one_kind_draws_its_one_panel(tmp_path):
    # the demo run with a single kind: subfigures(1, 1) is one figure, not a list of them
    path = plots.plot_attention_panels([("vanilla on lookup", _maps(4))], tmp_path / "one.png")
    assert path is not None and path.stat().st_size > 1000
