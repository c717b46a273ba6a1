"""Hybrids: which layers need dot-product attention. A section of a comparison's report wherever it trained a
kind per layer (``"random,vanilla"``, models/config.py), read against Xue, Moosavi and Aletras ("Deconstructing
Attention", IJCNLP 2025).

Per task, every kind as a stack of layers: the layers with a dot-product component (``vanilla``, alone or in
a mixture; counted from 0, the first next to the embeddings), its score, its share of vanilla's gain over
``none`` with the claims' 95% interval (``claims.judge_rows``), on a recall task the seeds that learned it
(test accuracy at least ``LEARNED_ACCURACY``), its parameters and its training speed (tokens a second of the
runs as trained, side by side, and the one-at-a-time attention step per layer against vanilla's). Among the
kinds with one dot-product layer, the best placement is the one of lowest validation loss on seed 0 (the
learning-rate protocol's rule); every placement is shown.

The 2025 finding is read on four points, each "agrees", "disagrees" or "cannot tell" at this scale, by the
rules stated in the section: a share "comes close" when its whole interval is at or above ``CLOSE`` of
vanilla's gain and "loses clearly" when it is all below; a placement "breaks" recall when no seed learns it.
No paper claim is judged on a kind per layer (report/claims/table.py names the kinds it checks).
"""

from __future__ import annotations

import math

from ..attention.names import LAYER_SEPARATOR, layer_parts
from ..data.generated import DIAGNOSTIC_CORPORA
from .render import Block
from ..runs.results import failed, lowest_valid_loss
from .tables import LEARNED_ACCURACY, Group, Share, fmt_count, fmt_metric, group_key, group_label

CLOSE = 0.9  # a share of vanilla's gain over `none` from which a kind "comes close" to vanilla
DOT_PRODUCT = "vanilla"
AGREES, DISAGREES, CANNOT_TELL = "agrees", "disagrees", "cannot tell"
FINDING = ("Xue, Moosavi and Aletras (\"Deconstructing Attention\", IJCNLP 2025; 70M-500M models on SlimPajama)")


def is_per_layer(kind: str) -> bool:
    """Whether ``kind`` (a run record's canonical spelling) gives its layers kinds of their own."""
    return LAYER_SEPARATOR in kind


def layer_kinds(record: dict) -> list[str] | None:
    """The kind of every self-attention layer of a run: its record's ``params.by_layer``, else its spelling
    cycled over its config's ``model.n_layers``; None where neither is recorded."""
    by_layer = (record.get("params") or {}).get("by_layer")
    if by_layer:
        return [layer["kind"] for layer in by_layer]
    n = ((record.get("config") or {}).get("model") or {}).get("n_layers")
    parts = layer_parts(record["attention"])
    return None if not n else [parts[i % len(parts)] for i in range(n)]


def dot_product_layers(kinds: list[str]) -> list[int]:
    """The layers (from 0) whose kind has a dot-product component."""
    return [i for i, kind in enumerate(kinds) if DOT_PRODUCT in kind.split("+")]


def _layers_text(kinds: list[str] | None) -> str:
    if not kinds:
        return "—"
    dot = dot_product_layers(kinds)
    if len(dot) == len(kinds):
        return f"all {len(kinds)}"
    return "none" if not dot else f"{', '.join(map(str, dot))} ({len(dot)} of {len(kinds)})"


def _share_text(share: Share | None) -> str:
    return "—" if share is None else share.text()


def _measured(share: Share | None) -> bool:
    return share is not None and math.isfinite(share.low) and math.isfinite(share.high)


def _learned(runs: list[dict], kind: str) -> tuple[int, int]:
    """(seeds of ``kind`` whose test accuracy reached ``LEARNED_ACCURACY``, seeds with a test accuracy)."""
    accs = [a for a in ((r.get("test_metrics") or {}).get("accuracy") for r in runs
                        if r["attention"] == kind and not failed(r)) if a is not None]
    return sum(a >= LEARNED_ACCURACY for a in accs), len(accs)


def _seed0_valid_loss(runs: list[dict], kind: str) -> float | None:
    return next((lowest_valid_loss(r) for r in runs if r["attention"] == kind and r.get("seed", 0) == 0), None)


def _step_ratio(group: Group, kind: str) -> str:
    """The one-at-a-time attention step of ``kind`` (per layer) over vanilla's, or "—"."""
    timed = (group.timing or {}).get("kinds") or {}
    if kind not in timed or "vanilla" not in timed:
        return "—"
    return f"{timed[kind]['median_s'] / timed['vanilla']['median_s']:.2f}×"


