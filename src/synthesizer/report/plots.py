"""The report's PNG plots (matplotlib, headless): curves, metric vs speed, attention heatmaps, mixture weights.

Each ``plot_*`` function draws one figure from raw numbers (run records, a :class:`Group`, attention maps)
and saves it; ``curves_figure``, ``attention_figure``, ``attention_panels_figure`` and ``best_over_rates_figure``
return theirs unsaved (for checks on the figure).
Nothing here trains or loads a model.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import PowerNorm  # noqa: E402
from matplotlib.ticker import MaxNLocator, PercentFormatter  # noqa: E402

from ..attention.names import HYBRID_STACKS, PAPER_KINDS as DEFAULT_KINDS  # noqa: E402
from .layer_place import layer_place  # noqa: E402
from .tables import Group, speed_unit  # noqa: E402

DPI = 80
_EXTRA = ("linformer", "dynamicconv", "lightconv", "none")
_KNOWN = (*DEFAULT_KINDS, *_EXTRA, *HYBRID_STACKS)  # each its own colour of tab20 while they are 20 or fewer


def kind_color(kind: str):
    """The same colour for a kind in every plot of every report: the paper's kinds, the baselines and the hybrid
    study's stacks each their own; any other kind one of a second palette, by a hash of its name (in which the
    order of a stack's layers counts)."""
    if kind in _KNOWN:
        return plt.get_cmap("tab20")(_KNOWN.index(kind) % 20)
    return plt.get_cmap("tab20b")(zlib.crc32(kind.encode("utf-8")) % 20)


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def curve_key(runs: list[dict]) -> str | None:
    """The validation series to plot: the loss when every run logged it, else the first shared one."""
    keys = None
    for run in runs:
        for point in run.get("curve") or []:
            names = {k for k, v in point.items() if k.startswith("valid_") and isinstance(v, (int, float))}
            keys = names if keys is None else keys & names
    if not keys:
        return None
    return "valid_loss" if "valid_loss" in keys else sorted(keys)[0]


CURVE_BAND = "band: min to max over seeds"


def _curve_series(runs: list[dict], key: str, kinds: list[str]) -> dict[str, dict[int, list[float]]]:
    """kind -> step -> the values of ``key`` its seeds logged at that step, kinds in the order given
    (the table's), then any others."""
    series: dict[str, dict[int, list[float]]] = {}
    rank = {k: i for i, k in enumerate(kinds)}
    for run in sorted(runs, key=lambda r: (rank.get(r["attention"], len(rank)), r["attention"], r.get("seed", 0))):
        steps = series.setdefault(run["attention"], {})
        for p in run["curve"]:
            if isinstance(p.get(key), (int, float)) and np.isfinite(p[key]):
                steps.setdefault(int(p["step"]), []).append(float(p[key]))
    return {k: v for k, v in series.items() if v}


def _curve_legend_title(counts: set[int]) -> str | None:
    if counts == {1}:
        return None  # one seed: the lines are the runs themselves
    mean = f"mean over {counts.pop()} seeds" if len(counts) == 1 else "mean over seeds"
    return f"{mean};\n{CURVE_BAND}"


def curves_figure(group: Group, runs: list[dict]):
    """The validation-curve figure: per kind, the mean over seeds as one line and a band from the lowest
    to the highest seed at each step; None when no run logged a shared validation series."""
    runs = [r for r in runs if r.get("curve")]
    key = curve_key(runs)
    series = _curve_series(runs, key, [r.kind for r in group.rows]) if key is not None else {}
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(8.6, 4.6))
    counts = {kind: max(len(v) for v in by_step.values()) for kind, by_step in series.items()}
    same = len(set(counts.values())) == 1  # then the seed count goes once into the legend's title
    for kind, by_step in series.items():
        steps = sorted(by_step)
        values = [np.asarray(by_step[s]) for s in steps]
        color = kind_color(kind)
        ax.plot(steps, [v.mean() for v in values], marker="o", ms=3, lw=1.6, color=color,
                label=kind if same else f"{kind} ({counts[kind]} seed{'s' if counts[kind] > 1 else ''})")
        if counts[kind] > 1:
            ax.fill_between(steps, [v.min() for v in values], [v.max() for v in values], color=color, alpha=0.12,
                            lw=0)
    ax.set_xlabel("training step")
    ax.set_ylabel(key.replace("_", " "))
    ax.set_title(f"{group.key}: validation curves")
    ax.grid(alpha=0.3)
    # outside the axes: with ten variants a legend inside hides the curves it explains
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
              title=_curve_legend_title(set(counts.values())), title_fontsize=8)
    return fig


