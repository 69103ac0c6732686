// The CPU RMSNorm: per row, one pass for the sum of squares (with the residual add, which
// writes the rounded sum back), one for the scaled product; the row stays in L1 between the
// two. 16-bit rows without a residual take the next row's sum of squares in the same loop as
// this row's product (NormRowsOverlapped). Rows are split over the shared pool. Compiled once
// per SIMD target (Highway foreach_target) and dispatched at runtime.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rmsnorm/cpu/rmsnorm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// foreach_target.h first: it re-includes this file once per target.
#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>
#if HWY_ARCH_X86
#include <xmmintrin.h>  // _mm_prefetch
#endif

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
using kernels::HWY_NAMESPACE::NaNs;
using kernels::HWY_NAMESPACE::PrefetchToL2;
using kernels::HWY_NAMESPACE::RoundTo;
using kernels::HWY_NAMESPACE::StoreF;
using kernels::HWY_NAMESPACE::StoreTwoF;
using kernels::HWY_NAMESPACE::StreamF;
using kernels::HWY_NAMESPACE::StreamStart;
using kernels::HWY_NAMESPACE::Tail;
using kernels::HWY_NAMESPACE::VF;

// Sum of squares of x (or of the rounded x + residual, stored into residual). Without a residual
// a 16-bit row comes here only for the part past the overlapped loop's blocks of four vectors.
template <DType T, bool kResidual>
HWY_INLINE float SumSquares(const void* x, void* residual, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VF a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  int64_t i = 0;
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
      StoreTwoF<T, false, NaNs::kFromBf16>(d, hn::Add(v0, r0), hn::Add(v1, r1), residual, at);
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
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

// The weight as the scaling loops read it. Lanes from `pairs_from` on are taken two vectors at a
// time (ScaleTwo), the lanes before it one at a time: pairs_from is where a row's output first
// lines up for streaming stores (StreamStart), 0 for outputs that start on a line, up to one
// register less one lane for a caller's malloc'd buffer. `two`: for bfloat16, the weight as
// float32 in LoadTwoF's order of the pairs from pairs_from (WeightFor), converted once for every
// row; unused for other dtypes. Passed by value: a copy the stores cannot alias, so its fields
// stay in registers through the loops.
struct Weight {
  const void* data = nullptr;
  const float* two = nullptr;
  int64_t pairs_from = 0;
};

// Lanes [at, at + 2N) of x times inv_rms (in s) and the weight, stored in out in LoadTwoF's order;
// at is pairs_from plus a multiple of 2N.
template <DType T, bool kStream>
HWY_INLINE void ScaleTwo(DF d, const void* x, Weight w, VF s, void* out, int64_t at) {
  VF x0, x1, w0, w1;
  LoadTwoF<T>(d, x, at, x0, x1);
  if constexpr (T == DType::kBF16) {
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    w0 = hn::LoadU(d, w.two + at);
    w1 = hn::LoadU(d, w.two + at + N);
  } else {
    LoadTwoF<T>(d, w.data, at, w0, w1);
  }
  StoreTwoF<T, kStream, NaNs::kFromBf16>(d, hn::Mul(hn::Mul(x0, s), w0),
                                         hn::Mul(hn::Mul(x1, s), w1), out, at);
}

// Lanes [from, to) of x times inv_rms and the weight, into out: pairs from `from` (pairs_from
// plus a multiple of 2N, or a span shorter than 2N), streamed where `stream` and out + from is on
// a line; then single vectors. `next_row` (or none) is prefetched into L1 alongside the streamed
// pairs.
template <DType T>
HWY_INLINE void ScaleRange(const void* x, Weight w, float inv_rms, void* out, int64_t from,
                           int64_t to, bool stream, const char* next_row) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF s = hn::Set(d, inv_rms);
  int64_t i = from;
  auto scaled = [&](int64_t at) {
    return hn::Mul(hn::Mul(LoadF<T>(d, x, at), s), LoadF<T>(d, w.data, at));
  };
  if (stream && StreamStart<T>(d, out, from) == from) {
    const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
    for (; i + 2 * N <= to; i += 2 * N) {
      if (next_row) {
        for (int64_t b = i * es; b < (i + 2 * N) * es; b += 64) hwy::Prefetch(next_row + b);
      }
      ScaleTwo<T, true>(d, x, w, s, out, i);
    }
  }
  for (; i + 2 * N <= to; i += 2 * N) ScaleTwo<T, false>(d, x, w, s, out, i);
  for (; i + N <= to; i += N) StoreF<T>(d, scaled(i), out, i);
  if (i < to) {
    Tail<T> xt, wt, ot;
    const VF v = hn::Mul(hn::Mul(LoadF<T>(d, xt.load(x, i, to - i), 0), s),
                         LoadF<T>(d, wt.load(w.data, i, to - i), 0));
    StoreF<T>(d, v, ot.buf, 0);
    ot.store(out, i, to - i);
  }
}