class Placements:
    """The kinds of one group by where their dot-product layers are (``kinds``: {kind: its layers' kinds})."""

    def __init__(self, group: Group, runs: list[dict]):
        self.group, self.runs = group, runs
        self.kinds: dict[str, list[str] | None] = {}
        for row in group.rows:
            record = next((r for r in runs if r["attention"] == row.kind), None)
            self.kinds[row.kind] = None if record is None else layer_kinds(record)

    def with_dot_layers(self, count: int, only_vanilla: bool = True) -> list[str]:
        """The kinds with exactly ``count`` dot-product layers out of more, the others without one
        (``only_vanilla``: those layers pure vanilla, the rest input-independent or a synthesizer)."""
        found = []
        for kind, kinds in self.kinds.items():
            if not kinds or not is_per_layer(kind):
                continue
            dot = dot_product_layers(kinds)
            if len(dot) == count and (not only_vanilla or all(kinds[i] == DOT_PRODUCT for i in dot)):
                found.append(kind)
        return found

    def alternating(self) -> list[str]:
        """The kinds whose dot-product layers are every second layer."""
        return [kind for kind, kinds in self.kinds.items() if kinds and is_per_layer(kind) and len(kinds) > 1
                and dot_product_layers(kinds) in (list(range(0, len(kinds), 2)), list(range(1, len(kinds), 2)))]

    def single(self, where: int) -> str | None:
        """The kind with vanilla in layer ``where`` alone (-1: the last), or None."""
        for kind in self.with_dot_layers(1):
            kinds = self.kinds[kind]
            if dot_product_layers(kinds) == [where % len(kinds)]:
                return kind
        return None

    def best_single(self) -> tuple[str | None, str]:
        """The one-dot-product-layer kind of lowest validation loss on seed 0, and how it was chosen."""
        losses = {k: loss for k in self.with_dot_layers(1) if (loss := _seed0_valid_loss(self.runs, k)) is not None}
        if not losses:
            return None, "no kind with one vanilla layer has a validation loss on seed 0"
        best = min(losses, key=losses.get)
        listed = ", ".join(f"{k}: {v:.4f}" for k, v in sorted(losses.items(), key=lambda kv: kv[1]))
        return best, f"lowest validation loss of seed 0 ({listed})"


def _table(group: Group, places: Placements, recall: bool) -> Block:
    header = ["kind", "dot-product layers", "seeds", f"test {group.metric}", "share of vanilla's gain [95%]"]
    header += ["seeds learned"] if recall else []
    header += ["params", "tokens/s", "attention step vs vanilla"]
    def place(row):  # the most dot-product layers first, then by where they are
        dot = dot_product_layers(places.kinds.get(row.kind) or [])
        return -len(dot), dot

    order = sorted(group.rows, key=place)
    cells = []
    for row in order:
        line = [row.kind, _layers_text(places.kinds.get(row.kind)), str(row.n_ok),
                fmt_metric(row.metric_mean, row.metric_std, group.metric), _share_text(group.judged(row.kind).attention_share)]
        if recall:
            learned, seeds = _learned(places.runs, row.kind)
            line.append(f"{learned}/{seeds}")
        line += [fmt_count(row.params_total), "—" if row.tokens_per_s is None else f"{row.tokens_per_s:,.0f}",
                 _step_ratio(group, row.kind)]
        cells.append(line)
    return ("table", header, cells)


def _close_reading(share: Share | None, kind: str, want_close: bool) -> tuple[str, str]:
    """(verdict, its numbers) of "``kind`` comes close to vanilla" (``want_close``) or "loses clearly"."""
    if share is None:
        return CANNOT_TELL, f"{kind}: no share (vanilla not clearly ahead of `none`, or a kind not trained)"
    shown = f"{kind} keeps {share.text()} of vanilla's gain over `none`"
    if not _measured(share):
        return CANNOT_TELL, f"{shown} (no interval measured)"
    close, far = share.low >= CLOSE, share.high < CLOSE
    if not (close or far):
        return CANNOT_TELL, f"{shown}: the interval straddles {CLOSE:.0%}"
    return (AGREES if close == want_close else DISAGREES), shown


def _best_share(group: Group, kinds: list[str]) -> tuple[str | None, Share | None]:
    shares = [(k, group.judged(k).attention_share) for k in kinds if group.row(k) is not None]
    shares = [(k, s) for k, s in shares if s is not None]
    return max(shares, key=lambda ks: ks[1].value) if shares else (kinds[0] if kinds else None, None)


