"""The report's figures: heatmaps people can read (colour bar, position axes, layer and head titles) and
validation curves as the mean over seeds with a band."""

import numpy as np

from synthesizer.report import plots
from synthesizer.report.groups import build_groups


def maps(stacks=("encoder", "decoder"), layers=2, heads=8, n=6, old_format=False):
    rng = np.random.default_rng(0)
    out = []
    for stack in stacks:
        for i in range(layers):
            probs = rng.random((heads, n, n))
            m = {"layer": f"{stack}.{i}.attn" if stack else f"blocks.{i}.attn", "kind": "dense", "source": "sample input",
                 "heads": (probs / probs.sum(-1, keepdims=True)).tolist()}
            if not old_format:
                m.update(stack=stack, index=i)
            out.append(m)
    return out


def test_heatmaps_have_a_colour_bar_position_axes_and_layer_head_titles():
    fig = plots.attention_figure(maps(), "translation-x: dense")
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 4 * 8
    bars = [ax for ax in fig.axes if "attention weight" in ax.get_ylabel()]
    assert len(bars) == 1  # one shared colour bar
    columns = {ax.get_subplotspec().colspan.start for ax in panels}
    assert columns == {0, 1, 2, 3}  # 8 heads wrap onto two rows of 4
    titles = {ax.get_title() for ax in panels}
    assert {"encoder layer 1, head 1", "encoder layer 2, head 8", "decoder layer 1, head 5",
            "decoder layer 2, head 4"} <= titles
    assert {ax.get_ylabel() for ax in panels if ax.get_subplotspec().colspan.start == 0} == {"query position"}
    assert sum(ax.get_xlabel() == "key position" for ax in panels) == 4  # the lowest panel of every column
    width, height = fig.get_size_inches()
    assert width < 12 and height / (4 * 2) < 3  # about 2.5 inches a panel


def test_heatmap_titles_of_a_single_stack_and_of_older_records():
    fig = plots.attention_figure(maps(stacks=("",), layers=2, heads=2, old_format=True), "lm-x: dense")
    assert {ax.get_title() for ax in fig.axes if ax.images} == {f"layer {i}, head {h}" for i in (1, 2) for h in (1, 2)}
    fig = plots.attention_figure(maps(stacks=("decoder",), layers=1, heads=2, old_format=True), "mt: dense")
    assert {ax.get_title() for ax in fig.axes if ax.images} == {"decoder layer 1, head 1", "decoder layer 1, head 2"}


def run(kind, seed, losses):
    return {"task": "lm", "data": "d", "attention": kind, "seed": seed, "primary_metric": "perplexity",
            "higher_is_better": False, "test_metrics": {"perplexity": 100.0 + seed}, "diverged": False,
            "curve": [{"step": 10 * (i + 1), "valid_loss": v} for i, v in enumerate(losses)]}


def test_curves_draw_the_mean_over_three_seeds_as_one_line_per_kind_with_a_band():
    runs = [run(kind, s, [5.0 + s + k, 4.0 + s + k]) for k, kind in enumerate(("vanilla", "random")) for s in range(3)]
    (group,) = build_groups(runs)
    fig = plots.curves_figure(group, runs)
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["vanilla", "random"]
    assert list(lines[0].get_ydata()) == [6.0, 5.0] and list(lines[1].get_ydata()) == [7.0, 6.0]  # seed means
    assert len(ax.collections) == 2  # one min-max band per kind
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == 4.0 and band.max() == 7.0  # vanilla: seeds 0..2 at 4..6 and 5..7
    legend = ax.get_legend()
    assert "mean over 3 seeds" in legend.get_title().get_text() and "min to max" in legend.get_title().get_text()
    fig.canvas.draw()
    assert legend.get_window_extent().x0 > ax.get_window_extent().x1  # outside the axes


def test_curves_of_one_seed_are_the_runs_themselves(tmp_path):
    runs = [run("vanilla", 0, [5.0, 4.0]), run("random", 0, [6.0, 5.0])]
    (group,) = build_groups(runs)
    fig = plots.curves_figure(group, runs)
    assert len(fig.axes[0].get_lines()) == 2 and not fig.axes[0].collections
    assert fig.axes[0].get_legend().get_title().get_text() == ""
    assert plots.plot_curves(group, runs, tmp_path / "c.png").stat().st_size > 1000


def test_heatmaps_of_real_models_name_each_stack_and_layer():
    # the titles come from the models' own module names: encoder-decoder self-attention per stack, one stack else
    from synthesizer.models.config import ModelConfig
    from synthesizer.models.lm import LanguageModel
    from synthesizer.models.seq2seq import EncoderDecoder
    from synthesizer.comparison.attention_maps import attention_maps

    cfg = dict(vocab_size=64, d_model=16, n_heads=2, n_layers=2, max_len=16, attention="dense")
    for model, layers in ((EncoderDecoder(ModelConfig(**cfg)), ("encoder layer 1", "encoder layer 2", "decoder layer 1",
                                                                 "decoder layer 2")),
                          (LanguageModel(ModelConfig(**cfg)), ("layer 1", "layer 2"))):
        fig = plots.attention_figure(attention_maps(model.eval(), list(range(3, 15))), "x: dense")
        panels = [ax for ax in fig.axes if ax.images]
        assert {ax.get_title() for ax in panels} == {f"{layer}, head {h}" for layer in layers for h in (1, 2)}
        assert any(ax.get_xlabel() == "key position" for ax in panels)
        assert any(ax.get_ylabel() == "query position" for ax in panels)
        assert sum("attention weight" in ax.get_ylabel() for ax in fig.axes) == 1  # the colour bar
        plots.plt.close(fig)


def test_every_kind_of_the_presets_has_a_colour_of_its_own_and_a_stack_s_layer_order_counts():
    from synthesizer.attention.names import HYBRID_STACKS, PAPER_KINDS
    from synthesizer.report.plots import kind_color

    kinds = [*PAPER_KINDS, "linformer", "dynamicconv", "lightconv", "none", *HYBRID_STACKS]
    assert len({kind_color(k) for k in kinds}) == len(kinds)
    # a user's own stacks: the same layers in another order are another colour (the sum of the letters was not)
    assert kind_color("dense,vanilla,dense") != kind_color("vanilla,dense,dense")


def test_best_over_rates_draws_one_line_per_kind_against_width_on_a_log_axis(tmp_path):
    best = {"vanilla": {32: 0.2, 64: 0.6, 128: 1.0}, "random": {32: 0.002, 128: 0.002}}
    fig = plots.best_over_rates_figure(best, "accuracy", True, "mqar")
    (ax,) = fig.axes
    vanilla, random = ax.get_lines()
    assert (vanilla.get_label(), random.get_label()) == ("vanilla", "random")
    assert list(vanilla.get_ydata()) == [0.2, 0.6, 1.0] and list(random.get_ydata()) == [0.002, 0.002]
    # the kinds sit a little apart on the width axis, each around its widths, so equal scores stay visible
    assert vanilla.get_xdata()[0] != random.get_xdata()[0]
    assert all(abs(x / w - 1) < 0.05 for x, w in zip(vanilla.get_xdata(), (32, 64, 128)))
    assert ax.get_xscale() == "log" and [t.get_text() for t in ax.get_xticklabels()] == ["32", "64", "128"]
    assert "higher is better" in ax.get_ylabel()
    assert plots.best_over_rates_figure({"vanilla": {32: 0.5}}, "accuracy", True, "one width") is None
    assert plots.plot_best_over_rates(best, "accuracy", True, "mqar", tmp_path / "b.png").stat().st_size > 1000