// A whole n-lane row of x times inv_rms and the weight, into out.
template <DType T>
HWY_INLINE void Scale(const void* x, Weight w, float inv_rms, void* out, int64_t n, bool stream,
                      const char* next_row) {
  const int64_t head = std::min(w.pairs_from, n);
  ScaleRange<T>(x, w, inv_rms, out, 0, head, false, nullptr);
  ScaleRange<T>(x, w, inv_rms, out, head, n, stream, next_row);
}

// The weight's pairs from `pairs_from` as Scale reads them: for bfloat16, converted to float32
// once, in LoadTwoF's order.
template <DType T>
Weight WeightFor(const Problem& p, int64_t pairs_from, hwy::AlignedFreeUniquePtr<float[]>& two) {
  Weight w;
  w.data = p.weight;
  w.pairs_from = pairs_from;
  if constexpr (T == DType::kBF16) {
    const DF d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    two = hwy::AllocateAligned<float>(static_cast<size_t>(p.hidden));
    if (!two) throw std::bad_alloc();
    for (int64_t at = pairs_from; at + 2 * N <= p.hidden; at += 2 * N) {
      VF w0, w1;
      LoadTwoF<T>(d, p.weight, at, w0, w1);
      hn::StoreU(w0, d, two.get() + at);
      hn::StoreU(w1, d, two.get() + at + N);
    }
    w.two = two.get();
  }
  return w;
}

// Adds the squares of lanes [at, at + 2N) of a row into a0 and a1. For bfloat16 where the CPU
// has AVX512-BF16, one vdpbf16ps squares all 32 and adds them, in pairs, into a0's 16 float32
// sums (a bfloat16 square is exact in float32). Inline assembly, as in common/simd-inl.h.
template <DType T>
HWY_INLINE void AddSquaresTwo(DF d, const void* x, int64_t at, VF& a0, VF& a1) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if constexpr (T == DType::kBF16) {
    if (kernels::g_bf16_instruction) {
      const __m512i v = _mm512_loadu_si512(static_cast<const uint16_t*>(x) + at);
      asm("vdpbf16ps %1, %1, %0" : "+v"(a0.raw) : "v"(v));
      return;
    }
  }
#endif
  VF v0, v1;
  LoadTwoF<T>(d, x, at, v0, v1);
  a0 = hn::MulAdd(v0, v0, a0);
  a1 = hn::MulAdd(v1, v1, a1);
}

// Adds the squares of lanes [at, at + 4N) of a row into a0..a3.
template <DType T>
HWY_INLINE void AddSquaresFour(DF d, const void* x, int64_t at, VF& a0, VF& a1, VF& a2, VF& a3) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  AddSquaresTwo<T>(d, x, at, a0, a1);
  AddSquaresTwo<T>(d, x, at + 2 * N, a2, a3);
}

HWY_INLINE float SumOfSums(DF d, VF a0, VF a1, VF a2, VF a3) {
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

// The lanes of an n-wide row that the overlapped loop takes, four vectors at a time.
HWY_INLINE int64_t FourVectorLanes(int64_t n) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(DF()));
  return n - n % (4 * N);
}

// A row's sum of squares in the overlapped loop's order: lanes [0, m) four vectors at a time,
// then the rest by SumSquares. A row sums alike whether it opens a range (here) or is read
// beside the previous row's product (ScaleWithNext), so the result does not depend on how the
// rows are split over threads.
template <DType T>
HWY_INLINE float OverlappedSquares(const char* x, int64_t n) {
  const DF d;
  VF a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  const int64_t m = FourVectorLanes(n);
  for (int64_t i = 0; i < m; i += 4 * static_cast<int64_t>(hn::Lanes(d))) {
    AddSquaresFour<T>(d, x, i, a0, a1, a2, a3);
  }
  float sum = SumOfSums(d, a0, a1, a2, a3);
  if (m < n) sum += SumSquares<T, false>(x + m * kernels::dtype_size(T), nullptr, n - m);
  return sum;
}

// The lanes of an n-wide row that ScaleWithNext scales: from pairs_from, four vectors at a time.
HWY_INLINE int64_t OverlappedScaleEnd(Weight w, int64_t n) {
  return n < w.pairs_from ? w.pairs_from : w.pairs_from + FourVectorLanes(n - w.pairs_from);
}