def plot_curves(group: Group, runs: list[dict], path: Path) -> Path | None:
    """Validation curves of every variant (mean over seeds, min-max band) on one chart, saved to ``path``."""
    fig = curves_figure(group, runs)
    return None if fig is None else _save(fig, path)


def plot_metric_vs_speed(group: Group, path: Path) -> Path | None:
    """Test metric against training tokens/s, one point per kind (error bars: seed std)."""
    rows = [r for r in group.rows if r.metric_mean is not None and r.tokens_per_s]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for r in rows:
        ax.errorbar(r.tokens_per_s, r.metric_mean, xerr=r.tokens_per_s_std or 0, yerr=r.metric_std or 0,
                    fmt="o", color=kind_color(r.kind), capsize=3)
        ax.annotate(r.kind, (r.tokens_per_s, r.metric_mean), fontsize=7, xytext=(4, 3), textcoords="offset points")
    ax.set_xlabel(f"training {speed_unit(group.task)}/s")
    ax.set_ylabel(f"test {group.metric} ({'higher' if group.higher_is_better else 'lower'} is better)")
    ax.set_title(f"{group.key}: quality against training speed")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def _share_bars(ax, points: list[tuple[int, object]], **style) -> None:
    """Shares (tables.Share) against width, with their 95% intervals where measured."""
    xs = [w for w, _ in points]
    ys = [s.value for _, s in points]
    err = [[max(s.value - s.low, 0.0) if np.isfinite(s.low) else 0.0 for _, s in points],
           [max(s.high - s.value, 0.0) if np.isfinite(s.high) else 0.0 for _, s in points]]
    ax.errorbar(xs, ys, yerr=err, capsize=3, marker="o", **style)


SCALE_DODGE = 1.03  # kinds' horizontal offset on the log width axis, as a factor per kind


def _dodge(i: int, n: int) -> float:
    """The factor that sets the i-th of n kinds a little apart on a log width axis, so equal scores (chance, 1.0)
    do not hide each other."""
    return SCALE_DODGE ** (i - (n - 1) / 2)


def _width_axis(ax, widths: list[int]) -> None:
    """A model-width x axis: log 2, a tick at each width measured, a grid."""
    ax.set_xlim(widths[0] / 1.3, widths[-1] * 1.3)
    ax.set_xscale("log", base=2)
    ax.set_xticks(widths, [str(w) for w in widths])
    ax.minorticks_off()
    ax.set_xlabel("model width (d_model)")
    ax.grid(alpha=0.3)


def plot_scale(by_width: dict[int, Group], path: Path) -> Path | None:
    """A task of a scale study against model width: each kind's test score (seed std), its share of what
    vanilla's attention adds (95% intervals) and ``none``'s kept share of vanilla's gain over the trivial
    predictor; None with fewer than two widths."""
    if len(by_width) < 2:
        return None
    widths = sorted(by_width)
    first = by_width[widths[0]]
    kinds = list(dict.fromkeys(row.kind for w in widths for row in by_width[w].rows))
    fig, (score, share, floor) = plt.subplots(1, 3, figsize=(14, 4.2), layout="constrained")
    for i, kind in enumerate(kinds):
        dodge = _dodge(i, len(kinds))
        rows = [(w, by_width[w].row(kind)) for w in widths]
        rows = [(w, r) for w, r in rows if r is not None and r.metric_mean is not None]
        if rows:
            score.errorbar([w * dodge for w, _ in rows], [r.metric_mean for _, r in rows],
                           yerr=[r.metric_std or 0.0 for _, r in rows], capsize=3, marker="o", label=kind,
                           color=kind_color(kind))
        shares = [(w, by_width[w].judged(kind).attention_share) for w, _ in rows]
        points = [(w * dodge, share) for w, share in shares if share is not None]
        if points and kind != "none":
            _share_bars(share, points, label=kind, color=kind_color(kind))
    kept = [(w, by_width[w].judged("none").kept) for w in widths
            if by_width[w].row("none") is not None and by_width[w].judged("none").kept is not None]
    if kept:
        _share_bars(floor, kept, color=kind_color("none"), label="none")
    for ax, drawn in ((score, True), (share, bool(share.lines)), (floor, bool(kept))):
        if not drawn:
            ax.text(0.5, 0.5, "no gain of vanilla's to share", ha="center", va="center", transform=ax.transAxes)
        _width_axis(ax, widths)
    score.set_ylabel(f"test {first.metric} ({'higher' if first.higher_is_better else 'lower'} is better)")
    score.legend(fontsize=7)
    share.axhline(1.0, color="grey", lw=0.8, ls="--")
    for ax in (share, floor):
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))  # shares read as the tables print them
    share.set_ylabel("share of what vanilla's attention adds")
    share.set_title("(score - none) / (vanilla - none)", fontsize=9)
    floor.set_ylabel("none's kept share")
    floor.set_title("of vanilla's gain over the trivial predictor", fontsize=9)
    fig.suptitle(f"{first.key} against model width")
    return _save(fig, path)


