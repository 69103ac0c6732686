// The eager implementation: the plain reference. Per (batch, query head) it materializes the
// [seq_q, seq_k] score matrix, applies the mask, takes a row softmax and multiplies by V, all
// in float32 with straightforward loops (vectorized by the compiler only).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/thread_pool.hpp"
#include "cpu/problem.hpp"

namespace backplane::attention::cpu {
namespace {

template <DType T>
void eager_head(const Problem& p, int64_t b, int64_t h) {
  using S = Storage<T>;
  using E = typename S::type;
  const int64_t sq = p.seq_q, sk = p.seq_k, d = p.head_dim, dv = p.head_dim_v;
  const int64_t hk = h / p.group();
  const auto* q = static_cast<const E*>(p.q.data) + b * p.q.stride[0] + h * p.q.stride[1];
  const auto* k = static_cast<const E*>(p.k.data) + b * p.k.stride[0] + hk * p.k.stride[1];
  const auto* v = static_cast<const E*>(p.v.data) + b * p.v.stride[0] + hk * p.v.stride[1];
  auto* out =
      static_cast<E*>(const_cast<void*>(p.out.data)) + b * p.out.stride[0] + h * p.out.stride[1];

  std::vector<float> kt(static_cast<size_t>(d * sk));  // K transposed: [d][sk]
  for (int64_t j = 0; j < sk; ++j)
    for (int64_t c = 0; c < d; ++c)
      kt[c * sk + j] = S::load(k[j * p.k.stride[2] + c * p.k.stride[3]]);
  std::vector<float> vf(static_cast<size_t>(sk * dv));
  for (int64_t j = 0; j < sk; ++j)
    for (int64_t c = 0; c < dv; ++c)
      vf[j * dv + c] = S::load(v[j * p.v.stride[2] + c * p.v.stride[3]]);

  // Rows are reached through data(): with no keys the vectors are empty, and &v[0] of an empty
  // vector is undefined (UBSan).
  std::vector<float> scores(static_cast<size_t>(sq * sk), 0.0f);  // the full score matrix
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < sq; ++i) {
    float* s = scores.data() + i * sk;
    for (int64_t c = 0; c < d; ++c) {
      const float qc = S::load(q[i * p.q.stride[2] + c * p.q.stride[3]]);
      const float* kc = kt.data() + c * sk;
      for (int64_t j = 0; j < sk; ++j) s[j] += qc * kc[j];
    }
    for (int64_t j = 0; j < sk; ++j) {
      s[j] = s[j] * p.scale + mask_bias(p, b, h, i, j);
      if (p.causal && j > p.causal_last_key(i)) s[j] = neg_inf;
    }
  }

  std::vector<float> o(static_cast<size_t>(dv));
  for (int64_t i = 0; i < sq; ++i) {
    float* s = scores.data() + i * sk;
    float m = neg_inf;
    for (int64_t j = 0; j < sk; ++j) m = std::max(m, s[j]);
    std::fill(o.begin(), o.end(), 0.0f);
    float lse = neg_inf;
    if (m != neg_inf) {  // else every key is masked: the row is zeros
      float sum = 0.0f;
      for (int64_t j = 0; j < sk; ++j) {
        s[j] = std::exp(s[j] - m);
        sum += s[j];
      }
      lse = m + std::log(sum);
      for (int64_t j = 0; j < sk; ++j) {
        const float pj = s[j] / sum;
        const float* vj = vf.data() + j * dv;
        for (int64_t c = 0; c < dv; ++c) o[c] += pj * vj[c];
      }
    }
    for (int64_t c = 0; c < dv; ++c)
      out[i * p.out.stride[2] + c * p.out.stride[3]] = S::store(o[c]);
    if (p.lse.data) {
      float* l = static_cast<float*>(const_cast<void*>(p.lse.data));
      l[b * p.lse.stride[0] + h * p.lse.stride[1] + i * p.lse.stride[2]] = lse;
    }
  }
}

template <DType T>
void eager_all(const Problem& p, int threads) {
  kernels::ThreadPool::global().parallel_for(p.batch * p.heads_q, threads, [&](int64_t item, int) {
    eager_head<T>(p, item / p.heads_q, item % p.heads_q);
  });
}

}  // namespace

void run_eager(const Problem& p, int threads) {
  switch (p.dtype) {
    case DType::kF32:
      return eager_all<DType::kF32>(p, threads);
    case DType::kBF16:
      return eager_all<DType::kBF16>(p, threads);
    case DType::kF16:
      return eager_all<DType::kF16>(p, threads);
  }
}

}  // namespace backplane::attention::cpu
