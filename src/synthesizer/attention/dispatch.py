"""Which kernel a layer runs, chosen from its components' forms.

The kernels (``ops/``), fastest first: the measured ranking on CPU (torch 2.13, forward+backward,
d_model 512, 8 heads, seq 1024; the figures are in docs/bench/kernels.md, reproduced by
``python -m synthesizer.bench attention``):
- input-independent components only: ``shared`` (one softmax per head, one matmul for the batch);
- dot products of features only (dense, factorized_random, vanilla and their mixtures): ``fused``
  (one scaled_dot_product_attention call over concatenated features) beats ``blockwise``. For the
  mixtures, ``wide_qk`` (our blocked kernel that runs the products with v at v's width instead of
  q's, a fifth fewer multiply-adds for dense+vanilla) is ranked after it: it wins at large
  widths and lengths and loses at the small presets' training shapes (measured in
  docs/bench/kernels.md, "wide_qk"), so the static ranking keeps ``fused`` and the measured table
  picks ``wide_qk`` where it won;
- features mixed with a batch-shared bias (random): ``fused_bias`` (the fused kernel's forward with
  ``w * R`` as a float mask, then one blockwise backward pass, over groups of examples, for dq, dk, dv
  and the gradients of R and the mixture weights together; see ``ops/fused_bias``) beats
  ``blockwise`` (the same backward after our own blocked forward). The reference path keeps
  (B, H, n, n) tensors, several times the plain layer's peak memory, so it is not the default.
  ``fused_bias`` hands over to ``blockwise`` where its kernel cannot run (dropout while training,
  non-CPU devices). ``sdpa_bias`` (one scaled_dot_product_attention call with the bias as a float
  mask that requires grad) runs sdpa's math kernel on CPU, which keeps (B, H, n, n) tensors like the
  reference: a candidate there (``candidates.py``), never the default;
- ``factorized_dense`` alone: ``factorized_dense`` (its logits generated block by block from the
  per-token factors), close to the plain layer's time and memory where the reference path's memory
  grows with n^2;
- anything else (mixtures with ``factorized_dense``, a registered component with general logits):
  ``reference``.

On CUDA (``CUDA_RANKING``) the ranking differs for the random mixtures only: ``fused_bias``'s kernel is
a CPU op and ``blockwise`` a Python loop over query blocks, so they go to ``sdpa_bias``, whose
memory-efficient CUDA kernel gives the mask's gradient (R's and the mixture weights') from its own
backward, in training with dropout too. That choice is not yet backed by a measurement on a GPU:
``scripts/gpu_check.sh`` times it against the other candidates. Summary, eval / training with dropout:

| layer | CPU | CUDA |
|---|---|---|
| input-independent components only | shared / shared | shared / shared |
| dot products of features only | fused / fused | fused / fused |
| (their mixtures, where the table measured it faster) | wide_qk | wide_qk |
| features + a batch-shared bias (random mixtures) | fused_bias / blockwise | sdpa_bias / sdpa_bias |
| factorized_dense alone | factorized_dense | factorized_dense |
| anything else | reference | reference |

Opt-in paths (``OPT_IN``), never chosen by ``impl="auto"``: ``triton`` (``ops/triton_bias``: our
FlashAttention-2-style Triton kernel with the bias gradient summed over the batch inside it;
CUDA, or CPU in triton's interpreter) and ``flex`` (``ops/flex_bias``: FlexAttention with a
``score_mod`` adding the captured ``w * R``; CUDA). Both were written for the GPU and are tested
against the reference (triton on CPU in the interpreter, flex on CUDA); none of the CUDA
candidates has been timed on a GPU yet. ``CUDA_RANKING`` is the one place where a measurement
(``scripts/gpu_check.sh``) would move ``triton`` or ``flex`` ahead of ``sdpa_bias``.

Where a measured dispatch table exists (``dispatch_table``: the shipped one, or one named by
``SYNTHESIZER_DISPATCH_TABLE``, written by ``python -m synthesizer.bench dispatch``), ``impl="auto"`` takes
the kernel it measured fastest for the layer, device type, mode and nearest length, among those that apply;
the rankings here decide where it has no entry. The shipped CPU table (docs/bench/dispatch) puts
dense+vanilla on ``wide_qk`` from seq 512 on, and most layers that are not input-independent on ``reference``
at seq 128. A kernel that the reference machine's table found fastest nowhere is a candidate
(``candidates.py``: ``sdpa_bias`` on CPU), left out of that device's ranking; ``impl=`` still runs it.

Per-token inputs (each token its own position: packed rows, whose document mask goes with them, and
left-padded rows): a kernel takes them only where it is named in ``PER_TOKEN`` (the layer hands it the
components' features at those positions and the document ids, ``ops.Scores.documents``). ``fused``
does (its bool mask takes the block-diagonal document mask); the others share one softmax over the
batch (``shared``), or index their terms by the row alone (the bias kernels), so a per-token forward
pass of theirs runs ``reference`` instead, and ``path`` says so for a layer fed packed rows.

Each kernel states once which layers it applies to (``applies``); ``running_path`` is the one place
that decides what a forward pass runs: the layer's ``forward`` and its ``path`` both ask it, so what
``path`` reports is what runs.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from ..errors import InputError
from . import registry
from .candidates import candidates
from .dispatch_table import active_table, layer_key, mode_of
from .forms import BIAS
from .ops import (blockwise, factorized_dense, flex_bias, fused, fused_bias, reference, sdpa_bias, shared, triton_bias,
                  wide_qk)

@runtime_checkable
class Kernel(Protocol):
    """What the dispatcher and the layer read of a kernel module (``ops/*``), every member present (a
    kernel that needs nothing beyond torch and always runs takes ``ops/always``'s ``runs`` and ``require``)."""

    NAME: str         # its path name, ``impl=NAME``
    NEEDS: str        # the scores it reads: "logits", "features" or "bias" (see ``ops/scores``)
    APPLIES_TO: str   # the layers it computes, in words (for the error on an impl that does not apply)
    FALLBACK: str | None  # the path a forward pass takes where ``runs`` says no; None: it always runs

    def applies(self, components: list) -> bool:
        """Whether it computes a layer of these component specs."""

    def runs(self, device: torch.device, training: bool, dropout: float) -> bool:
        """Whether it can run a forward pass in this mode on this device."""

    def require(self) -> None:
        """Raise (a missing module, one line) where what it needs beyond torch is absent."""

    def attend(self, scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float,
               training: bool) -> Tensor:
        """The layer's heads (B, H, n, dh) from its scores and values."""


# Every kernel by path name.
KERNELS: dict[str, Kernel] = {k.NAME: k for k in (shared, wide_qk, fused, fused_bias, blockwise, sdpa_bias,
                                                     factorized_dense, reference, triton_bias, flex_bias)}
# The CPU ranking above; the first that applies is the default. The kernels that won no entry of the reference
# machine's table are candidates (``candidates.py``), left out of it.
CPU_RANKING = tuple(name for name in ("shared", "fused", "wide_qk", "fused_bias", "blockwise", "sdpa_bias",
                                      "factorized_dense", "reference") if name not in candidates("cpu"))
# The ranking on CUDA devices (see above); every other device type takes the CPU one. Today's
# choice, not yet measured on a GPU: the place to put ``triton`` or ``flex`` once a GPU has timed them.
CUDA_RANKING = ("shared", "fused", "wide_qk", "sdpa_bias", "fused_bias", "blockwise", "factorized_dense", "reference")
# The paths that take per-token inputs (positions of each token, packed rows' document mask); see above.
PER_TOKEN = ("fused", "reference")
# Paths that run only when asked for by name (``impl=``), on any device.
OPT_IN = ("triton", "flex")
IMPLS = ("auto", "reference", "shared", "fused", "wide_qk", "fused_bias", "blockwise", "sdpa_bias", "factorized_dense", *OPT_IN)


def ranking(device: torch.device | None = None) -> tuple[str, ...]:
    """The kernel names ``impl="auto"`` picks from, the fastest first on ``device`` (None: the CPU ranking)."""
    return CUDA_RANKING if device is not None and device.type == "cuda" else CPU_RANKING


# A position bias on vanilla's logits (``positions.py``: relative, alibi) is, to a kernel, one more
# batch-shared additive term: the layers that have one are dispatched as if it were a component of
# this form (not a registered component: it has no logits of its own).
POSITION_BIAS = registry.ComponentSpec("position_bias", factory=lambda *a, **k: None, form=BIAS,
                                       input_independent=True)


def _specs(components: tuple[str, ...], extra_bias: bool) -> list:
    specs = [registry.spec(c) for c in components]
    return [*specs, POSITION_BIAS] if extra_bias else specs


def applicable_paths(components: tuple[str, ...], device: torch.device | None = None, *,
                     extra_bias: bool = False) -> list[str]:
    """Every ranked path that computes a layer of these components (full names; ``extra_bias``: with a
    position bias on vanilla's logits), the fastest on ``device`` first (None: on CPU). The opt-in
    ones are not listed: see ``opt_in_paths``."""
    specs = _specs(components, extra_bias)
    return [name for name in ranking(device) if KERNELS[name].applies(specs)]


def candidate_paths(components: tuple[str, ...], device: torch.device | None = None, *,
                    extra_bias: bool = False) -> list[str]:
    """The candidate kernels (``candidates.py``) that compute a layer of these components on ``device``'s type
    (None: CPU): never chosen by ``impl="auto"``, timed by the dispatch benchmark beside the ranked ones."""
    specs = _specs(components, extra_bias)
    return [name for name in candidates("cpu" if device is None else device.type) if KERNELS[name].applies(specs)]


def opt_in_paths(components: tuple[str, ...], *, extra_bias: bool = False) -> list[str]:
    """The opt-in paths (``OPT_IN``) that compute a layer of these components."""
    specs = _specs(components, extra_bias)
    return [name for name in OPT_IN if KERNELS[name].applies(specs)]


def choose_path(components: tuple[str, ...], impl: str = "auto", device: torch.device | None = None, *,
                extra_bias: bool = False, training: bool = False, seq: int | None = None,
                per_token: bool = False, width: int | None = None) -> str:
    """The path ``impl`` asks for, or "invalid" if it does not apply. "auto": among the ranked paths that apply
    on ``device``, the fastest the measured dispatch table (``dispatch_table``) has for this layer in this mode
    (``training``) at the length nearest ``seq``; without a table entry (or without ``seq``, or for a layer of
    d_model ``width`` far from the table's, see ``dispatch_table.WIDTH_FACTOR``), the first of the static
    ranking; ``per_token`` inputs (packed rows, per-token positions): among the ``PER_TOKEN`` kernels.
    What a forward pass runs also depends on the mode: see ``running_path``."""
    if impl != "auto":
        kernel = KERNELS.get(impl)
        return impl if kernel is not None and kernel.applies(_specs(components, extra_bias)) else "invalid"
    paths = applicable_paths(components, device, extra_bias=extra_bias)
    if per_token:
        paths = [name for name in paths if name in PER_TOKEN]
    table = active_table() if seq is not None else None
    if table is not None:
        device_type = "cpu" if device is None else device.type
        measured = table.order(layer_key(components, extra_bias), device_type, mode_of(training), seq, width) or ()
        for name in measured:
            if name in paths:
                return name
    return paths[0]


def check_impl_name(impl: object) -> None:
    """ValueError unless ``impl`` is one of ``IMPLS``: checked where a config is read, whatever its kind (an
    ``--attention`` given on the command line may change the kind after)."""
    if not isinstance(impl, str) or impl not in IMPLS:
        raise InputError(f"impl must be one of {', '.join(IMPLS)}, got {impl!r}")


def check_impl(components: tuple[str, ...], impl: object, *, extra_bias: bool = False) -> None:
    """ValueError unless ``impl`` is one of ``IMPLS`` that computes a layer of these components (with a position
    bias on vanilla's logits where ``extra_bias``): checked before a run writes anything in its folder, and where
    a layer is built."""
    check_impl_name(impl)
    if impl not in ("auto", "reference") and choose_path(components, impl, extra_bias=extra_bias) != impl:
        raise InputError(f"impl={impl!r} does not apply to kind {str(components)!r}; use 'auto' or 'reference' "
                         f"({impl!r} computes {KERNELS[impl].APPLIES_TO})")


def running_path(components: tuple[str, ...], impl: str, *, training: bool, dropout: float,
                 device: torch.device, extra_bias: bool = False, per_token: bool = False,
                 seq: int | None = None, width: int | None = None) -> str:
    """The path a full forward pass of length ``seq`` of a layer of d_model ``width`` runs: ``choose_path`` on this
    device in this mode, except
    that a kernel that cannot run in this mode on this device (its ``runs``) hands over to its ``FALLBACK``, and
    that with ``per_token`` inputs (packed rows, per-token positions) a kernel not in ``PER_TOKEN`` hands over to
    ``reference``. Every path computes in the input's dtype: float16 and bfloat16 run on all of them on CPU."""
    path = choose_path(components, impl, device, extra_bias=extra_bias, training=training, seq=seq,
                       per_token=per_token, width=width)
    kernel = KERNELS.get(path)
    if kernel is None:  # "invalid": the layer refuses such an impl when it is built
        return path
    if not kernel.runs(device, training, dropout):
        path = kernel.FALLBACK
    return "reference" if per_token and path not in PER_TOKEN else path
