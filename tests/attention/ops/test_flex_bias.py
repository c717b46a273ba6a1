"""The flex path (``impl="flex"``): FlexAttention with a ``score_mod`` adding the captured bias.

On CUDA (tests named ``test_cuda_*``, selected by ``pytest -k cuda``, skipped without a GPU): the
layer against ``impl="reference"``, forward and every gradient, as for sdpa_bias. On CPU torch has
no FlexAttention backward, so there the layer runs sdpa_bias instead; the eager forward of the
function is checked against the reference at a tiny size.
"""

from __future__ import annotations

import pytest
import torch

from synthesizer.attention import SynthesizerAttention
from synthesizer.attention.ops import flex_bias
from tests.attention.test_fastpaths import B, D, H, L, assert_grads_close, pair, run
from tests.helpers import rel_err
from tests.attention.ops.test_sdpa_bias import padding
from tests.tolerances import LAYER

pytestmark = [pytest.mark.skipif(not flex_bias.installed(), reason="FlexAttention needs torch >= 2.6"),
              # "start": a key set with padding first, which the layer refuses for inputs (conftest.any_key_mask)
              pytest.mark.usefixtures("any_key_mask")]
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                   reason="needs a CUDA device: torch.cuda.is_available() is False")
KINDS = ["random+vanilla", "random+dense", "fixed_random+vanilla"]


@pytest.mark.filterwarnings("ignore:.*flex_attention called without torch.compile")
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("pad_kind", ["none", "end", "start"])
def test_flex_forward_matches_reference_on_cpu(causal, pad_kind):
    """The eager forward (no gradients: torch has no FlexAttention backward on CPU)."""
    fast, ref = pair("random+vanilla", "flex", causal)
    assert fast.path == "sdpa_bias"  # the CPU fallback
    x = torch.randn(B, L, D)
    pad = padding(pad_kind, L)
    with torch.no_grad():
        want = ref(x, pad)
        scores = fast._scores("features", x)
        v = fast.value(x).view(B, L, H, -1).transpose(1, 2)
        heads = flex_bias.attend(scores, v, pad, causal, 0.0, False)
        got = fast.out(fast._merge(heads))
    assert torch.isfinite(got).all()
    assert rel_err(got, want) <= LAYER.rtol, f"causal={causal}, padding={pad_kind}"


def test_flex_is_refused_where_it_does_not_apply():
    with pytest.raises(ValueError, match="sdpa_bias computes"):
        SynthesizerAttention(D, H, L, "dense+vanilla", impl="flex")


@requires_cuda
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("pad_kind", ["none", "end", "start"])
def test_cuda_flex_matches_reference(kind, causal, pad_kind):
    """Forward and every gradient on a GPU, float32 (compiled FlexAttention; TF32 off for the reference)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    fast, ref = (layer.cuda() for layer in pair(kind, "flex", causal))
    assert fast.path == "flex"
    gen = torch.Generator().manual_seed(3)
    x, grad_out = (torch.randn(B, L, D, generator=gen).cuda() for _ in range(2))
    pad = padding(pad_kind, L)
    pad = None if pad is None else pad.cuda()
    out_f, grads_f = run(fast, x, pad, grad_out)
    out_r, grads_r = run(ref, x, pad, grad_out)
    what = f"{kind}, causal={causal}, padding={pad_kind}"
    assert torch.isfinite(out_f).all(), what
    assert rel_err(out_f, out_r) <= 1e-4, f"forward: {what}"
    assert_grads_close({k: v.cpu() for k, v in grads_f.items()}, {k: v.cpu() for k, v in grads_r.items()}, what)