def best_over_rates_figure(best: dict[str, dict[int, float]], metric: str, higher_is_better: bool, title: str):
    """Zoology's figure: each kind's best test score of seed 0 over the swept learning rates against model width
    (``best[kind][width]``), one line per kind; None with fewer than two widths."""
    widths = sorted({w for cells in best.values() for w in cells})
    if len(widths) < 2:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, (kind, cells) in enumerate(best.items()):
        points = sorted(cells.items())
        ax.plot([w * _dodge(i, len(best)) for w, _ in points], [v for _, v in points], marker="o",
                color=kind_color(kind), label=kind)
    _width_axis(ax, widths)
    ax.set_ylabel(f"best test {metric} over the rates ({'higher' if higher_is_better else 'lower'} is better)")
    ax.set_title(title)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig


def plot_best_over_rates(best: dict[str, dict[int, float]], metric: str, higher_is_better: bool, title: str,
                         path: Path) -> Path | None:
    """:func:`best_over_rates_figure`, saved to ``path``; None with fewer than two widths."""
    fig = best_over_rates_figure(best, metric, higher_is_better, title)
    return None if fig is None else _save(fig, path)


ATTENTION_COLUMNS = 4  # heatmaps per row: wider figures shrink every panel on a page


def layer_title(layer: dict) -> str:
    """"encoder layer 1", "decoder layer 2", or "layer 1" for a single stack (1-based, as people count)."""
    stack, index = (layer["stack"], layer["index"]) if "stack" in layer else layer_place(layer["layer"])
    return f"{stack} layer {index + 1}".strip()


def attention_figure(maps: list[dict], title: str):
    """The heatmap figure: one panel per (layer, head), each layer starting a new row of at most
    ``ATTENTION_COLUMNS`` panels; query position down, key position across; one shared colour bar."""
    if not maps:
        return None
    rows, cols = _attention_grid(maps)
    fig = plt.figure(figsize=(2.5 * cols + 1.2, 2.45 * rows + 0.9), layout="constrained")
    _draw_attention(fig, maps, f"{title} ({maps[0]['source']})")
    return fig


def attention_panels_figure(panels: list[tuple[str, list[dict]]]):
    """Several models' heatmaps side by side, one :func:`attention_figure` layout per ``(title, maps)``
    (panels without maps are left out); None if none has maps."""
    panels = [(title, maps) for title, maps in panels if maps]
    if not panels:
        return None
    grids = [_attention_grid(maps) for _, maps in panels]
    rows = max(r for r, _ in grids)
    widths = [2.5 * c + 1.2 for _, c in grids]
    fig = plt.figure(figsize=(sum(widths), 2.45 * rows + 1.1), layout="constrained")
    subfigures = np.atleast_1d(fig.subfigures(1, len(panels), width_ratios=widths, wspace=0.04))  # one: not a list
    for sub, (title, maps) in zip(subfigures, panels):
        _draw_attention(sub, maps, title)
    return fig