// Lanes [pairs_from, OverlappedScaleEnd) of row x scaled into out, while lanes
// [0, FourVectorLanes(n)) of the next row are squared and those of `later` (or none) are
// prefetched into L2; returns the squares' sum. The squares keep their blocks from lane 0 (the
// sum's order, OverlappedSquares); the products start where the output lines up, so with a
// pairs_from past 0 the last block squares without scaling.
template <DType T, bool kStream>
HWY_INLINE float ScaleWithNext(const void* x, Weight w, float inv_rms, void* out, int64_t n,
                               const void* next_x, const char* later) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
  const VF s = hn::Set(d, inv_rms);
  VF a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  const int64_t m = FourVectorLanes(n), scaled = OverlappedScaleEnd(w, n) - w.pairs_from;
  for (int64_t i = 0; i < m; i += 4 * N) {
    if (later) {
      for (int64_t b = i * es; b < (i + 4 * N) * es; b += 64) PrefetchToL2(later + b);
    }
    AddSquaresFour<T>(d, next_x, i, a0, a1, a2, a3);
    if (i < scaled) {
      ScaleTwo<T, kStream>(d, x, w, s, out, w.pairs_from + i);
      ScaleTwo<T, kStream>(d, x, w, s, out, w.pairs_from + i + 2 * N);
    }
  }
  return SumOfSums(d, a0, a1, a2, a3);
}

HWY_INLINE float InvRms(float sum_of_squares, const Problem& p) {
  const double mean = static_cast<double>(sum_of_squares) / static_cast<double>(p.hidden);
  return static_cast<float>(1.0 / std::sqrt(mean + p.epsilon));
}

// For 16-bit rows: each row is scaled in the same loop that reads the next one, so the next
// row's reads, from memory, overlap this row's conversions and arithmetic, from L1, instead of
// every row first waiting for its own reads. Measured against NormRows interleaved on 2 threads,
// bfloat16 [4096, 4096] took 8-28% less time (medians of 9-11 rounds, four comparisons); float16
// came out even, float32 even or slower, so float32 keeps NormRows. The row after the next is
// prefetched into L2 only: into L1 (as NormRows does), one or two rows ahead, it was slower than
// no prefetch at all; into L2, one row ahead, it took about 10% more off in four comparisons of
// 9-15 rounds and added 7% in a fifth.
template <DType T>
void NormRowsOverlapped(const Problem& p, Weight w, int64_t begin, int64_t end, bool stream) {
  const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
  const int64_t n = p.hidden, m = FourVectorLanes(n), scaled_end = OverlappedScaleEnd(w, n);
  auto row = [&](const kernels::Rows& t, int64_t r) { return t.data + t.offset(r) * es; };
  float sum = OverlappedSquares<T>(row(p.input, begin), n);
  for (int64_t r = begin; r < end; ++r) {
    const float inv_rms = InvRms(sum, p);
    const char* x = row(p.input, r);
    char* out = row(p.output, r);
    if (r + 1 == end) {
      Scale<T>(x, w, inv_rms, out, n, stream, nullptr);
      break;
    }
    const char* next_x = row(p.input, r + 1);
    const char* later = r + 2 < end ? row(p.input, r + 2) : nullptr;
    sum = stream && StreamStart<T>(DF(), out, w.pairs_from) == w.pairs_from
              ? ScaleWithNext<T, true>(x, w, inv_rms, out, n, next_x, later)
              : ScaleWithNext<T, false>(x, w, inv_rms, out, n, next_x, later);
    ScaleRange<T>(x, w, inv_rms, out, 0, std::min(w.pairs_from, n), false, nullptr);
    ScaleRange<T>(x, w, inv_rms, out, scaled_end, n, stream, nullptr);
    if (m < n) sum += SumSquares<T, false>(next_x + m * es, nullptr, n - m);
  }
  if (stream) hwy::FlushStream();
}

template <DType T, bool kResidual>
void NormRows(const Problem& p, Weight w, int64_t begin, int64_t end, bool stream) {
  const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
  const int64_t ahead = std::max<int64_t>(1, kPrefetchBytes / (p.hidden * es));
  for (int64_t r = begin; r < end; ++r) {
    const char* x = p.input.data + p.input.offset(r) * es;
    char* residual = kResidual ? p.residual.data + p.residual.offset(r) * es : nullptr;
    char* out = p.output.data + p.output.offset(r) * es;
    const float inv_rms = InvRms(SumSquares<T, kResidual>(x, residual, p.hidden), p);
    const char* next = r + ahead < end ? p.input.data + p.input.offset(r + ahead) * es : nullptr;
    Scale<T>(kResidual ? residual : x, w, inv_rms, out, p.hidden, stream, next);
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
  // The pairs start where the first row's output lines up for streaming stores; rows of other
  // alignments (a row stride off the register size) store plainly with the same pairs.
  const int64_t lined_up = stream ? StreamStart<T>(DF(), p.output.data, 0) : -1;
  hwy::AlignedFreeUniquePtr<float[]> weight_two;
  const Weight w = WeightFor<T>(p, std::max<int64_t>(lined_up, 0), weight_two);
  kernels::parallel_ranges(p.rows, row_bytes, [&](int64_t begin, int64_t end) {
    if (p.residual.data) {
      NormRows<T, true>(p, w, begin, end, stream);
    } else if constexpr (T != DType::kF32) {
      NormRowsOverlapped<T>(p, w, begin, end, stream);
    } else {
      NormRows<T, false>(p, w, begin, end, stream);
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
