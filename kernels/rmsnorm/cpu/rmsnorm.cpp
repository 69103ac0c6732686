// The CPU RMSNorm: per row, one pass for the sum of squares (with the residual add, which
// writes the rounded sum back), one for the scaled product; the row stays in L1 between the
// two. Rows are split over the shared pool. Compiled once per SIMD target (Highway
// foreach_target) and dispatched at runtime.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rmsnorm/cpu/rmsnorm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// foreach_target.h first: it re-includes this file once per target.
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <new>

#include "common/parallel.hpp"
#include "common/simd-inl.h"
#include "rmsnorm/problem.hpp"

HWY_BEFORE_NAMESPACE();
namespace backplane::rmsnorm {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using kernels::DType;
using kernels::HWY_NAMESPACE::DF;
using kernels::HWY_NAMESPACE::kPrefetchBytes;
using kernels::HWY_NAMESPACE::LoadF;
using kernels::HWY_NAMESPACE::RoundTo;
using kernels::HWY_NAMESPACE::StoreF;
using kernels::HWY_NAMESPACE::StorePairF;
using kernels::HWY_NAMESPACE::StreamAligned;
using kernels::HWY_NAMESPACE::StreamF;
using kernels::HWY_NAMESPACE::Tail;
using kernels::HWY_NAMESPACE::VF;

// Sum of squares of x (or of the rounded x + residual, stored into residual).
template <DType T, bool kResidual>
HWY_INLINE float SumSquares(const void* x, void* residual, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VF a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  auto value = [&](const void* xs, void* rs, int64_t i) {
    if constexpr (kResidual) {
      const VF v = RoundTo<T>(d, hn::Add(LoadF<T>(d, xs, i), LoadF<T>(d, rs, i)));
      StoreF<T>(d, v, rs, i);
      return v;
    } else {
      (void)rs;
      return LoadF<T>(d, xs, i);
    }
  };
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const VF v0 = value(x, residual, i), v1 = value(x, residual, i + N);
    const VF v2 = value(x, residual, i + 2 * N), v3 = value(x, residual, i + 3 * N);
    a0 = hn::MulAdd(v0, v0, a0);
    a1 = hn::MulAdd(v1, v1, a1);
    a2 = hn::MulAdd(v2, v2, a2);
    a3 = hn::MulAdd(v3, v3, a3);
  }
  for (; i + N <= n; i += N) {
    const VF v = value(x, residual, i);
    a0 = hn::MulAdd(v, v, a0);
  }
  if (i < n) {  // zeros beyond the row add nothing
    Tail<T> xt, rt;
    const void* xs = xt.load(x, i, n - i);
    void* rs = kResidual ? rt.load(residual, i, n - i) : nullptr;
    const VF v = value(xs, rs, 0);
    a1 = hn::MulAdd(v, v, a1);
    if (kResidual) rt.store(residual, i, n - i);
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

template <DType T>
HWY_INLINE void Scale(const void* x, const void* weight, float inv_rms, void* out, int64_t n,
                      bool stream, const char* next_row) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF s = hn::Set(d, inv_rms);
  int64_t i = 0;
  auto scaled = [&](int64_t at) {
    return hn::Mul(hn::Mul(LoadF<T>(d, x, at), s), LoadF<T>(d, weight, at));
  };
  if (stream && StreamAligned<T>(d, out)) {
    const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
    for (; i + 2 * N <= n; i += 2 * N) {
      if (next_row) {
        for (int64_t b = i * es; b < (i + 2 * N) * es; b += 64) hwy::Prefetch(next_row + b);
      }
      StorePairF<T, true>(d, scaled(i), scaled(i + N), out, i);
    }
  }
  for (; i + 2 * N <= n; i += 2 * N) StorePairF<T, false>(d, scaled(i), scaled(i + N), out, i);
  for (; i + N <= n; i += N) StoreF<T>(d, scaled(i), out, i);
  if (i < n) {
    Tail<T> xt, wt, ot;
    const VF v = hn::Mul(hn::Mul(LoadF<T>(d, xt.load(x, i, n - i), 0), s),
                         LoadF<T>(d, wt.load(weight, i, n - i), 0));
    StoreF<T>(d, v, ot.buf, 0);
    ot.store(out, i, n - i);
  }
}

template <DType T, bool kResidual>
void NormRows(const Problem& p, int64_t begin, int64_t end, bool stream) {
  const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
  const int64_t ahead = std::max<int64_t>(1, kPrefetchBytes / (p.hidden * es));
  for (int64_t r = begin; r < end; ++r) {
    const char* x = p.input.data + p.input.offset(r) * es;
    char* residual = kResidual ? p.residual.data + p.residual.offset(r) * es : nullptr;
    char* out = p.output.data + p.output.offset(r) * es;
    const float sum = SumSquares<T, kResidual>(x, residual, p.hidden);
    const double mean = static_cast<double>(sum) / static_cast<double>(p.hidden);
    const auto inv_rms = static_cast<float>(1.0 / std::sqrt(mean + p.epsilon));
    const char* next = r + ahead < end ? p.input.data + p.input.offset(r + ahead) * es : nullptr;
    Scale<T>(kResidual ? residual : x, p.weight, inv_rms, out, p.hidden, stream, next);
  }
  if (stream) hwy::FlushStream();
}

template <DType T>
void RunTyped(const Problem& p) {
  const int64_t row_bytes =
      p.hidden * static_cast<int64_t>(kernels::dtype_size(T)) * (p.residual.data ? 4 : 2);
  // An output written in place over the input is in cache already: plain stores.
  const bool stream = p.output.data != p.input.data &&
                      p.rows * p.hidden * static_cast<int64_t>(kernels::dtype_size(T)) >=
                          kernels::HWY_NAMESPACE::kStreamBytes;
  kernels::parallel_ranges(p.rows, row_bytes, [&](int64_t begin, int64_t end) {
    if (p.residual.data) {
      NormRows<T, true>(p, begin, end, stream);
    } else {
      NormRows<T, false>(p, begin, end, stream);
    }
  });
}

void Run(const Problem& p) {
  switch (p.dtype) {
    case DType::kF32:
      return RunTyped<DType::kF32>(p);
    case DType::kBF16:
      return RunTyped<DType::kBF16>(p);
    case DType::kF16:
      return RunTyped<DType::kF16>(p);
  }
}

const char* TargetName() {
  return hwy::TargetName(HWY_TARGET);
}

}  // namespace HWY_NAMESPACE
}  // namespace backplane::rmsnorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace backplane::rmsnorm {

HWY_EXPORT(Run);
HWY_EXPORT(TargetName);

Status forward_cpu(const Tensors& tensors, double epsilon) {
  return kernels::guarded_call("rms_norm", "", [&] {
    Problem p;
    Status s = make_problem(tensors, epsilon, kernels::Memory::kHost, &p);
    if (!s.ok() || p.rows == 0 || p.hidden == 0) return s;
    HWY_DYNAMIC_DISPATCH(Run)(p);
    return s;
  });
}

const char* cpu_target() {
  return HWY_DYNAMIC_DISPATCH(TargetName)();
}

}  // namespace backplane::rmsnorm
#endif  // HWY_ONCE
