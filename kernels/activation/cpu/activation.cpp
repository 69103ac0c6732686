// The CPU gated activations: one pass over each row, act(a) * b a vector at a time; long rows
// are cut into column chunks so that a few rows still keep every thread busy. Compiled once per
// SIMD target (Highway foreach_target) and dispatched at runtime.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "activation/cpu/activation.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// foreach_target.h first: it re-includes this file once per target.
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <exception>
#include <new>
#include <type_traits>

#include "activation/cpu/activation_math-inl.h"
#include "activation/dispatch.hpp"
#include "activation/problem.hpp"
#include "common/parallel.hpp"
#include "common/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace backplane::activation {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using kernels::DType;
using kernels::HWY_NAMESPACE::DF;
using kernels::HWY_NAMESPACE::kL2PrefetchBytes;
using kernels::HWY_NAMESPACE::LoadF;
using kernels::HWY_NAMESPACE::LoadTwoF;
using kernels::HWY_NAMESPACE::NaNs;
using kernels::HWY_NAMESPACE::PrefetchToL2;
using kernels::HWY_NAMESPACE::StoreF;
using kernels::HWY_NAMESPACE::StoreTwoF;
using kernels::HWY_NAMESPACE::StreamFromStart;
using kernels::HWY_NAMESPACE::StreamStart;
using kernels::HWY_NAMESPACE::Tail;
using kernels::HWY_NAMESPACE::Ties;
using kernels::HWY_NAMESPACE::VF;

// Ties of bfloat16 results away from zero where the sigmoid is the coarse one (silu and
// gelu_tanh, TimesSigmoidBf16), to even where the float32 is near exact (gelu's erf).
template <Activation A, DType T>
constexpr Ties kTiesOf = T == DType::kBF16&& A != Activation::kGelu ? Ties::kAway : Ties::kEven;

// Columns [c0, c1) of one row. Every operand is of dtype T: a bfloat16 result's NaNs come from
// bfloat16 data (NaNs::kFromBf16). With `stream`, the columns from the first one whose output is
// aligned for streaming stores (StreamStart) are streamed, two vectors at a time, and those
// before it and the last few stored plainly.
template <Activation A, DType T>
HWY_INLINE void Columns(const void* gate, const void* up, void* out, int64_t c0, int64_t c1,
                        bool stream) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto y = [&](int64_t at) {
    return hn::Mul(Act<A, T>(d, LoadF<T>(d, gate, at)), LoadF<T>(d, up, at));
  };
  // Lanes [at, at + 2N) computed and stored, in LoadTwoF's order.
  auto y_two = [&](int64_t at, auto stream_tag) {
    VF g0, g1, u0, u1;
    LoadTwoF<T>(d, gate, at, g0, g1);
    LoadTwoF<T>(d, up, at, u0, u1);
    StoreTwoF<T, decltype(stream_tag)::value, NaNs::kFromBf16, kTiesOf<A, T>>(
        d, hn::Mul(Act<A, T>(d, g0), u0), hn::Mul(Act<A, T>(d, g1), u1), out, at);
  };
  auto plain = [&](int64_t i, int64_t end) {
    for (; i + 2 * N <= end; i += 2 * N) y_two(i, std::false_type{});
    for (; i < end; i += N) {
      const int64_t n = std::min(N, end - i);
      if (n == N) {
        StoreF<T, NaNs::kFromBf16, kTiesOf<A, T>>(d, y(i), out, i);
      } else {
        Tail<T> gt, ut, ot;
        const VF last = hn::Mul(Act<A, T>(d, LoadF<T>(d, gt.load(gate, i, n), 0)),
                                LoadF<T>(d, ut.load(up, i, n), 0));
        StoreF<T, NaNs::kFromBf16, kTiesOf<A, T>>(d, last, ot.buf, 0);
        ot.store(out, i, n);
      }
    }
  };
  const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
  const char* gate_ahead = static_cast<const char*>(gate) + kL2PrefetchBytes;
  const char* up_ahead = static_cast<const char*>(up) + kL2PrefetchBytes;
  auto streamed_pair = [&](int64_t at) {
    // Past the row's end these reach the next rows' (or no) memory: a prefetch never faults.
    for (int64_t b = at * es; b < (at + 2 * N) * es; b += 64) {
      PrefetchToL2(gate_ahead + b);
      PrefetchToL2(up_ahead + b);
    }
    y_two(at, std::true_type{});
  };
  StreamFromStart(d, c0, c1, stream ? StreamStart<T>(d, out, c0) : -1, plain, streamed_pair);
}

template <Activation A, DType T>
void RunTyped(const Problem& p) {
  constexpr int64_t kChunk = 8192;  // columns per work item
  const int64_t chunks = (p.d + kChunk - 1) / kChunk;
  const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
  const int64_t item_bytes = std::min(p.d, kChunk) * es * 3;
  const bool stream = p.rows * p.d * es >= kernels::HWY_NAMESPACE::kStreamBytes;
  kernels::parallel_ranges(p.rows * chunks, item_bytes, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t r = item / chunks;
      const int64_t c0 = (item % chunks) * kChunk;
      const char* gate = p.input.data + p.input.offset(r) * es;
      Columns<A, T>(gate, gate + p.d * es, p.output.data + p.output.offset(r) * es, c0,
                    std::min(p.d, c0 + kChunk), stream);
    }
    if (stream) hwy::FlushStream();
  });
}

void Run(const Problem& p) {
  for_activation_and_dtype(p.activation, p.dtype, [&](auto a, auto t) {
    RunTyped<decltype(a)::value, decltype(t)::value>(p);
  });
}

const char* TargetName() {
  return hwy::TargetName(HWY_TARGET);
}

}  // namespace HWY_NAMESPACE
}  // namespace backplane::activation
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace backplane::activation {

HWY_EXPORT(Run);
HWY_EXPORT(TargetName);

Status forward_cpu(Activation activation, const DLTensor* input, const DLTensor* output) {
  return kernels::guarded_call(op_name(activation), "", [&] {
    Problem p;
    Status s = make_problem(activation, input, output, kernels::Memory::kHost, &p);
    if (!s.ok() || p.rows == 0 || p.d == 0) return s;
    HWY_DYNAMIC_DISPATCH(Run)(p);
    return s;
  });
}

const char* cpu_target() {
  return HWY_DYNAMIC_DISPATCH(TargetName)();
}

}  // namespace backplane::activation
#endif  // HWY_ONCE
