// wide_qk's blocks compiled for the CPU (float32): softmax(mask(q k^T)) v and its gradients, with q and k
// of d_qk features and v of d_v, one (example, head) pair per thread at a time. Built on first use by
// ops/compiled.py; the PyTorch blocks of ops/wide_qk.py compute the same and are what it is tested against.
//
// Per pair, blocks of BLOCK_ROWS query rows against the keys they may see (all of them; causal: up to the
// block's last row). The products go to the BLAS that torch links (its Fortran sgemm_, single-threaded
// inside the parallel region); the softmax, the probabilities recomputed from the saved log-sum-exp and
// dS = P (dP - delta) run on the block while it is in cache, which is what the PyTorch blocks cannot do:
// each of their passes goes through memory. Masked logits are set to MASKED, a large finite number
// (the file is compiled with -ffast-math, which assumes no infinities), and a row with no key to attend to
// gives zeros, its log-sum-exp EMPTY_LSE so that the backward's exp(S - lse) is 0 there too.

#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

extern "C" void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                       const int*, const float*, const int*, const float*, float*, const int*);

namespace {

constexpr int BLOCK_ROWS = 64;  // a block of logits and one of dP: 2 x 64 x n floats, in L2 up to n = 2048
constexpr float MASKED = -1e30f;
constexpr float EMPTY_LSE = 1e30f;

// Row-major C (M x N) = op(A) op(B) + beta C: the column-major sgemm of the transposed problem.
void gemm(bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B, int ldb, float beta,
          float* C, int ldc) {
  if (M == 0 || N == 0) return;
  const char ca = ta ? 'T' : 'N', cb = tb ? 'T' : 'N';
  const float one = 1.f;
  sgemm_(&cb, &ca, &N, &M, &K, &one, B, &ldb, A, &lda, &beta, C, &ldc);
}

struct Shape {
  int pairs, n, dq, dv, heads;
};

Shape shape_of(const torch::Tensor& q, const torch::Tensor& v, int64_t heads) {
  TORCH_CHECK(q.dim() == 3 && v.dim() == 3 && q.size(0) == v.size(0) && q.size(1) == v.size(1),
              "wide_qk_cpu: q (pairs, n, d_qk) and v (pairs, n, d_v) expected");
  return {int(q.size(0)), int(q.size(1)), int(q.size(2)), int(v.size(2)), int(heads)};
}

// The keys a pair's row may see: 1 where allowed, 0 where padded (nullptr: every key).
const uint8_t* keys_of(const torch::Tensor& padding, int pair, const Shape& s) {
  return padding.numel() == 0 ? nullptr : padding.data_ptr<uint8_t>() + int64_t(pair / s.heads) * s.n;
}

// Row r of the logits against m keys, masked in place: padded keys and, when causal, keys after r.
void mask_row(float* row, int r, int m, const uint8_t* allowed, bool causal) {
  const int limit = causal ? std::min(m, r + 1) : m;
  if (allowed != nullptr) {
#pragma omp simd
    for (int j = 0; j < limit; ++j) row[j] = allowed[j] ? row[j] : MASKED;
  }
  for (int j = limit; j < m; ++j) row[j] = MASKED;
}

}  // namespace

// out (pairs, n, d_v) and the log-sum-exp of every row (pairs, n).
std::vector<torch::Tensor> forward(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor padding,
                                   int64_t heads, bool causal) {
  const Shape s = shape_of(q, v, heads);
  auto out = torch::empty({s.pairs, s.n, s.dv}, q.options());
  auto lse = torch::empty({s.pairs, s.n}, q.options());
  const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
  float *op = out.data_ptr<float>(), *lp = lse.data_ptr<float>();
  at::parallel_for(0, s.pairs, 1, [&](int64_t p0, int64_t p1) {
    std::vector<float> logits(size_t(BLOCK_ROWS) * s.n), inv(BLOCK_ROWS);
    for (int64_t p = p0; p < p1; ++p) {
      const float *qq = qp + p * s.n * s.dq, *kk = kp + p * s.n * s.dq, *vv = vp + p * s.n * s.dv;
      float *oo = op + p * s.n * s.dv, *ll = lp + p * s.n;
      const uint8_t* allowed = keys_of(padding, int(p), s);
      for (int r0 = 0; r0 < s.n; r0 += BLOCK_ROWS) {
        const int t = std::min(BLOCK_ROWS, s.n - r0), m = causal ? r0 + t : s.n;
        gemm(false, true, t, m, s.dq, qq + size_t(r0) * s.dq, s.dq, kk, s.dq, 0.f, logits.data(), s.n);
        for (int i = 0; i < t; ++i) {
          float* row = logits.data() + size_t(i) * s.n;
          mask_row(row, r0 + i, m, allowed, causal);
          float top = MASKED;
          for (int j = 0; j < m; ++j) top = std::max(top, row[j]);
          if (top <= 0.5f * MASKED) {  // no key to attend to: zeros
            std::fill(row, row + m, 0.f);
            inv[i] = 0.f;
            ll[r0 + i] = EMPTY_LSE;
            continue;
          }
          float sum = 0.f;
#pragma omp simd reduction(+ : sum)
          for (int j = 0; j < m; ++j) {
            const float e = std::exp(row[j] - top);
            row[j] = e;
            sum += e;
          }
          inv[i] = 1.f / sum;
          ll[r0 + i] = top + std::log(sum);
        }
        // P V with P unnormalised, then each row of the (t, d_v) result scaled: fewer numbers than P's.
        float* o = oo + size_t(r0) * s.dv;
        gemm(false, false, t, s.dv, m, logits.data(), s.n, vv, s.dv, 0.f, o, s.dv);
        for (int i = 0; i < t; ++i)
          for (int j = 0; j < s.dv; ++j) o[size_t(i) * s.dv + j] *= inv[i];
      }
    }
  });
  return {out, lse};
}