def _attention_grid(maps: list[dict]) -> tuple[int, int]:
    """(rows, columns) of the heatmap panels of ``maps``."""
    n_heads = max(len(m["heads"]) for m in maps)
    cols = min(ATTENTION_COLUMNS, n_heads)
    return -(-n_heads // cols) * len(maps), cols


def _draw_attention(fig, maps: list[dict], title: str) -> None:
    """Draw the heatmaps of ``maps`` into ``fig`` (a figure or a subfigure), titled ``title``."""
    n_rows, cols = _attention_grid(maps)
    per_layer = n_rows // len(maps)
    axes = fig.subplots(n_rows, cols, squeeze=False)
    # a square-root colour scale keeps the spread-out rows visible next to the peaked first rows
    norm = PowerNorm(0.5, vmin=0.0, vmax=1.0)
    image, used = None, []
    for i, layer in enumerate(maps):
        for h in range(per_layer * cols):
            ax = axes[i * per_layer + h // cols][h % cols]
            if h >= len(layer["heads"]):
                ax.set_axis_off()
                continue
            weights = np.asarray(layer["heads"][h], dtype=float)
            image = ax.imshow(weights, cmap="viridis", norm=norm, interpolation="nearest")
            ax.set_title(f"{layer_title(layer)}, head {h + 1}", fontsize=9)
            ax.xaxis.set_major_locator(MaxNLocator(5, integer=True))
            ax.yaxis.set_major_locator(MaxNLocator(5, integer=True))
            ax.tick_params(labelsize=7)
            used.append(ax)
    # axis names on the outer panels only: the first column and the lowest panel of every column
    for ax in used:
        row, col = ax.get_subplotspec().rowspan.start, ax.get_subplotspec().colspan.start
        if col == 0:
            ax.set_ylabel("query position", fontsize=8)
        if not any(o.get_subplotspec().colspan.start == col and o.get_subplotspec().rowspan.start > row for o in used):
            ax.set_xlabel("key position", fontsize=8)
    bar = fig.colorbar(image, ax=used, shrink=min(0.8, 3.0 / n_rows + 0.3), aspect=30, pad=0.02)
    bar.set_label("attention weight (square-root colour scale)", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    fig.suptitle(title, fontsize=10)


def plot_attention(maps: list[dict], title: str, path: Path) -> Path | None:
    """The heatmaps of :func:`attention_figure`, saved to ``path``."""
    fig = attention_figure(maps, title)
    return None if fig is None else _save(fig, path)


def plot_attention_panels(panels: list[tuple[str, list[dict]]], path: Path) -> Path | None:
    """The side-by-side heatmaps of :func:`attention_panels_figure`, saved to ``path``."""
    fig = attention_panels_figure(panels)
    return None if fig is None else _save(fig, path)


def plot_mixture_weights(group: Group, runs: list[dict], path: Path) -> Path | None:
    """softmax(alpha) over training for every mixture kind (first seed), one line per layer and component.
    Per-head weights are averaged over heads."""
    mixes = {}
    for run in sorted(runs, key=lambda r: r.get("seed", 0)):
        if run.get("mixture_weights") and run["attention"] not in mixes:
            mixes[run["attention"]] = run
    if not mixes:
        return None
    fig, axes = plt.subplots(1, len(mixes), figsize=(4.2 * len(mixes), 3.4), squeeze=False)
    styles = ("-", "--", ":", "-.")
    for ax, (kind, run) in zip(axes[0], mixes.items()):
        steps = [p["step"] for p in run["mixture_weights"]]
        weights = np.array([[np.asarray(layer, dtype=float).reshape(-1, len(run["components"])).mean(0)
                             for layer in p["layers"]] for p in run["mixture_weights"]])  # (T, layers, C)
        for c, comp in enumerate(run["components"]):
            for layer in range(weights.shape[1]):
                ax.plot(steps, weights[:, layer, c], styles[layer % len(styles)], color=kind_color(comp),
                        label=f"{comp}, layer {layer}")
        ax.set_ylim(0, 1)
        ax.set_title(kind, fontsize=9)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    axes[0][0].set_ylabel("mixture weight softmax(α)")
    fig.suptitle(f"{group.key}: mixture weights during training", fontsize=10)
    return _save(fig, path)


def plot_rate_sweep(valid_loss: dict[str, dict[str, float | None]], chosen: dict[str, float | None], title: str,
                    path: Path) -> Path | None:
    """A learning-rate sweep (comparison/tuning.py): each kind's validation loss against the rate (log
    scale), the chosen rate ringed; a rate whose run did not finish is left out. None without points."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    drawn = False
    for kind, losses in valid_loss.items():
        points = sorted((float(lr), loss) for lr, loss in losses.items() if loss is not None)
        if not points:
            continue
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", color=kind_color(kind), label=kind)
        pick = chosen.get(kind)
        if pick is not None and pick in xs:
            ax.scatter([pick], [ys[xs.index(pick)]], s=160, facecolors="none", edgecolors=kind_color(kind))
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xscale("log")
    finite = [loss for losses in valid_loss.values() for loss in losses.values() if loss is not None]
    if min(finite) > 0 and max(finite) / min(finite) > 100:  # a task some runs learned and others did not
        ax.set_yscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("validation loss (seed 0)")
    ax.set_title(title)
    ax.legend(fontsize="small", title="ringed: the rate chosen", title_fontsize="small", loc="upper left",
              bbox_to_anchor=(1.02, 1.0))  # beside the axes: with many kinds it would hide the points
    return _save(fig, path)
