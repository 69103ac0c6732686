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

#include "activation/problem.hpp"
#include "common/parallel.hpp"
#include "common/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace backplane::activation {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using kernels::DType;
using kernels::HWY_NAMESPACE::DF;
using kernels::HWY_NAMESPACE::ExpF;
using kernels::HWY_NAMESPACE::kPrefetchBytes;
using kernels::HWY_NAMESPACE::LoadF;
using kernels::HWY_NAMESPACE::LoadTwoF;
using kernels::HWY_NAMESPACE::RecipF;
using kernels::HWY_NAMESPACE::StoreF;
using kernels::HWY_NAMESPACE::StoreTwoF;
using kernels::HWY_NAMESPACE::StreamAligned;
using kernels::HWY_NAMESPACE::Tail;
using kernels::HWY_NAMESPACE::VF;

// x * sigmoid(y), with e = exp(-|y|) <= 1 so nothing overflows: sigmoid(y) is 1 / (1 + e) for
// y >= 0 and e / (1 + e) below.
HWY_INLINE VF TimesSigmoid(DF d, VF x, VF y) {
  const VF e = ExpF(d, hn::Neg(hn::Abs(y)));
  const VF num = hn::IfThenElse(hn::Lt(y, hn::Zero(d)), hn::Mul(x, e), x);
  return hn::Mul(num, RecipF(d, hn::Add(hn::Set(d, 1.0f), e)));
}

// x * sigmoid(y) = x / (1 + e^-y) for results rounded to bfloat16: relative error below 2.5e-4
// (Exp2Coarse's and the reciprocal estimate's; 4e-4 where the estimate has 12 bits), against
// bfloat16's step of 3.9e-3. Half the ops of TimesSigmoid: no sign split and no Newton step.
// On AVX-512 the exponent needs no clamp: vreduceps takes +-inf to 0 and vscalefps gives 0 or
// inf, so 1 + e^-y is 1 or inf (result x or 0, as x / (1 + e^-y) in float32). Elsewhere
// Exp2Coarse builds 2^floor in the exponent bits, so e^-y is held in [2^-64, 2^125]: below,
// 1 + e^-y is 1 already; above (y < -86.6), the result is x * 2^-125 instead of smaller.
HWY_INLINE VF TimesSigmoidBf16(DF d, VF x, VF y) {
  VF t = hn::Mul(y, hn::Set(d, -1.44269504088896341f));  // -y log2(e)
#if HWY_TARGET != HWY_AVX3 && HWY_TARGET != HWY_AVX3_DL
  t = hn::Min(hn::Max(t, hn::Set(d, -64.0f)), hn::Set(d, 125.0f));
#endif
  const VF one_plus_e = hn::Add(kernels::HWY_NAMESPACE::Exp2Coarse(d, t), hn::Set(d, 1.0f));
  return hn::Mul(x, hn::ApproximateReciprocal(one_plus_e));
}

// x / 2 * (1 + erf(x / sqrt(2))) through erfc(z), z = |x| / sqrt(2), by the Chebyshev fit of
// Press et al., Numerical Recipes (2nd ed.) 6.2, relative error < 1.2e-7 for every z >= 0:
//   erfc(z) = t exp(-z^2 + P(t)),  t = 1 / (1 + z / 2)
// then gelu = h for x < 0 and x - h for x >= 0, h = x / 2 * erfc(z): no cancellation on
// either side.
HWY_INLINE VF Gelu(DF d, VF x) {
  const VF z = hn::Mul(hn::Abs(x), hn::Set(d, 0.70710678118654752f));
  const VF t = RecipF(d, hn::MulAdd(z, hn::Set(d, 0.5f), hn::Set(d, 1.0f)));
  VF p = hn::Set(d, 0.17087277f);
  p = hn::MulAdd(p, t, hn::Set(d, -0.82215223f));
  p = hn::MulAdd(p, t, hn::Set(d, 1.48851587f));
  p = hn::MulAdd(p, t, hn::Set(d, -1.13520398f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.27886807f));
  p = hn::MulAdd(p, t, hn::Set(d, -0.18628806f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.09678418f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.37409196f));
  p = hn::MulAdd(p, t, hn::Set(d, 1.00002368f));
  p = hn::MulAdd(p, t, hn::Set(d, -1.26551223f));
  const VF erfc = hn::Mul(t, ExpF(d, hn::NegMulAdd(z, z, p)));
  const VF h = hn::Mul(hn::Mul(x, hn::Set(d, 0.5f)), erfc);
  return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), h, hn::Sub(x, h));
}

