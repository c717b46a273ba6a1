"""``triton``: the random mixtures in one fused Triton kernel, forward and backward, with the
batch-shared bias term's gradient summed over the batch inside the kernel (opt-in: ``impl="triton"``).

Logits ``q k^T + w B`` plus the causal and key-padding masks, softmax, times v, in
FlashAttention-2's form (``kernels.py``): no (B, H, n, n) tensor exists in the forward or the
backward. The layer's decompositions are the ones ``fused_bias`` takes: the feature components'
q, k concatenated (the mixture weights folded into q, so autograd gives their gradients from dq:
``d(w q)/dw = q``), dense's logits as the product of its features, factorized_random's as the
product of R1 and R2 (features too), and the bias components (random, fixed_random) as
``(w_c, B_c)`` terms. One term (random+vanilla, random+dense) goes to the kernel as it is, a view of
R with its per-head weight; several are summed first (one (H, n, n) tensor). The kernel returns
``G = sum_b dS_b`` (H, n, n) in float32; ``dB = w G`` and ``dw_h = sum(B_h * G_h)`` follow here.

Where it runs: CUDA tensors, compiled; CPU tensors only when triton runs in its interpreter
(``TRITON_INTERPRET=1`` before triton is first imported; slow: for tests at small sizes). Not the
automatic choice anywhere until a GPU has measured it (see ``dispatch``). No dropout: training
with dropout runs ``FALLBACK``. The package imports without triton; the layer refuses
``impl="triton"`` without it (``require``). The user guide is docs/gpu.md.
"""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType

import torch
from torch import Tensor

from ....errors import InputError
from ....extras import install_command
from ...forms import BIAS, FEATURES
from ..scores import Scores, Terms, as_terms, bias_rows, kernel_dtype

NAME = "triton"
NEEDS = "features"
FALLBACK = "reference"
APPLIES_TO = ("layers of dot products of features (vanilla, dense, factorized_random) mixed with at least one "
              "input-independent component: random+vanilla, random+dense, fixed_random+vanilla, "
              "fixed_random+dense, factorized_random+vanilla, factorized_random+dense, ...")
MAX_WIDTH = 256  # widest q/k or v the kernel takes (padded to a power of two inside)


def installed() -> bool:
    """Whether the triton package can be imported."""
    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules (hidden) raises ValueError
        return False


def require() -> None:
    """ModuleNotFoundError saying how to get triton, where it is missing (the command line turns it
    into one line naming the extra)."""
    if not installed():
        raise ModuleNotFoundError(f"impl='triton' needs the triton package, which is not installed: "
                                  f"{install_command('gpu')} (a CUDA build of torch brings it)", name="triton")


def applies(components) -> bool:
    """Dot products of features (at least one of them input-dependent: vanilla, dense) mixed with at
    least one input-independent component (random, fixed_random, factorized_random): the paper's
    recommended mixtures. (Input-independent layers alone run ``shared``.)"""
    forms = {c.form for c in components}
    independent = any(c.input_independent for c in components)
    return FEATURES in forms and forms <= {FEATURES, BIAS} and independent and not all(
        c.input_independent for c in components)


def runs(device: torch.device, training: bool, dropout: float) -> bool:
    """CUDA (compiled), or CPU while triton runs in its interpreter; no dropout."""
    if training and dropout > 0:
        return False
    return device.type == "cuda" or (device.type == "cpu" and installed() and interpreting())


def interpreting() -> bool:
    """Whether triton runs kernels in its interpreter: ``TRITON_INTERPRET=1`` when triton was first
    imported (it reads the variable once and decorates its own library then, so setting it later
    changes nothing that works)."""
    import triton.language as tl

    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # another layout: the variable itself
        return os.environ.get("TRITON_INTERPRET", "0") == "1"
    return isinstance(tl.zeros, InterpretedFunction)