// dq, dk (pairs, n, d_qk) and dv (pairs, n, d_v).
std::vector<torch::Tensor> backward(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor out,
                                    torch::Tensor lse, torch::Tensor grad_out, torch::Tensor padding, int64_t heads,
                                    bool causal) {
  const Shape s = shape_of(q, v, heads);
  auto dq = torch::empty_like(q), dk = torch::empty_like(k), dv = torch::empty_like(v);
  const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
  const float *op = out.data_ptr<float>(), *lp = lse.data_ptr<float>(), *gp = grad_out.data_ptr<float>();
  float *dqp = dq.data_ptr<float>(), *dkp = dk.data_ptr<float>(), *dvp = dv.data_ptr<float>();
  const int blocks = (s.n + BLOCK_ROWS - 1) / BLOCK_ROWS;
  at::parallel_for(0, s.pairs, 1, [&](int64_t p0, int64_t p1) {
    std::vector<float> probs(size_t(BLOCK_ROWS) * s.n), dlogits(size_t(BLOCK_ROWS) * s.n), delta(s.n);
    for (int64_t p = p0; p < p1; ++p) {
      const float *qq = qp + p * s.n * s.dq, *kk = kp + p * s.n * s.dq, *vv = vp + p * s.n * s.dv;
      const float *oo = op + p * s.n * s.dv, *ll = lp + p * s.n, *go = gp + p * s.n * s.dv;
      float *dQ = dqp + p * s.n * s.dq, *dK = dkp + p * s.n * s.dq, *dV = dvp + p * s.n * s.dv;
      const uint8_t* allowed = keys_of(padding, int(p), s);
      for (int i = 0; i < s.n; ++i) {  // delta = rowsum(P * dP) = rowsum(dO * O)
        float d = 0.f;
        for (int j = 0; j < s.dv; ++j) d += go[size_t(i) * s.dv + j] * oo[size_t(i) * s.dv + j];
        delta[i] = d;
      }
      // The last block first: it sees every key (causal too), so it writes dk and dv, the others add to them.
      for (int b = blocks - 1; b >= 0; --b) {
        const int r0 = b * BLOCK_ROWS, t = std::min(BLOCK_ROWS, s.n - r0), m = causal ? r0 + t : s.n;
        const float beta = b == blocks - 1 ? 0.f : 1.f;
        const float* q_blk = qq + size_t(r0) * s.dq;
        const float* go_blk = go + size_t(r0) * s.dv;
        gemm(false, true, t, m, s.dq, q_blk, s.dq, kk, s.dq, 0.f, probs.data(), s.n);
        for (int i = 0; i < t; ++i) {
          float* row = probs.data() + size_t(i) * s.n;
          mask_row(row, r0 + i, m, allowed, causal);
          const float l = ll[r0 + i];
#pragma omp simd
          for (int j = 0; j < m; ++j) row[j] = std::exp(row[j] - l);
        }
        gemm(false, true, t, m, s.dv, go_blk, s.dv, vv, s.dv, 0.f, dlogits.data(), s.n);  // dP
        gemm(true, false, m, s.dv, t, probs.data(), s.n, go_blk, s.dv, beta, dV, s.dv);  // dv += P^T dO
        for (int i = 0; i < t; ++i) {  // dS = P (dP - delta)
          float* d = dlogits.data() + size_t(i) * s.n;
          const float* pr = probs.data() + size_t(i) * s.n;
          const float de = delta[r0 + i];
#pragma omp simd
          for (int j = 0; j < m; ++j) d[j] = pr[j] * (d[j] - de);
        }
        gemm(false, false, t, s.dq, m, dlogits.data(), s.n, kk, s.dq, 0.f, dQ + size_t(r0) * s.dq, s.dq);
        gemm(true, false, m, s.dq, t, dlogits.data(), s.n, q_blk, s.dq, beta, dK, s.dq);  // dk += dS^T q
      }
    }
  });
  return {dq, dk, dv};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "wide_qk forward: out, lse");
  m.def("backward", &backward, "wide_qk backward: dq, dk, dv");
}
