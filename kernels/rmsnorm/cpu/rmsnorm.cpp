// The CPU RMSNorm: per row, one pass for the sum of squares (with the residual add, which
// writes the rounded sum back), one for the scaled product; the row stays in L1 between the
// two. Rows are split over the shared pool. Compiled once per SIMD target (Highway
// foreach_target) and dispatched at runtime.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rmsnorm/cpu/rmsnorm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// foreach_target.h first: it re-includes this file once per target.
#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <new>
#include <type_traits>

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
using kernels::HWY_NAMESPACE::LoadTwoF;
using kernels::HWY_NAMESPACE::RoundTo;
using kernels::HWY_NAMESPACE::StoreF;
using kernels::HWY_NAMESPACE::StoreTwoF;
using kernels::HWY_NAMESPACE::StreamAligned;
using kernels::HWY_NAMESPACE::StreamF;
using kernels::HWY_NAMESPACE::Tail;
using kernels::HWY_NAMESPACE::VF;

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// The sum of squares of a bfloat16 row's first *done elements (a multiple of 128) by AVX512-BF16's
// dot product: one vdpbf16ps squares 32 elements and adds them, in pairs, into 16 float32 sums. A
// bfloat16 square is exact in float32. Inline assembly, as in common/simd-inl.h.
HWY_INLINE float DotSquaresBf16(const void* x, int64_t n, int64_t* done) {
  const auto* p = static_cast<const uint16_t*>(x);
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    const __m512i v0 = _mm512_loadu_si512(p + i), v1 = _mm512_loadu_si512(p + i + 32);
    const __m512i v2 = _mm512_loadu_si512(p + i + 64), v3 = _mm512_loadu_si512(p + i + 96);
    asm("vdpbf16ps %1, %1, %0" : "+v"(a0) : "v"(v0));
    asm("vdpbf16ps %1, %1, %0" : "+v"(a1) : "v"(v1));
    asm("vdpbf16ps %1, %1, %0" : "+v"(a2) : "v"(v2));
    asm("vdpbf16ps %1, %1, %0" : "+v"(a3) : "v"(v3));
  }
  *done = i;
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}
#endif

// Sum of squares of x (or of the rounded x + residual, stored into residual).
template <DType T, bool kResidual>
HWY_INLINE float SumSquares(const void* x, void* residual, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VF a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  int64_t i = 0;
  float dot = 0.0f;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if constexpr (T == DType::kBF16 && !kResidual) {
    if (kernels::g_bf16_instruction) dot = DotSquaresBf16(x, n, &i);
  }
#endif
  auto value = [&](const void* xs, void* rs, int64_t at) {
    if constexpr (kResidual) {
      const VF v = RoundTo<T>(d, hn::Add(LoadF<T>(d, xs, at), LoadF<T>(d, rs, at)));
      StoreF<T>(d, v, rs, at);
      return v;
    } else {
      (void)rs;
      return LoadF<T>(d, xs, at);
    }
  };
  // value() for lanes [at, at + 2N), in LoadTwoF's order.
  auto two = [&](int64_t at, VF& v0, VF& v1) {
    LoadTwoF<T>(d, x, at, v0, v1);
    if constexpr (kResidual) {
      VF r0, r1;
      LoadTwoF<T>(d, residual, at, r0, r1);
      StoreTwoF<T, false>(d, hn::Add(v0, r0), hn::Add(v1, r1), residual, at);
      LoadTwoF<T>(d, residual, at, v0, v1);  // the sums as stored, rounded to T
    }
  };
  for (; i + 4 * N <= n; i += 4 * N) {
    VF v0, v1, v2, v3;
    two(i, v0, v1);
    two(i + 2 * N, v2, v3);
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
  return dot + hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

// `weight_two`: for bfloat16, the weight's first n - n % 2N elements as float32 in LoadTwoF's
// order (WeightTwo); unused for other dtypes.
template <DType T>
HWY_INLINE void Scale(const void* x, const void* weight, const float* weight_two, float inv_rms,
                      void* out, int64_t n, bool stream, const char* next_row) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF s = hn::Set(d, inv_rms);
  int64_t i = 0;
  auto scaled = [&](int64_t at) {
    return hn::Mul(hn::Mul(LoadF<T>(d, x, at), s), LoadF<T>(d, weight, at));
  };
  // Lanes [at, at + 2N) scaled and stored, in LoadTwoF's order.
  auto scale_two = [&](int64_t at, auto stream_tag) {
    VF x0, x1, w0, w1;
    LoadTwoF<T>(d, x, at, x0, x1);
    if constexpr (T == DType::kBF16) {
      w0 = hn::LoadU(d, weight_two + at);
      w1 = hn::LoadU(d, weight_two + at + N);
    } else {
      (void)weight_two;
      LoadTwoF<T>(d, weight, at, w0, w1);
    }
    StoreTwoF<T, decltype(stream_tag)::value>(d, hn::Mul(hn::Mul(x0, s), w0),
                                              hn::Mul(hn::Mul(x1, s), w1), out, at);
  };
  if (stream && StreamAligned<T>(d, out)) {
    const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
    for (; i + 2 * N <= n; i += 2 * N) {
      if (next_row) {
        for (int64_t b = i * es; b < (i + 2 * N) * es; b += 64) hwy::Prefetch(next_row + b);
      }
      scale_two(i, std::true_type{});
    }
  }
  for (; i + 2 * N <= n; i += 2 * N) scale_two(i, std::false_type{});
  for (; i + N <= n; i += N) StoreF<T>(d, scaled(i), out, i);
  if (i < n) {
    Tail<T> xt, wt, ot;
    const VF v = hn::Mul(hn::Mul(LoadF<T>(d, xt.load(x, i, n - i), 0), s),
                         LoadF<T>(d, wt.load(weight, i, n - i), 0));
    StoreF<T>(d, v, ot.buf, 0);
    ot.store(out, i, n - i);
  }
}

// A bfloat16 weight, read by every row, converted once: what Scale's weight_two expects.
template <DType T>
hwy::AlignedFreeUniquePtr<float[]> WeightTwo(const Problem& p) {
  if constexpr (T != DType::kBF16) {
    (void)p;
    return nullptr;
  } else {
    const DF d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    auto w = hwy::AllocateAligned<float>(static_cast<size_t>(p.hidden));
    if (!w) throw std::bad_alloc();
    for (int64_t at = 0; at + 2 * N <= p.hidden; at += 2 * N) {
      VF w0, w1;
      LoadTwoF<T>(d, p.weight, at, w0, w1);
      hn::StoreU(w0, d, w.get() + at);
      hn::StoreU(w1, d, w.get() + at + N);
    }
    return w;
  }
}

template <DType T, bool kResidual>
void NormRows(const Problem& p, const float* weight_two, int64_t begin, int64_t end, bool stream) {
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
    Scale<T>(kResidual ? residual : x, p.weight, weight_two, inv_rms, out, p.hidden, stream, next);
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
  const hwy::AlignedFreeUniquePtr<float[]> weight_two = WeightTwo<T>(p);
  kernels::parallel_ranges(p.rows, row_bytes, [&](int64_t begin, int64_t end) {
    if (p.residual.data) {
      NormRows<T, true>(p, weight_two.get(), begin, end, stream);
    } else {
      NormRows<T, false>(p, weight_two.get(), begin, end, stream);
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
  return kernels::guarded_call("rms_norm", " for the float32 copy of the weight", [&] {
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
