"""The Triton kernels of ``triton_bias`` (imported only through ``triton_bias.load``, which needs triton).

Logits of one (example b, head h) tile: ``s = q k^T + w_h B_h`` (no scaling: the features come
scaled), -inf where a key is padded, lies after the query (causal) or past the sequence (a ragged
last block). Three kernels, FlashAttention-2's split:
* ``forward``: one program per (query block, b, h) runs an online softmax over the key blocks in
  float32 and writes the output and each row's log-sum-exp (+inf on a row without a key);
* ``backward_kv``: one program per (key block, h) loops over the batch, and for each example over
  the query blocks: it recomputes the probabilities from the log-sum-exp, writes dk and dv of that
  example, and adds the tile's logit gradient dS into its own column strip of dB (H, n, n), so
  that strip, summed over the batch in a fixed order, is written by no other program: no atomics;
* ``backward_q``: one program per (query block, b, h) loops over the key blocks for dq.
Feature widths up to the block width are padded by masking (dense's d_h + 1 features included).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _dot(a, b, UPCAST: tl.constexpr):
    """a @ b accumulated in float32. ``UPCAST``: both operands taken to float32 first (the
    interpreter multiplies bfloat16 as raw bits; the same values on a GPU's bfloat16 units)."""
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return tl.dot(a, b, input_precision="ieee")


@triton.jit
def _logits(q, k, bias_ptr, stride_bm, stride_bn, w, pad_ptr, offs_m, offs_n, n,
            HAS_BIAS: tl.constexpr, HAS_PAD: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr):
    """The masked logits (BLOCK_M, BLOCK_N) in float32 of the query rows offs_m and keys offs_n."""
    s = _dot(q, tl.trans(k), UPCAST)
    inside = (offs_m[:, None] < n) & (offs_n[None, :] < n)
    if HAS_BIAS:
        b = tl.load(bias_ptr + offs_m[:, None] * stride_bm + offs_n[None, :] * stride_bn, mask=inside, other=0.0)
        s += b.to(tl.float32) * w
    keep = offs_n[None, :] < n
    if CAUSAL:
        keep = keep & (offs_n[None, :] <= offs_m[:, None])
    if HAS_PAD:
        padded = tl.load(pad_ptr + offs_n, mask=offs_n < n, other=1)
        keep = keep & (padded == 0)[None, :]
    return tl.where(keep, s, float("-inf"))


@triton.jit
def forward(Q, K, V, Bias, W, Pad, Out, Lse,
            sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
            sbh, sbm, sbn, sob, soh, som, sod, spb,
            H, N, D, DV,
            HAS_BIAS: tl.constexpr, HAS_PAD: tl.constexpr, CAUSAL: tl.constexpr,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
            UPCAST: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd,
                mask=(offs_m[:, None] < N) & (offs_d[None, :] < D), other=0.0)
    w = tl.load(W + h)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    hi = N
    if CAUSAL:  # key blocks after the last row of this block are all masked
        hi = tl.minimum(N, (pid_m + 1) * BLOCK_M)
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(K + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :] * skd,
                    mask=(offs_n[:, None] < N) & (offs_d[None, :] < D), other=0.0)
        s = _logits(q, k, Bias + h * sbh, sbm, sbn, w, Pad + b * spb, offs_m, offs_n, N, HAS_BIAS, HAS_PAD, CAUSAL, UPCAST)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key so far: no NaN from -inf - -inf
        p = tl.exp(s - m_safe[:, None])
        rescale = tl.exp(m_i - m_safe)
        l_i = l_i * rescale + tl.sum(p, 1)
        v = tl.load(V + b * svb + h * svh + offs_n[:, None] * svn + offs_dv[None, :] * svd,
                    mask=(offs_n[:, None] < N) & (offs_dv[None, :] < DV), other=0.0)
        acc = acc * rescale[:, None] + _dot(p.to(v.dtype), v, UPCAST)
        m_i = m_new
    has_key = l_i > 0.0
    out = acc / tl.where(has_key, l_i, 1.0)[:, None]  # a row without a key: zeros (the spec's rule)
    lse = tl.where(has_key, m_i + tl.log(tl.where(has_key, l_i, 1.0)), float("inf"))
    tl.store(Out + b * sob + h * soh + offs_m[:, None] * som + offs_dv[None, :] * sod, out.to(Out.dtype.element_ty),
             mask=(offs_m[:, None] < N) & (offs_dv[None, :] < DV))
    tl.store(Lse + pid_bh * N + offs_m, lse, mask=offs_m < N)


