"""Writing benchmark rows: JSON lines, a CSV, a markdown report with the targets' verdicts, PNG plots."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from ..errors import InputError

TARGET_SEQ = 2048  # the length the layer-level targets are stated at


def write_jsonl(rows: list[dict], path: Path) -> None:
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def read_jsonl(path: Path) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def write_csv(rows: list[dict], path: Path) -> None:
    """One CSV for every row; columns are the union of the rows' keys, in first-seen order."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def _num(value, fmt: str, scale: float = 1.0) -> str:
    return "n/a" if value is None else format(value * scale, fmt)


def _spread(r: dict, key: str, scale: float = 1e3) -> str:
    """``median [min-max]`` of a timing in ms."""
    return f"{r[key + '_s'] * scale:.1f} [{r[key + '_min_s'] * scale:.1f}-{r[key + '_max_s'] * scale:.1f}]"


def layer_table(rows: list[dict]) -> str:
    head = ("| seq | kind | path | params | GFLOP fwd | fwd ms [min-max] | fwd x V | fwd+bwd ms [min-max] | fwd+bwd x V "
            "| fwd+bwd x SDPA | peak fwd MiB | peak fwd+bwd MiB | activations MiB | activations x V |")
    lines = [head, "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['seq']} | {r['kind']} | {r['path']} | {r['params']:,} | {r['flops'] / 1e9:.2f} "
                     f"| {_spread(r, 'forward')} | {_num(r.get('forward_vs_vanilla'), '.2f')} "
                     f"| {_spread(r, 'fwd_bwd')} | {_num(r.get('fwd_bwd_vs_vanilla'), '.2f')} "
                     f"| {_num(r.get('fwd_bwd_ratio'), '.2f')} | {_num(r.get('peak_forward_bytes'), '.0f', 2**-20)} | {_num(r.get('peak_bytes'), '.0f', 2**-20)} "
                     f"| {_num(r.get('activation_bytes'), '.0f', 2**-20)} | {_num(r.get('activation_vs_vanilla'), '.2f')} |")
    return "\n".join(lines)


