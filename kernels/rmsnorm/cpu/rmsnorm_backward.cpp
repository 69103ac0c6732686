// The CPU RMSNorm backward: per row, one pass for the sum of squares and the dot product
// sum(g weight x), one for the input gradient; the row stays in L1 between the two. The weight
// gradient sums g x r over the rows of each chunk of kChunkRows into the chunk's own float32
// row, and the chunks' rows are then added in chunk order: the same bits whatever the number of
// threads. Compiled once per SIMD target (Highway foreach_target) and dispatched at runtime.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rmsnorm/cpu/rmsnorm_backward.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// foreach_target.h first: it re-includes this file once per target.
#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
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
using kernels::HWY_NAMESPACE::LoadF;
using kernels::HWY_NAMESPACE::PrefetchToL2;
using kernels::HWY_NAMESPACE::StoreF;
using kernels::HWY_NAMESPACE::StorePairF;
using kernels::HWY_NAMESPACE::StreamFromStart;
using kernels::HWY_NAMESPACE::StreamStart;
using kernels::HWY_NAMESPACE::Tail;
using kernels::HWY_NAMESPACE::VF;

constexpr int64_t kChunkRows = 32;  // rows per float32 row of weight-gradient partial sums

// Lanes [at, at + n) of a row (n <= N), the ones past n zero, through a buffer when n < N.
template <DType T>
HWY_INLINE VF LoadPart(DF d, const void* row, int64_t at, int64_t n) {
  if (n == static_cast<int64_t>(hn::Lanes(d))) return LoadF<T>(d, row, at);
  Tail<T> tail;
  return LoadF<T>(d, tail.load(row, at, n), 0);
}

// Stores lanes [at, at + n) of v into a row (n <= N).
template <DType T>
HWY_INLINE void StorePart(DF d, VF v, void* row, int64_t at, int64_t n) {
  if (n == static_cast<int64_t>(hn::Lanes(d))) return StoreF<T>(d, v, row, at);
  Tail<T> tail;
  StoreF<T>(d, v, tail.buf, 0);
  tail.store(row, at, n);
}

// One row: grad_input = r (g w - x c) (+ grad_residual), c = r^2 sum(g w x) / hidden; adds g x r
// into dw. With `stream`, grad_input is streamed from its first lane that lines up for it
// (StreamStart), two vectors at a time (a 16-bit pair is one whole register), the lanes before
// and the last few stored plainly, while the next row's g and x (next_g and next_x, or none) are
// prefetched into L2 for this function's first pass over them.
template <DType T>
HWY_INLINE void BackwardRow(const BackwardProblem& p, const void* g, const void* x,
                            const void* gres, void* gi, float* dw, bool stream, const char* next_g,
                            const char* next_x) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d)), h = p.hidden;
  VF ss0 = hn::Zero(d), ss1 = hn::Zero(d), dot0 = hn::Zero(d), dot1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * N <= h; i += 2 * N) {
    const VF x0 = LoadF<T>(d, x, i), x1 = LoadF<T>(d, x, i + N);
    ss0 = hn::MulAdd(x0, x0, ss0);
    ss1 = hn::MulAdd(x1, x1, ss1);
    dot0 = hn::MulAdd(hn::Mul(LoadF<T>(d, g, i), LoadF<T>(d, p.weight, i)), x0, dot0);
    dot1 = hn::MulAdd(hn::Mul(LoadF<T>(d, g, i + N), LoadF<T>(d, p.weight, i + N)), x1, dot1);
  }
  for (; i < h; i += N) {
    const int64_t n = std::min(N, h - i);
    const VF xv = LoadPart<T>(d, x, i, n);
    ss0 = hn::MulAdd(xv, xv, ss0);
    dot0 = hn::MulAdd(hn::Mul(LoadPart<T>(d, g, i, n), LoadPart<T>(d, p.weight, i, n)), xv, dot0);
  }
  const double mean = static_cast<double>(hn::GetLane(hn::SumOfLanes(d, hn::Add(ss0, ss1)))) /
                      static_cast<double>(h);
  const float r = static_cast<float>(1.0 / std::sqrt(mean + p.epsilon));
  const float c =
      r * r * hn::GetLane(hn::SumOfLanes(d, hn::Add(dot0, dot1))) / static_cast<float>(h);
  const VF rv = hn::Set(d, r), cv = hn::Set(d, c);
  // grad_input's lanes [at, at + n); adds their g x r into dw.
  auto input_grad = [&](int64_t at, int64_t n) {
    const VF gv = LoadPart<T>(d, g, at, n), xv = LoadPart<T>(d, x, at, n);
    VF out = hn::Mul(rv, hn::NegMulAdd(xv, cv, hn::Mul(gv, LoadPart<T>(d, p.weight, at, n))));
    if (gres) out = hn::Add(out, LoadPart<T>(d, gres, at, n));
    StorePart<DType::kF32>(d, hn::MulAdd(hn::Mul(gv, xv), rv, LoadPart<DType::kF32>(d, dw, at, n)),
                           dw, at, n);
    return out;
  };
  auto plain = [&](int64_t from, int64_t to) {
    for (int64_t at = from; at < to; at += N) {
      const int64_t n = std::min(N, to - at);
      StorePart<T>(d, input_grad(at, n), gi, at, n);
    }
  };
  const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
  auto streamed_pair = [&](int64_t at) {
    if (next_g) {
      for (int64_t b = at * es; b < (at + 2 * N) * es; b += 64) {
        PrefetchToL2(next_g + b);
        PrefetchToL2(next_x + b);
      }
    }
    const VF out0 = input_grad(at, N);
    StorePairF<T, true>(d, out0, input_grad(at + N, N), gi, at);
  };
  StreamFromStart(d, 0, h, stream ? StreamStart<T>(d, gi, 0) : -1, plain, streamed_pair);
}

