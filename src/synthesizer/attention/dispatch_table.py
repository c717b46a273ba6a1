"""The measured dispatch table: for a layer, a device type, a mode and a length, the kernels that compute
it from the fastest to the slowest, as timed on one machine.

``python -m synthesizer.bench dispatch`` writes one (``bench/dispatch.py``). The package ships the reference
machine's (``dispatch_table.json`` beside this file, with the command that made it); a user points the package
at a table of their own machine with ``SYNTHESIZER_DISPATCH_TABLE=PATH`` or :func:`use_table`, or turns tables
off with ``SYNTHESIZER_DISPATCH_TABLE=none`` (the static ranking everywhere; the test suite runs so, so that
what it asserts of ``path`` does not depend on the machine a table was measured on). ``impl="auto"``
(``dispatch.choose_path``) takes, among the kernels that apply, the first of the entry measured nearest the
pass's length (nearest on a log scale; an entry stands for the lengths around it), and the static ranking
where the table has no entry for the layer, device type and mode.

A layer is named by its components joined with ``+`` in the layer's order (``dense+vanilla``), with
``+position_bias`` where its vanilla component has a relative or ALiBi bias (see ``dispatch.POSITION_BIAS``).
Modes: ``train`` (forward and backward, what a training step runs) and ``eval`` (forward without gradients).
The table is keyed on length: the width, heads and batch it was measured at are recorded in it, and a layer
whose width (d_model) is more than ``WIDTH_FACTOR`` times off the measured one does not read it (the static
ranking decides): at the comparison presets' width, 64, the kernels rank otherwise than at 512 (``reference``,
the fastest at seq 128 and width 512 for dense and dense+vanilla, is much slower than ``fused`` there;
docs/bench/measured-dispatch/README.md). Measure at your own shapes.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..errors import InputError

TABLE_ENV = "SYNTHESIZER_DISPATCH_TABLE"
NO_TABLE = "none"  # the environment's value for "no table: the static ranking"
DEFAULT_TABLE = Path(__file__).with_name("dispatch_table.json")
MODES = ("train", "eval")
FORMAT = 1
# A table applies to layers whose width is within this factor of the width it was measured at.
WIDTH_FACTOR = 2.0


def layer_key(components: tuple[str, ...], extra_bias: bool = False) -> str:
    """The name of a layer in the table: its components, then ``position_bias`` where it has one."""
    return "+".join((*components, "position_bias") if extra_bias else components)


def mode_of(training: bool) -> str:
    return "train" if training else "eval"


@dataclass(frozen=True)
class Entry:
    """One measurement: the kernels that compute ``layer`` on ``device`` in ``mode`` at length ``seq``, the
    fastest first, with their median seconds."""

    layer: str
    device: str
    mode: str
    seq: int
    order: tuple[str, ...]
    median_s: tuple[float, ...]

    def as_json(self) -> dict:
        return {"layer": self.layer, "device": self.device, "mode": self.mode, "seq": self.seq,
                "order": list(self.order), "median_s": list(self.median_s)}


@dataclass(frozen=True)
class DispatchTable:
    entries: tuple[Entry, ...]
    measured_at: dict  # the shapes, machine and command it was measured with (said, not used for the lookup)

    def order(self, layer: str, device: str, mode: str, seq: int, width: int | None = None) -> tuple[str, ...] | None:
        """The kernels of the entry for (``layer``, ``device``, ``mode``) measured nearest ``seq`` (ties: the
        shorter), fastest first; None where the table has no entry for them, or where ``width`` (the layer's
        d_model; None: not checked) is more than ``WIDTH_FACTOR`` times off the width the table was measured at."""
        if not self.applies_to_width(width):
            return None
        near = self._by_layer.get((layer, device, mode))
        if not near:
            return None
        return min(near, key=lambda e: (abs(math.log(e.seq / max(seq, 1))), e.seq)).order

    @cached_property
    def _by_layer(self) -> dict[tuple[str, str, str], list[Entry]]:
        """The entries of each (layer, device, mode): ``order`` runs on every forward pass."""
        index: dict[tuple[str, str, str], list[Entry]] = {}
        for e in self.entries:
            index.setdefault((e.layer, e.device, e.mode), []).append(e)
        return index

    def applies_to_width(self, width: int | None) -> bool:
        """Whether a layer of this d_model reads the table (True where either width is unknown)."""
        measured = self.measured_at.get("d_model")
        if width is None or not measured:
            return True
        return 1 / WIDTH_FACTOR <= width / measured <= WIDTH_FACTOR

    def winners(self) -> set[str]:
        """The kernels that are the fastest of at least one entry."""
        return {e.order[0] for e in self.entries if e.order}

    def as_json(self) -> dict:
        return {"format": FORMAT, "measured_at": self.measured_at, "entries": [e.as_json() for e in self.entries]}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.as_json(), indent=1) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "DispatchTable":
        """The table in ``path``; InputError naming the file and the entry where it is not one."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(f"dispatch table {path}: cannot be read as JSON ({e})") from e
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), list):
            raise InputError(f"dispatch table {path}: not a dispatch table of format {FORMAT} (a JSON object with "
                             "'format' and 'entries'); write one with `python -m synthesizer.bench dispatch`")
        return cls(tuple(_entry(path, i, e) for i, e in enumerate(data["entries"])), data.get("measured_at") or {})


def _entry(path: Path, index: int, raw: object) -> Entry:
    where = f"dispatch table {path}, entry {index}"
    if not isinstance(raw, dict):
        raise InputError(f"{where}: not a JSON object")
    missing = [k for k in ("layer", "device", "mode", "seq", "order", "median_s") if k not in raw]
    if missing:
        raise InputError(f"{where}: missing {', '.join(missing)}")
    if raw["mode"] not in MODES:
        raise InputError(f"{where}: mode must be one of {', '.join(MODES)}, got {raw['mode']!r}")
    if not isinstance(raw["seq"], int) or raw["seq"] < 1:
        raise InputError(f"{where}: seq must be a positive integer, got {raw['seq']!r}")
    if len(raw["order"]) != len(raw["median_s"]) or not raw["order"]:
        raise InputError(f"{where}: 'order' and 'median_s' must be non-empty lists of the same length")
    return Entry(str(raw["layer"]), str(raw["device"]), raw["mode"], raw["seq"], tuple(map(str, raw["order"])),
                 tuple(float(s) for s in raw["median_s"]))


_chosen: list = []  # [the table in use, or None for none]: read once, on the first lookup


def shipped_table() -> DispatchTable | None:
    """The reference machine's table that the package ships, or None where it ships none."""
    return DispatchTable.load(DEFAULT_TABLE) if DEFAULT_TABLE.exists() else None


def use_table(path: str | Path | None) -> DispatchTable | None:
    """Make ``impl="auto"`` read the table in ``path`` from now on (None: the default, the environment's
    ``SYNTHESIZER_DISPATCH_TABLE`` or the shipped one, read again at the next lookup). Returns the table."""
    _chosen.clear()
    if path is None:
        return None
    table = DispatchTable.load(path)
    _chosen.append(table)
    return table


def active_table() -> DispatchTable | None:
    """The table ``impl="auto"`` reads: the one given to :func:`use_table`, else the file named by
    ``SYNTHESIZER_DISPATCH_TABLE`` (``none``: no table), else the shipped one; None where there is none (the
    static ranking)."""
    if not _chosen:
        named = os.environ.get(TABLE_ENV)
        if named == NO_TABLE:
            _chosen.append(None)
        elif named:
            _chosen.append(DispatchTable.load(named))
        else:
            _chosen.append(shipped_table())
    return _chosen[0]