@triton.jit
def backward_kv(Q, K, V, Bias, W, Pad, DO, Lse, Delta, DK, DV_, DB,
                sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
                sbh, sbm, sbn, sdob, sdoh, sdom, sdod, spb,
                B, H, N, D, DV,
                HAS_BIAS: tl.constexpr, HAS_PAD: tl.constexpr, CAUSAL: tl.constexpr, NEED_DB: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
            UPCAST: tl.constexpr):
    """dk, dv (B, H, N, D|DV, contiguous) and dB (H, N, N, contiguous float32, zeroed) = sum_b dS."""
    pid_n = tl.program_id(0)
    h = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    w = tl.load(W + h)
    kv_rows = offs_n[:, None] < N
    lo = 0
    if CAUSAL:  # query blocks before the first key of this block see none of it
        lo = (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M
    for b in range(0, B):
        k = tl.load(K + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :] * skd,
                    mask=kv_rows & (offs_d[None, :] < D), other=0.0)
        v = tl.load(V + b * svb + h * svh + offs_n[:, None] * svn + offs_dv[None, :] * svd,
                    mask=kv_rows & (offs_dv[None, :] < DV), other=0.0)
        dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
        dv = tl.zeros([BLOCK_N, BLOCK_DV], tl.float32)
        for start_m in range(lo, N, BLOCK_M):
            offs_m = start_m + tl.arange(0, BLOCK_M)
            rows = offs_m < N
            q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd,
                        mask=rows[:, None] & (offs_d[None, :] < D), other=0.0)
            do = tl.load(DO + b * sdob + h * sdoh + offs_m[:, None] * sdom + offs_dv[None, :] * sdod,
                         mask=rows[:, None] & (offs_dv[None, :] < DV), other=0.0)
            lse = tl.load(Lse + (b * H + h) * N + offs_m, mask=rows, other=float("inf"))
            delta = tl.load(Delta + (b * H + h) * N + offs_m, mask=rows, other=0.0)
            s = _logits(q, k, Bias + h * sbh, sbm, sbn, w, Pad + b * spb, offs_m, offs_n, N, HAS_BIAS, HAS_PAD, CAUSAL, UPCAST)
            p = tl.exp(s - lse[:, None])  # 0 where masked, and on rows without a key (lse = +inf)
            dv += _dot(tl.trans(p.to(do.dtype)), do, UPCAST)
            dp = _dot(do, tl.trans(v), UPCAST)
            ds = p * (dp - delta[:, None])
            dk += _dot(tl.trans(ds.to(q.dtype)), q, UPCAST)
            if NEED_DB:  # this program alone owns columns offs_n of dB: read, add, write, in batch order
                db_ptrs = DB + h * N * N + offs_m[:, None] * N + offs_n[None, :]
                inside = rows[:, None] & (offs_n[None, :] < N)
                tl.store(db_ptrs, tl.load(db_ptrs, mask=inside, other=0.0) + ds, mask=inside)
                tl.debug_barrier()  # the next example's read of this tile sees every thread's write
        tl.store(DK + ((b * H + h) * N + offs_n[:, None]) * D + offs_d[None, :], dk.to(DK.dtype.element_ty),
                 mask=kv_rows & (offs_d[None, :] < D))
        tl.store(DV_ + ((b * H + h) * N + offs_n[:, None]) * DV + offs_dv[None, :], dv.to(DV_.dtype.element_ty),
                 mask=kv_rows & (offs_dv[None, :] < DV))


@triton.jit
def backward_q(Q, K, V, Bias, W, Pad, DO, Lse, Delta, DQ,
               sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
               sbh, sbm, sbn, sdob, sdoh, sdom, sdod, spb,
               H, N, D, DV,
               HAS_BIAS: tl.constexpr, HAS_PAD: tl.constexpr, CAUSAL: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
            UPCAST: tl.constexpr):
    """dq (B, H, N, D, contiguous)."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    rows = offs_m < N
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd,
                mask=rows[:, None] & (offs_d[None, :] < D), other=0.0)
    do = tl.load(DO + b * sdob + h * sdoh + offs_m[:, None] * sdom + offs_dv[None, :] * sdod,
                 mask=rows[:, None] & (offs_dv[None, :] < DV), other=0.0)
    lse = tl.load(Lse + pid_bh * N + offs_m, mask=rows, other=float("inf"))
    delta = tl.load(Delta + pid_bh * N + offs_m, mask=rows, other=0.0)
    w = tl.load(W + h)
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    hi = N
    if CAUSAL:
        hi = tl.minimum(N, (pid_m + 1) * BLOCK_M)
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(K + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :] * skd,
                    mask=(offs_n[:, None] < N) & (offs_d[None, :] < D), other=0.0)
        v = tl.load(V + b * svb + h * svh + offs_n[:, None] * svn + offs_dv[None, :] * svd,
                    mask=(offs_n[:, None] < N) & (offs_dv[None, :] < DV), other=0.0)
        s = _logits(q, k, Bias + h * sbh, sbm, sbn, w, Pad + b * spb, offs_m, offs_n, N, HAS_BIAS, HAS_PAD, CAUSAL, UPCAST)
        p = tl.exp(s - lse[:, None])
        dp = _dot(do, tl.trans(v), UPCAST)
        ds = p * (dp - delta[:, None])
        dq += _dot(ds.to(k.dtype), k, UPCAST)
    tl.store(DQ + (pid_bh * N + offs_m[:, None]) * D + offs_d[None, :], dq.to(DQ.dtype.element_ty),
             mask=rows[:, None] & (offs_d[None, :] < D))