def load() -> ModuleType:
    """The kernels module (imports triton)."""
    require()
    from . import kernels

    return kernels


def _pow2(n: int) -> int:
    return max(16, 1 << (max(n, 1) - 1).bit_length())


def _launch(q: Tensor, width: int) -> dict:
    """Block sizes and launch options. On CUDA: 64x64 tiles where a row of features takes at most
    256 bytes (bfloat16/float16 up to 128 wide, float32 up to 64), else 32x32, so that a few tiles
    of q, k, v and their gradients fit the registers and two pipeline stages fit shared memory; 8
    warps for tiles 128 wide. Interpreted: 16x16 (quick on CPU at test sizes, and several blocks
    per sequence, so every boundary is exercised). Not tuned: no GPU has timed them."""
    if q.device.type != "cuda":
        return {"BLOCK_M": 16, "BLOCK_N": 16}
    block = 64 if width * q.element_size() <= 256 else 32
    return {"BLOCK_M": block, "BLOCK_N": block, "num_warps": 8 if width >= 128 else 4, "num_stages": 2}


def _upcast(q: Tensor) -> bool:
    """Whether the kernels take dot operands to float32 first: bfloat16 in the interpreter, which
    would multiply its raw bits (the values are those a GPU's bfloat16 units multiply)."""
    return q.dtype == torch.bfloat16 and q.device.type != "cuda"


def _strides(t: Tensor | None, n: int) -> tuple[int, ...]:
    return tuple(t.stride()) if t is not None else (0,) * n


