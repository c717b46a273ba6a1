"""Tolerances for float32 tests that compare two computation orders of the same math.

Cached against full decoding, a fast path against the reference, blockwise against whole, DDP
against one process: the formulas agree, the float32 results only up to rounding. float32 eps is
1.2e-7; a sum of m terms is off by up to about m * eps of the sum of their magnitudes (about
sqrt(m) * eps typically), and every reduction of a chain (layer after layer) adds its own. How
a reduction is split into vector lanes and blocks depends on the CPU and on the thread count, so
a tolerance at the error one machine happens to show fails on another. Each constant below bounds
that growth at the test sizes (widths <= 32, lengths <= 16, up to 2 layers) with room to spare,
and stays at least 100 times below what a real bug gives (a wrong mask, a position off by one, a
mis-scaled gradient: errors of 1e-2 and more).

Same code in the same order (determinism, bitwise resume, DDP ranks against each other) is
compared with ``torch.equal`` instead; tests in float64 keep their own, far tighter, tolerances.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

class Tolerance(NamedTuple):
    """|actual - expected| <= atol + rtol * |expected|, elementwise (torch.testing.assert_close)."""

    rtol: float
    atol: float


# One attention or convolution layer, outputs of order 1 (unit-variance inputs, default init):
# about six chained reductions (projections over d_model, logits over d_head, the softmax sum
# and P V over n, the output projection), each of <= 32 terms. Typical growth, 6 * sqrt(32) * eps
# = 4e-6, sits well inside 1e-5 (84 eps); observed: at most 3e-7, with 1 or 2 threads. Also the
# bound of max|a - b| / max|b| (rel_err).
LAYER = Tolerance(rtol=1e-5, atol=1e-5)

# Logits of a whole test model: embeddings, two such layers with feed-forward blocks, LayerNorms
# (which divide by a standard deviation and so amplify absolute errors) and a head that tests
# often scale by 20 (logits of +-40): about ten times the layer's error, so 1e-4 (840 eps) both
# absolute and relative. Observed: up to 2.7e-5 absolute on logits of 37 (7e-7 relative), which
# is why the former 1e-5 failed on some machines.
MODEL = Tolerance(rtol=1e-4, atol=1e-4)

# A scalar sum of a few dozen float32 terms at most (a loss over a batch's tokens; the tests sum
# 8) computed two ways: the worst case, m * eps, reaches 1e-5 only at m = 84.
SUM = Tolerance(rtol=1e-5, atol=0.0)

# A gradient far below the layer's largest one (the mixture logits alpha: a sum over every
# attention logit whose terms nearly cancel) carries rounding error relative to its terms, not to
# itself; measured against its own size it shows up to 1e-5 on ordinary inputs. Such a gradient is
# compared relative to GRAD_FLOOR times the layer's largest gradient. A wrong alpha gradient is off
# by about its own size, at least 1e-4 of the largest in these tests: 1000 times what that allows.
GRAD_FLOOR = 1e-2

# Weights and losses of the toy model (width 8) after a few optimizer steps whose gradients were
# summed in another order (micro-batches, two processes). A loss is a mean over ~50 tokens (m * eps
# = 6e-6 relative at worst), and so is each gradient entry; Adam divides the gradient by its own
# running size, so a relative error d of the gradient becomes an error of about lr * d per step:
# with d = 1e-6 (8 eps), lr = 3e-2 and 8 steps, 2.4e-7, inside atol. rtol covers the weights' and
# losses' own rounding (values up to 3.4). Averaging per micro-batch instead of per token (the bug
# the tests guard against) moves weights by 4e-2 and the loss by 0.17.
TRAINING = Tolerance(rtol=1e-5, atol=1e-6)


def assert_close_f32(actual, expected, what: str = "", tol: Tolerance = MODEL) -> None:
    """``torch.testing.assert_close`` with a float32 tolerance; ``what`` names the comparison in a failure.

    actual, expected: tensors of one shape, or equal-length sequences of floats.
    """
    torch.testing.assert_close(actual, expected, rtol=tol.rtol, atol=tol.atol,
                               msg=(lambda m: f"{what}: {m}") if what else None)
