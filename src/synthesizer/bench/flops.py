"""Forward FLOPs of one attention layer, by formula: 2 x the multiply-adds of its matrix products.

Softmax, masks, activations, biases and other elementwise work are not counted (they are O(B n d)
or O(B H n^2) additions next to O(B n d^2) and O(B n^2 d) products), which is also what
``torch.utils.flop_counter.FlopCounterMode`` counts, so the tests check these formulas against it.

Symbols: B batch, n sequence length, d d_model, H heads (d_h = d / H), L max_len, k the low rank
(factorized_random's k, Linformer's projected length), K a convolution's kernel size.

Per layer, every Synthesizer kind pays the value and output projections (4 B n d^2) and the
probabilities times values (2 B n^2 d), plus per logits component its own formula (the
component's ``flops``, read from the registry; a registered component without one raises):

=====================  =================================================================
vanilla                Q, K projections 4 B n d^2, Q K^T 2 B n^2 d
dense                  W1 2 B n d^2, relu(x W1) W2^T 2 B n^2 d
random, fixed_random   nothing: R is read, not computed
factorized_random      R1 R2^T 2 H n^2 k, once for the batch (the fused path of a mixture with a
                       per-example component repeats it per example: not counted)
factorized_dense       W0 2 B n d^2, Wa and Wb 2 B n d (a + b) with a b = L (the outer product
                       of Pa and Pb is elementwise)
=====================  =================================================================

Baselines (ours and the PyPI ``linformer`` package; conv as the algorithm, see ``conv_band_extra``):

=====================  =================================================================
linformer (ours)       Q, out 4 B n d^2; E^T x and F^T x 4 B n k d; their K, V maps 4 B k d^2;
                       the projected bias E^T m, F^T m 4 B n k; Q K'^T and P V' 4 B n k d
linformer_pypi         Q, K, V, out 8 B n d^2; E^T K and F^T V 4 B n k d; Q K'^T, P V' 4 B n k d
lightconv              GLU input 4 B n d^2, output 2 B n d^2, convolution 2 B n d K
dynamicconv            as lightconv, plus the kernel predictor 2 B n d H K
sdpa                   as vanilla
=====================  =================================================================
"""

from __future__ import annotations

from ..attention import registry
from ..attention.kinds import parse_kind
from ..errors import InputError, positive_int

BASELINE_KINDS = ("linformer", "linformer_pypi", "lightconv", "dynamicconv", "sdpa")


def _check_sizes(**sizes: int) -> None:
    for name, value in sizes.items():
        positive_int(name, value)


def layer_flops(kind: str, batch: int, seq: int, d_model: int, n_heads: int, max_len: int | None = None,
                *, k: int | None = None, kernel_size: int = 31, glu: bool = True) -> int:
    """Forward FLOPs (2 x multiply-adds of matrix products) of one layer of ``kind`` on a (B, n, d) input.

    ``kind``: a Synthesizer kind (``"random+vanilla"``...) or a baseline (``linformer``,
    ``linformer_pypi``, ``lightconv``, ``dynamicconv``, ``sdpa``). ``max_len`` defaults to ``seq``;
    ``k`` defaults to 8 for factorized_random and 256 for Linformer.
    """
    max_len = seq if max_len is None else max_len
    _check_sizes(batch=batch, seq=seq, d_model=d_model, n_heads=n_heads, max_len=max_len, kernel_size=kernel_size)
    if d_model % n_heads:
        raise InputError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    b, n, d, h = batch, seq, d_model, n_heads
    if kind in ("linformer", "linformer_pypi"):
        k = 256 if k is None else k
        _check_sizes(k=k)
        if kind == "linformer":
            return 4 * b * n * d * d + 4 * b * n * k * d + 4 * b * k * d * d + 4 * b * n * k + 4 * b * n * k * d
        return 8 * b * n * d * d + 4 * b * n * k * d + 4 * b * n * k * d
    if kind in ("lightconv", "dynamicconv"):
        projections = (4 if glu else 2) * b * n * d * d + 2 * b * n * d * d
        predictor = 2 * b * n * d * h * kernel_size if kind == "dynamicconv" else 0
        return projections + 2 * b * n * d * kernel_size + predictor
    if kind == "sdpa":
        kind = "vanilla"
    components = parse_kind(kind)  # ValueError naming the allowed kinds
    k = 8 if k is None else k
    _check_sizes(k=k)
    total = 4 * b * n * d * d + 2 * b * n * n * d
    for c in components:
        formula = registry.spec(c).flops
        if formula is None:
            raise InputError(f"attention component {c!r} has no FLOP formula: give its factory a "
                             f"flops(batch, seq, d_model, n_heads, max_len, **options) method")
        total += formula(b, n, d, h, max_len, k=k)
    return total


def conv_band_extra(batch: int, seq: int, d_model: int, kernel_size: int = 31, block: int = 64) -> int:
    """FLOPs our banded convolution computes beyond the algorithm's ``2 B n d K``.

    Each block of c = min(block, n) positions is one (c, c + K - 1) band-matrix product, so it
    spends ``c + K - 1`` multiply-adds per output instead of K, on n rounded up to whole blocks.
    """
    c = min(block, seq)
    blocks = -(-seq // c)
    return 2 * batch * d_model * blocks * c * (c + kernel_size - 1) - 2 * batch * seq * d_model * kernel_size