def model_table(rows: list[dict]) -> str:
    lines = ["| task | causal | batch | kind | params | GFLOP fwd | step ms [min-max] | tokens/s | tokens/s x V "
             "| FLOP ratio V/kind | weights+AdamW MiB | step peak MiB | activations MiB | activations x V |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        causal = {True: "yes", False: "no"}.get(r.get("causal"), "n/a")
        lines.append(f"| {r['task']} | {causal} | {r['batch']} | {r['kind']} | {r['params']:,} | {r['flops'] / 1e9:.1f} "
                     f"| {_spread(r, 'step')} | {r['tokens_per_s']:.0f} | {_num(r.get('tokens_per_s_vs_vanilla'), '.2f')} "
                     f"| {_num(r.get('flops_vs_vanilla'), '.2f')} | {_num(r.get('state_bytes'), '.0f', 2**-20)} "
                     f"| {_num(r.get('step_peak_bytes'), '.0f', 2**-20)} | {_num(r.get('activation_bytes'), '.0f', 2**-20)} "
                     f"| {_num(r.get('activation_vs_vanilla'), '.2f')} |")
    return "\n".join(lines)


def packing_table(rows: list[dict]) -> str:
    lines = ["| config | kind | batches | padding | step ms | real tokens/s [min-max] | packed x padded | kernels |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        spread = f"{r['tokens_per_s']:.0f} [{r['tokens_per_s_min']:.0f}-{r['tokens_per_s_max']:.0f}]"
        lines.append(f"| {r['config']} | {r['kind']} | {'packed' if r['pack'] else 'padded'} | {100 * r['padding']:.0f}% "
                     f"| {1e3 * r['step_s']:.1f} | {spread} | {_num(r.get('speedup'), '.2f')} "
                     f"| {', '.join(r.get('paths') or [])} |")
    return "\n".join(lines)


def decode_table(rows: list[dict]) -> str:
    lines = ["| kind | decode ms [min-max] | tokens/s | tokens/s x V | cache KiB | cache x V |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['kind']} | {_spread(r, 'decode')} | {r['tokens_per_s']:.1f} "
                     f"| {_num(r.get('tokens_per_s_vs_vanilla'), '.2f')} | {r['cache_bytes'] / 1024:.0f} "
                     f"| {_num(r.get('cache_vs_vanilla'), '.2f')} |")
    return "\n".join(lines)


def dispatch_rows_table(rows: list[dict]) -> str:
    """Per length, kind and mode: the kernels from the fastest, each with its median and its time over the
    fastest's."""
    lines = ["| seq | kind | mode | kernels, fastest first: ms (x the fastest) |", "|---:|---|---|---|"]
    keys = dict.fromkeys((r["seq"], r["kind"], r["mode"]) for r in rows)
    for seq, kind, mode in keys:
        ranked = sorted((r for r in rows if (r["seq"], r["kind"], r["mode"]) == (seq, kind, mode)), key=lambda r: r["rank"])
        best = ranked[0]["median_s"]
        cells = ", ".join(f"`{r['path']}` {r['median_s'] * 1e3:.2f} ({r['median_s'] / best:.2f}x)" for r in ranked)
        lines.append(f"| {seq} | {kind} | {mode} | {cells} |")
    return "\n".join(lines)


def _find(rows: list[dict], **match) -> dict | None:
    return next((r for r in rows if all(r.get(k) == v for k, v in match.items())), None)


def targets(rows: list[dict]) -> list[dict]:
    """The issue's targets, each {"target", "value", "required", "met", "detail"}; ``met`` is None when
    the rows needed were not measured. Layer targets use seq 2048, or the longest length measured
    by every row involved (then ``detail`` says which)."""
    out = []

    def add(target: str, value: float | None, detail: str, required: float, at_least: bool) -> None:
        met = None if value is None else (value >= required if at_least else value <= required)
        out.append({"target": target, "value": value, "required": ("≥ " if at_least else "≤ ") + f"{required:g}",
                    "met": met, "detail": detail})

    layer = [r for r in rows if r.get("bench") == "layer"]

    def layer_ratio(slow: str, fast: str, key: str = "fwd_bwd_s") -> tuple[float | None, str]:
        """time(slow) / time(fast) at TARGET_SEQ or the longest length both ran at."""
        seqs = sorted({r["seq"] for r in layer if r["kind"] == slow} & {r["seq"] for r in layer if r["kind"] == fast})
        if not seqs:
            return None, f"{slow} or {fast} not measured"
        seq = TARGET_SEQ if TARGET_SEQ in seqs else seqs[-1]
        a, b = _find(layer, kind=slow, seq=seq), _find(layer, kind=fast, seq=seq)
        return a[key] / b[key], f"seq {seq}: {slow} {a[key] * 1e3:.0f} ms, {fast} {b[key] * 1e3:.0f} ms"

    for kind in ("random", "factorized_random"):
        add(f"layer fwd+bwd: {kind} ≥ 1.6x faster than dynamicconv", *layer_ratio("dynamicconv", kind), 1.6, True)
        add(f"layer fwd+bwd: {kind} at least as fast as linformer (k=256)", *layer_ratio("linformer", kind), 1.0, True)
    add("layer fwd+bwd: our linformer within 1.2x of the PyPI package's time", *layer_ratio("linformer", "linformer_pypi"),
        1.2, False)
    add("layer fwd: our linformer within 1.2x of the PyPI package's time",
        *layer_ratio("linformer", "linformer_pypi", "forward_s"), 1.2, False)

    lm = [r for r in rows if r.get("bench") == "model" and r.get("task") == "lm"]
    lm_batch = max((r["batch"] for r in lm), default=None)  # the target's batch (8) in the full run
    lm_v, lm_r = _find(lm, kind="vanilla", batch=lm_batch), _find(lm, kind="random", batch=lm_batch)
    add("LM training tokens/s: random ≥ 1.25x vanilla",
        lm_r["tokens_per_s"] / lm_v["tokens_per_s"] if lm_v and lm_r else None,
        f"{lm_r['layers']} layers, d_model {lm_r['d_model']}, seq {lm_r['seq']}, batch {lm_r['batch']}: random "
        f"{lm_r['tokens_per_s']:.0f}, vanilla {lm_v['tokens_per_s']:.0f} tokens/s; FLOP ratio {lm_r['flops_vs_vanilla']:.2f}"
        if lm_v and lm_r else "not measured", 1.25, True)
    dv, dr = _find(rows, bench="decode", kind="vanilla"), _find(rows, bench="decode", kind="random")
    add("decoding: random's cache ≤ 0.5x vanilla's", dr["cache_bytes"] / dv["cache_bytes"] if dv and dr else None,
        f"{dr['cache_bytes'] / 2**20:.2f} MiB vs {dv['cache_bytes'] / 2**20:.2f} MiB" if dv and dr else "not measured", 0.5, False)
    add("decoding: random's tokens/s ≥ vanilla's", dr["tokens_per_s"] / dv["tokens_per_s"] if dv and dr else None,
        f"{dr['tokens_per_s']:.0f} vs {dv['tokens_per_s']:.0f} tokens/s" if dv and dr else "not measured", 1.0, True)
    return out


def targets_table(rows: list[dict]) -> str:
    lines = ["| target | measured | required | verdict | details |", "|---|---:|---:|---|---|"]
    for t in targets(rows):
        verdict = "not measured" if t["met"] is None else ("met" if t["met"] else "**missed**")
        lines.append(f"| {t['target']} | {_num(t['value'], '.2f')} | {t['required']} | {verdict} | {t['detail']} |")
    return "\n".join(lines)


def markdown(rows: list[dict], command: str | None = None, wall_s: float | None = None) -> str:
    """The whole report: environment, targets, then one table per benchmark that has rows."""
    parts = ["# Benchmark results", ""]
    if rows:
        r = rows[0]
        parts.append(f"torch {r.get('torch')}, {r.get('threads')} threads, {r.get('device')} ({r.get('device_name')}, "
                     f"{r.get('cores')} cores), Python {r.get('python')}." + (f" Wall time {wall_s / 60:.1f} min." if wall_s else ""))
    if command:
        parts += ["", f"Command: `{command}`"]
    parts += ["", "Times are medians over interleaved repeats, [min-max] their spread; `x V` is the ratio to "
              "`vanilla` measured in the same run, `x SDPA` to the plain `scaled_dot_product_attention` layer (`sdpa`) (time or memory: below 1 is better; tokens/s: above 1 is better). "
              "FLOPs count matrix products only (see `synthesizer/bench/flops.py`)."]
    if any(r.get("bench") in ("layer", "model", "decode") for r in rows):
        parts += ["", "## Targets", "", "Stated for the full run's sizes (`python -m synthesizer.bench all`); at other "
                  "sizes the verdicts only show that the machinery works.", "", targets_table(rows)]
    sections = (("layer", "## Layer level", layer_table), ("model", "## Model level: training throughput", model_table),
                ("decode", "## Decoding", decode_table),
                ("dispatch", "## Dispatch: the kernels of each layer, fastest first", dispatch_rows_table),
                ("packing", "## Packed against padded training (real tokens/s)", packing_table))
    for bench, title, table in sections:
        sel = [r for r in rows if r.get("bench") == bench]
        if sel:
            first = sel[0]
            keys = ("batch", "d_model", "heads", "layers", "vocab", "prompt", "new_tokens")[bench == "model":]  # model: a column
            sizes = ", ".join(f"{k} {first[k]}" for k in keys if k in first)
            parts += ["", title, "", *([sizes + ".", ""] if sizes else []), table(sel)]
            skipped = {r["kind"]: r["skipped_longer"] for r in sel if r.get("skipped_longer")}
            if skipped:
                parts += [""] + [f"- `{k}` not run at longer lengths: {why}." for k, why in skipped.items()]
    return "\n".join(parts) + "\n"


def _line_style(colours: dict, name: str) -> dict:
    dashed = "[" in name or name in ("sdpa", "linformer_pypi")  # yardsticks and forced paths
    return {"color": colours[name], "marker": "o", "markersize": 3, "label": name, "linestyle": "--" if dashed else "-"}


def _log_axes(ax, seqs: list[int], ylabel: str, title: str) -> None:
    ax.set(xscale="log", yscale="log", xlabel="sequence length", ylabel=ylabel, title=title)
    ax.set_xticks(seqs, [str(s) for s in seqs])
    ax.minorticks_off()
    ax.grid(True, which="major", alpha=0.3)


def _save_with_legend_outside(fig, ax, path: Path) -> Path:
    """One legend right of the axes, where it hides no line; the figure is saved and closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.legend(*ax.get_legend_handles_labels(), loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
               frameon=False)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def _plot_layer_time(layer: list[dict], colours: dict, path: Path) -> Path:
    import matplotlib.pyplot as plt

    seqs = sorted({r["seq"] for r in layer})
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    for ax, key, title in zip(axes, ("forward_s", "fwd_bwd_s"), ("forward", "forward + backward")):
        for name in colours:
            sel = sorted((r for r in layer if r["kind"] == name), key=lambda r: r["seq"])
            ax.plot([r["seq"] for r in sel], [r[key] * 1e3 for r in sel], **_line_style(colours, name))
        _log_axes(ax, seqs, "ms (median)", title)
    first = layer[0]
    fig.suptitle(f"attention layer time: batch {first['batch']}, d_model {first['d_model']}, {first['heads']} heads, "
                 f"{first['threads']} threads, torch {first['torch']}")
    return _save_with_legend_outside(fig, axes[1], path)


def _plot_layer_memory(layer: list[dict], colours: dict, path: Path) -> Path | None:
    import matplotlib.pyplot as plt

    # activations: the peak less the parameters' gradients (rows of older runs: the peak itself)
    memory = "activation_bytes" if any(r.get("activation_bytes") for r in layer) else "peak_bytes"
    if not any(r.get(memory) for r in layer):  # log scale: zero growth (tiny sizes) cannot be drawn
        return None
    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    for name in colours:
        sel = sorted((r for r in layer if r["kind"] == name and r.get(memory)), key=lambda r: r["seq"])
        if sel:
            ax.plot([r["seq"] for r in sel], [r[memory] / 2**20 for r in sel], **_line_style(colours, name))
    what = ("activation MiB (forward + backward peak less the parameters' gradients)"
            if memory == "activation_bytes" else "peak MiB (forward + backward)")
    _log_axes(ax, sorted({r["seq"] for r in layer}), what,
              f"attention layer memory: batch {layer[0]['batch']}, d_model {layer[0]['d_model']}")
    return _save_with_legend_outside(fig, ax, path)


def plot_layers(rows: list[dict], out: Path) -> list[Path]:
    """layer_time.png (forward and forward+backward) and layer_memory.png, log-log, one line per layer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layer = [r for r in rows if r.get("bench") == "layer"]
    if not layer:
        return []
    names = list(dict.fromkeys(r["kind"] for r in layer))
    colours = {name: plt.get_cmap("tab20")(i % 20) for i, name in enumerate(names)}
    written = [_plot_layer_time(layer, colours, out / "layer_time.png"),
               _plot_layer_memory(layer, colours, out / "layer_memory.png")]
    return [path for path in written if path is not None]


def write_results(rows: list[dict], out: str | Path, command: str | None = None, wall_s: float | None = None) -> list[Path]:
    """results.jsonl, results.csv, results.md, run.json (command and wall time) and the plots in
    ``out`` (created if needed)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(rows, out / "results.jsonl")
    write_csv(rows, out / "results.csv")
    (out / "results.md").write_text(markdown(rows, command, wall_s))
    (out / "run.json").write_text(json.dumps({"command": command, "wall_s": wall_s}) + "\n")
    return [out / "results.jsonl", out / "results.csv", out / "results.md", out / "run.json"] + plot_layers(rows, out)


def rewrite_results(folder: str | Path) -> list[Path]:
    """Redo the CSV, markdown and plots of a results folder from its results.jsonl and run.json."""
    folder = Path(folder)
    if not (folder / "results.jsonl").exists():
        raise InputError(f"{folder} holds no results.jsonl; give a folder a benchmark wrote")
    run = json.loads((folder / "run.json").read_text()) if (folder / "run.json").exists() else {}
    return write_results(read_jsonl(folder / "results.jsonl"), folder, run.get("command"), run.get("wall_s"))