class _TritonBiasAttention(torch.autograd.Function):
    """q, k (B, H, n, d); v (B, H, n, dv); bias (H, n, n) (any strides: a view of R) or None; w (H,)
    float32 (the bias's per-head weight); pad (B, n) int8 (1 = padding) or None."""

    @staticmethod
    def forward(ctx, q, k, v, bias, w, pad, causal):
        kern = load()
        b, h, n, d = q.shape
        dv = v.shape[-1]
        out = torch.empty(b, h, n, dv, dtype=q.dtype, device=q.device)
        lse = torch.empty(b, h, n, dtype=torch.float32, device=q.device)
        block_d, block_dv = _pow2(d), _pow2(dv)
        launch = _launch(q, max(block_d, block_dv))
        dummy = q.new_zeros(1)
        grid = (triton_cdiv(n, launch["BLOCK_M"]), b * h)
        kern.forward[grid](q, k, v, dummy if bias is None else bias, w, dummy if pad is None else pad, out, lse,
                           *q.stride(), *k.stride(), *v.stride(), *_strides(bias, 3), *out.stride(),
                           pad.stride(0) if pad is not None else 0, h, n, d, dv,
                           HAS_BIAS=bias is not None, HAS_PAD=pad is not None, CAUSAL=causal,
                           BLOCK_D=block_d, BLOCK_DV=block_dv, UPCAST=_upcast(q), **launch)
        ctx.save_for_backward(q, k, v, bias, w, pad, out, lse)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, bias, w, pad, out, lse = ctx.saved_tensors
        kern = load()
        b, h, n, d = q.shape
        dv = v.shape[-1]
        do = grad_out.to(v.dtype)
        delta = (do.float() * out.float()).sum(-1).contiguous()  # rowsum(dO * O) = rowsum(dP * P)
        need_db = bias is not None and (ctx.needs_input_grad[3] or ctx.needs_input_grad[4])
        dq = torch.empty(b, h, n, d, dtype=q.dtype, device=q.device)
        dk = torch.empty(b, h, n, d, dtype=q.dtype, device=q.device)
        dvv = torch.empty(b, h, n, dv, dtype=v.dtype, device=q.device)
        g = torch.zeros(h, n, n, dtype=torch.float32, device=q.device) if need_db else q.new_zeros(1, dtype=torch.float32)
        block_d, block_dv = _pow2(d), _pow2(dv)
        launch = _launch(q, max(block_d, block_dv))
        dummy = q.new_zeros(1)
        common = (*q.stride(), *k.stride(), *v.stride(), *_strides(bias, 3), *do.stride(),
                  pad.stride(0) if pad is not None else 0)
        flags = dict(HAS_BIAS=bias is not None, HAS_PAD=pad is not None, CAUSAL=ctx.causal,
                     BLOCK_D=block_d, BLOCK_DV=block_dv, UPCAST=_upcast(q), **launch)
        bias_arg, pad_arg = dummy if bias is None else bias, dummy if pad is None else pad
        kern.backward_kv[(triton_cdiv(n, launch["BLOCK_N"]), h)](q, k, v, bias_arg, w, pad_arg, do, lse, delta, dk, dvv, g,
                                                        *common, b, h, n, d, dv, NEED_DB=need_db, **flags)
        kern.backward_q[(triton_cdiv(n, launch["BLOCK_M"]), b * h)](q, k, v, bias_arg, w, pad_arg, do, lse, delta, dq,
                                                          *common, h, n, d, dv, **flags)
        dbias = dw = None
        if need_db:
            if ctx.needs_input_grad[3]:
                dbias = (g * w.view(h, 1, 1)).to(bias.dtype)
            if ctx.needs_input_grad[4]:
                dw = (g * bias.float()).sum((-1, -2))
        return dq, dk, dvv, dbias, dw, None, None


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def triton_bias_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | Terms | None, padding: Tensor | None,
                          causal: bool, q_weight: Tensor | None = None) -> Tensor:
    """q, k (B, H, n, dq); v (B, H, n, dv); bias (H, n, n) or terms ((w_c or None, B_c (H, n, n)), ...) or
    None; padding (B, n) bool or None; q_weight: the features' weight (1 or H values) or None ->
    (B, H, n, dv). Logits ``q_weight * q k^T + sum_c w_c B_c``, unscaled; rows without a key give zeros."""
    require()
    b, h, n, dq = q.shape
    if max(dq, v.shape[-1]) > MAX_WIDTH:
        raise InputError(f"the triton kernel takes at most {MAX_WIDTH} features per head, got q/k {dq}, v {v.shape[-1]}")
    if q.device.type != "cuda" and not (q.device.type == "cpu" and interpreting()):
        raise InputError(f"the triton kernel runs on CUDA tensors (and on CPU ones only in triton's interpreter: "
                         f"TRITON_INTERPRET=1 set before triton is imported), not on {q.device.type}")
    dtype = kernel_dtype(v)
    if q_weight is not None:
        q = q * q_weight.reshape(-1, 1, 1).to(q.dtype)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    terms = as_terms(bias)
    if not terms:
        bias_t, w = None, None
    elif len(terms) == 1:  # R itself (a view, never copied) and its weight
        w, bias_t = terms[0]
    else:
        bias_t, w = bias_rows(terms, 0, n, n), None
    w = torch.ones(h, dtype=torch.float32, device=q.device) if w is None else w.reshape(-1).float().expand(h).contiguous()
    pad = None if padding is None else padding.to(torch.int8).contiguous()
    if b == 0 or n == 0:  # nothing to launch; the plain formula keeps every input in the graph
        logits = q @ k.transpose(-1, -2)
        if bias_t is not None:
            logits = logits + bias_t * w.view(h, 1, 1)
        return torch.softmax(logits, dim=-1) @ v
    return _TritonBiasAttention.apply(q, k, v, bias_t, w, pad, causal)


def attend(scores: Scores, v: Tensor, padding: Tensor | None, causal: bool, dropout: float, training: bool) -> Tensor:
    """q, k (B, H, n, dq), the features' weight and the bias terms of ``scores``; v (B, H, n, dv) ->
    (B, H, n, dv). No dropout (see ``runs``)."""
    return triton_bias_attention(scores.q, scores.k, v, scores.terms, padding, causal, scores.q_weight)