// x * sigmoid(y), as precise as results of dtype T need.
template <DType T>
HWY_INLINE VF TimesSigmoidFor(DF d, VF x, VF y) {
  if constexpr (T == DType::kBF16) {
    return TimesSigmoidBf16(d, x, y);
  } else {
    return TimesSigmoid(d, x, y);
  }
}

// x / 2 * (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2 / pi) (x + 0.044715 x^3).
template <DType T>
HWY_INLINE VF GeluTanh(DF d, VF x) {
  const VF x2 = hn::Mul(x, x);
  const VF inner = hn::MulAdd(hn::Mul(x2, hn::Set(d, 0.044715f)), x, x);
  return TimesSigmoidFor<T>(d, x, hn::Mul(inner, hn::Set(d, 2.0f * 0.79788456080286536f)));
}

template <Activation A, DType T>
HWY_INLINE VF Act(DF d, VF x) {
  if constexpr (A == Activation::kSilu) {
    return TimesSigmoidFor<T>(d, x, x);
  } else if constexpr (A == Activation::kGelu) {
    return Gelu(d, x);
  } else {
    return GeluTanh<T>(d, x);
  }
}

// Columns [c0, c1) of one row.
template <Activation A, DType T>
HWY_INLINE void Columns(const void* gate, const void* up, void* out, int64_t c0, int64_t c1,
                        bool stream) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = c0;
  auto y = [&](int64_t at) {
    return hn::Mul(Act<A, T>(d, LoadF<T>(d, gate, at)), LoadF<T>(d, up, at));
  };
  // Lanes [at, at + 2N) computed and stored, in LoadTwoF's order.
  auto y_two = [&](int64_t at, auto stream_tag) {
    VF g0, g1, u0, u1;
    LoadTwoF<T>(d, gate, at, g0, g1);
    LoadTwoF<T>(d, up, at, u0, u1);
    StoreTwoF<T, decltype(stream_tag)::value>(d, hn::Mul(Act<A, T>(d, g0), u0),
                                              hn::Mul(Act<A, T>(d, g1), u1), out, at);
  };
  if (stream && StreamAligned<T>(d, out) && c0 % (2 * N) == 0) {
    const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
    const char* gate_ahead = static_cast<const char*>(gate) + kPrefetchBytes;
    const char* up_ahead = static_cast<const char*>(up) + kPrefetchBytes;
    for (; i + 2 * N <= c1; i += 2 * N) {
      // Past the row's end these reach the next rows' (or no) memory: a prefetch never faults.
      for (int64_t b = i * es; b < (i + 2 * N) * es; b += 64) {
        hwy::Prefetch(gate_ahead + b);
        hwy::Prefetch(up_ahead + b);
      }
      y_two(i, std::true_type{});
    }
  }
  for (; i + 2 * N <= c1; i += 2 * N) y_two(i, std::false_type{});
  for (; i < c1; i += N) {
    const int64_t n = std::min(N, c1 - i);
    if (n == N) {
      StoreF<T>(d, y(i), out, i);
    } else {
      Tail<T> gt, ut, ot;
      const VF last = hn::Mul(Act<A, T>(d, LoadF<T>(d, gt.load(gate, i, n), 0)),
                              LoadF<T>(d, ut.load(up, i, n), 0));
      StoreF<T>(d, last, ot.buf, 0);
      ot.store(out, i, n);
    }
  }
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

template <Activation A>
void RunActivation(const Problem& p) {
  switch (p.dtype) {
    case DType::kF32:
      return RunTyped<A, DType::kF32>(p);
    case DType::kBF16:
      return RunTyped<A, DType::kBF16>(p);
    case DType::kF16:
      return RunTyped<A, DType::kF16>(p);
  }
}

void Run(const Problem& p) {
  switch (p.activation) {
    case Activation::kSilu:
      return RunActivation<Activation::kSilu>(p);
    case Activation::kGelu:
      return RunActivation<Activation::kGelu>(p);
    case Activation::kGeluTanh:
      return RunActivation<Activation::kGeluTanh>(p);
  }
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