def _recall_breaks(places: Placements) -> tuple[str, str]:
    """(verdict, numbers) of "vanilla only in the first or only in the last layer breaks recall"."""
    first, last = places.single(0), places.single(-1)
    if first is None or last is None:
        return CANNOT_TELL, "vanilla in the first layer only or in the last only was not trained"
    counts = {k: _learned(places.runs, k) for k in (first, last, "vanilla")}
    shown = "; ".join(f"{k}: {n}/{seeds} seeds learned it" for k, (n, seeds) in counts.items())
    learned_v, seeds_v = counts["vanilla"]
    if not seeds_v or learned_v == 0:
        return CANNOT_TELL, f"{shown} (vanilla itself did not learn it: nothing to break)"
    if all(counts[k][0] == 0 for k in (first, last)):
        return AGREES, shown
    if any(counts[k][1] and counts[k][0] == counts[k][1] for k in (first, last)):
        return DISAGREES, shown
    return CANNOT_TELL, f"{shown} (some seeds only)"


def _finding_items(groups: list[tuple[Group, Placements]]) -> list[str]:
    """The four readings of the 2025 finding, on the first language-modelling group and the first recall one."""
    lm = next(((g, p) for g, p in groups if g.data not in DIAGNOSTIC_CORPORA and g.metric == "perplexity"), None)
    recall = next(((g, p) for g, p in groups if g.data in DIAGNOSTIC_CORPORA), None)
    items = []
    if lm is not None:
        group, places = lm
        label = f"on {group.key}"
        verdict, shown = _close_reading(group.judged("random").attention_share if group.row("random") else None,
                                        "random", want_close=False)
        items.append(f"Input-independent maps in every layer lose clearly (WikiText perplexity 84.8 against 38.1): "
                     f"**{verdict}** {label}: {shown}.")
        kind, share = _best_share(group, places.alternating())
        verdict, shown = _close_reading(share, kind or "no alternating kind", want_close=True)
        items.append(f"Alternated with standard attention they come close (39.3): **{verdict}** {label}: {shown}.")
        best, _ = places.best_single()
        share = group.judged(best).attention_share if best is not None else None
        verdict, shown = _close_reading(share, best or "no kind with one vanilla layer", want_close=True)
        items.append(f"Standard attention in about a quarter of the layers suffices: **{verdict}** {label}, with the "
                     f"best single placement by seed 0's validation loss: {shown}.")
    if recall is not None:
        verdict, shown = _recall_breaks(recall[1])
        items.append(f"Keeping it only in the first or only in the last layer breaks LAMBADA, read here on recall: "
                     f"**{verdict}** on {recall[0].key}: {shown}.")
    return items


def hybrid_blocks(groups: list[Group], runs: list[dict], labels: dict[str, str] | None = None) -> list[Block]:
    """The section (see the module's docstring), or [] where no group trained a kind per layer."""
    mixed = [g for g in groups if any(is_per_layer(r.kind) for r in g.rows)]
    if not mixed:
        return []
    blocks: list[Block] = [
        ("h2", "Hybrids: which layers need dot-product attention"),
        ("p", "Every kind as a stack of layers. Dot-product layers: those with a vanilla component (counted from 0, "
              "the first next to the embeddings). The share is of vanilla's gain over `none` (what its attention "
              "adds; log scale for perplexity), with the claims' 95% interval over paired seeds (and test examples "
              f"where recorded). A recall task is learned by a seed whose test accuracy reaches {LEARNED_ACCURACY:.0%}. "
              "Tokens/s: the runs as trained, side by side with others; the attention step: one layer's training "
              "step timed one kind at a time, a kind per layer's the mean of its layers. No paper claim is judged on "
              "a kind per layer.")]
    read = []
    for group in mixed:
        group_runs = [r for r in runs if group_key(r["task"], r["data"]) == group.key]
        places = Placements(group, group_runs)
        recall = group.data in DIAGNOSTIC_CORPORA
        read.append((group, places))
        blocks += [("h3", group_label(group, labels or {})), _table(group, places, recall)]
        best, how = places.best_single()
        if best is not None:
            blocks.append(("p", f"Vanilla in one layer of {len(places.kinds[best])}: the best placement is `{best}` "
                                f"by the {how}."))
    items = _finding_items(read)
    if items:
        blocks += [("h3", "Against the 2025 finding"),
                   ("p", f"{FINDING}. At this scale (the models above, their budgets and seeds): a kind \"comes "
                         f"close\" where its share's whole interval is at or above {CLOSE:.0%}, \"loses clearly\" "
                         f"where it is all below; a placement \"breaks\" recall where no seed learns it while vanilla "
                         "does. Otherwise: cannot tell."),
                   ("list", items)]
    return blocks

