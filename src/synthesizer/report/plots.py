"""The report's PNG plots (matplotlib, headless): curves, metric vs speed, attention heatmaps, mixture weights.

Each function draws one figure from raw numbers (run records, a :class:`Group`, attention maps) and
saves it; nothing here trains or loads a model.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import PowerNorm  # noqa: E402

from .presets import DEFAULT_KINDS  # noqa: E402
from .tables import Group, speed_unit  # noqa: E402

DPI = 80
_EXTRA = ("linformer", "dynamicconv", "lightconv")


def kind_color(kind: str):
    """The same colour for a kind in every plot of every report."""
    known = list(DEFAULT_KINDS) + list(_EXTRA)
    index = known.index(kind) if kind in known else len(known) + sum(map(ord, kind))
    return plt.get_cmap("tab20")(index % 20)


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


def plot_curves(group: Group, runs: list[dict], path: Path) -> Path | None:
    """Validation curves of every variant (every seed, one colour per kind) on one chart."""
    runs = [r for r in runs if r.get("curve")]
    key = curve_key(runs)
    if key is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    labelled = set()
    for run in sorted(runs, key=lambda r: (r["attention"], r.get("seed", 0))):
        points = [(p["step"], p[key]) for p in run["curve"] if p.get(key) is not None]
        if not points:
            continue
        kind = run["attention"]
        steps, values = zip(*points)
        ax.plot(steps, values, marker="o", ms=3, lw=1.5, color=kind_color(kind),
                label=None if kind in labelled else kind, alpha=0.85)
        labelled.add(kind)
    ax.set_xlabel("training step")
    ax.set_ylabel(key.replace("_", " "))
    ax.set_title(f"{group.key}: validation curves")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return _save(fig, path)


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


def plot_attention(maps: list[dict], title: str, path: Path) -> Path | None:
    """One heatmap per layer (rows) and head (columns); query positions down, key positions across."""
    if not maps:
        return None
    n_layers, n_heads = len(maps), max(len(m["heads"]) for m in maps)
    fig, axes = plt.subplots(n_layers, n_heads, figsize=(1.7 * n_heads + 0.6, 1.8 * n_layers + 0.5), squeeze=False)
    for i, layer in enumerate(maps):
        for h in range(n_heads):
            ax = axes[i][h]
            ax.set_xticks([])
            ax.set_yticks([])
            if h < len(layer["heads"]):
                # a square-root colour scale keeps the spread-out rows visible next to the peaked first rows
                ax.imshow(np.asarray(layer["heads"][h]), cmap="viridis", norm=PowerNorm(0.5, vmin=0.0, vmax=1.0),
                          interpolation="nearest")
            if i == 0:
                ax.set_title(f"head {h}", fontsize=8)
            if h == 0:
                ax.set_ylabel(layer["layer"].replace(".attn", "").replace("blocks.", "layer "), fontsize=7)
    fig.suptitle(f"{title}\n({maps[0]['source']})", fontsize=9)
    return _save(fig, path)


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