template <DType T>
void RunTyped(const BackwardProblem& p) {
  const int64_t chunks = (p.rows + kChunkRows - 1) / kChunkRows, h = p.hidden;
  const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
  // No rows: no partial sums, and grad_weight is zeros.
  auto partials =
      hwy::AllocateAligned<float>(static_cast<size_t>(std::max<int64_t>(1, chunks * h)));
  if (!partials) throw std::bad_alloc();
  const bool gres = p.grad_residual.data != nullptr;
  const bool stream = p.rows * h * es >= kernels::HWY_NAMESPACE::kStreamBytes;
  auto at_row = [&](const kernels::Rows& t, int64_t row) { return t.data + t.offset(row) * es; };
  kernels::parallel_ranges(chunks, kChunkRows * h * es * 4, [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      float* dw = partials.get() + chunk * h;
      std::fill(dw, dw + h, 0.0f);
      const int64_t last = std::min(p.rows, (chunk + 1) * kChunkRows);
      for (int64_t row = chunk * kChunkRows; row < last; ++row) {
        const bool next = row + 1 < last;  // within the chunk
        BackwardRow<T>(p, at_row(p.grad_output, row), at_row(p.input, row),
                       gres ? at_row(p.grad_residual, row) : nullptr, at_row(p.grad_input, row), dw,
                       stream, next ? at_row(p.grad_output, row + 1) : nullptr,
                       next ? at_row(p.input, row + 1) : nullptr);
      }
    }
    if (stream) hwy::FlushStream();
  });
  // grad_weight = the partial rows in chunk order, columns split over the pool.
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t vectors = (h + N - 1) / N;
  kernels::parallel_ranges(vectors, chunks * N * 4, [&](int64_t begin, int64_t end) {
    for (int64_t v = begin; v < end; ++v) {
      const int64_t at = v * N, n = std::min(N, h - at);
      VF sum = hn::Zero(d);
      for (int64_t chunk = 0; chunk < chunks; ++chunk)
        sum = hn::Add(sum, LoadPart<DType::kF32>(d, partials.get() + chunk * h, at, n));
      StorePart<T>(d, sum, p.grad_weight, at, n);
    }
  });
}

void RunBackward(const BackwardProblem& p) {
  switch (p.dtype) {
    case DType::kF32:
      return RunTyped<DType::kF32>(p);
    case DType::kBF16:
      return RunTyped<DType::kBF16>(p);
    case DType::kF16:
      return RunTyped<DType::kF16>(p);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace backplane::rmsnorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace backplane::rmsnorm {

HWY_EXPORT(RunBackward);

Status backward_cpu(const BackwardTensors& tensors, double epsilon) {
  return kernels::guarded_call("rms_norm_backward", " for the weight gradient's partial sums", [&] {
    BackwardProblem p;
    Status s = make_backward_problem(tensors, epsilon, kernels::Memory::kHost, &p);
    if (!s.ok() || p.hidden == 0) return s;
    HWY_DYNAMIC_DISPATCH(RunBackward)(p);
    return s;
  });
}

}  // namespace backplane::rmsnorm
#endif  // HWY_ONCE
