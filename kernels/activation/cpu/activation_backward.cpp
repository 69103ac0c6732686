// The CPU gated activations' backward: one pass over each row, reading the gate, the multiplier
// and the output gradient a vector at a time and writing both halves of the input gradient.
// The activation is recomputed from the gate (the forward saves nothing). Compiled once per SIMD
// target (Highway foreach_target) and dispatched at runtime.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "activation/cpu/activation_backward.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// foreach_target.h first: it re-includes this file once per target.
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>

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
using kernels::HWY_NAMESPACE::ExpF;
using kernels::HWY_NAMESPACE::kL2PrefetchBytes;
using kernels::HWY_NAMESPACE::LoadF;
using kernels::HWY_NAMESPACE::LoadTwoF;
using kernels::HWY_NAMESPACE::PrefetchToL2;
using kernels::HWY_NAMESPACE::RecipF;
using kernels::HWY_NAMESPACE::StoreF;
using kernels::HWY_NAMESPACE::StoreTwoF;
using kernels::HWY_NAMESPACE::StreamFromStart;
using kernels::HWY_NAMESPACE::StreamStart;
using kernels::HWY_NAMESPACE::Tail;
using kernels::HWY_NAMESPACE::VF;

// act(x) and act'(x), in float32 whatever the dtype (a gradient is no place for the forward's
// bfloat16 shortcuts: its error would add to every step's).
struct ActAndSlope {
  VF act, slope;
};

// sigmoid(y) and 1 - sigmoid(y) = sigmoid(-y), each to a few ulps: with e = exp(-|y|) <= 1 and
// r = 1 / (1 + e), they are r and e r (one each way by the sign of y). 1 - s taken as a
// difference would lose its relative precision as s nears 1, and the slopes multiply it by up
// to x u' (about 900 at x = 16 for gelu_tanh).
struct SigmoidPair {
  VF s, one_minus_s;
};
HWY_INLINE SigmoidPair Sigmoids(DF d, VF y) {
  const VF e = ExpF(d, hn::Neg(hn::Abs(y)));
  const VF r = RecipF(d, hn::Add(hn::Set(d, 1.0f), e));
  const VF er = hn::Mul(e, r);
  const auto negative = hn::Lt(y, hn::Zero(d));
  return {hn::IfThenElse(negative, er, r), hn::IfThenElse(negative, r, er)};
}

//   silu(x) = x s,  s = sigmoid(x);  silu'(x) = s + x s (1 - s)
HWY_INLINE ActAndSlope Silu(DF d, VF x) {
  const SigmoidPair sp = Sigmoids(d, x);
  const VF xs = hn::Mul(x, sp.s);
  return {xs, hn::MulAdd(xs, sp.one_minus_s, sp.s)};
}

//   gelu(x) = x Phi(x);  gelu'(x) = Phi(x) + x phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
// Phi from erfc(|x| / sqrt(2)) as the forward takes it, so that Phi is exact at both tails.
HWY_INLINE ActAndSlope GeluErf(DF d, VF x) {
  const VF z = hn::Mul(hn::Abs(x), hn::Set(d, 0.70710678118654752f));
  const VF half_erfc = hn::Mul(ErfcNonNegative(d, z), hn::Set(d, 0.5f));
  const VF phi_big =
      hn::IfThenElse(hn::Lt(x, hn::Zero(d)), half_erfc, hn::Sub(hn::Set(d, 1.0f), half_erfc));
  const VF density = hn::Mul(ExpF(d, hn::Neg(hn::Mul(z, z))), hn::Set(d, 0.39894228040143268f));
  return {hn::Mul(x, phi_big), hn::MulAdd(x, density, phi_big)};
}

//   gelu_tanh(x) = x s,  s = sigmoid(2u),  u = sqrt(2 / pi) (x + 0.044715 x^3)
//   gelu_tanh'(x) = s + x s (1 - s) 2 u',  u' = sqrt(2 / pi) (1 + 3 * 0.044715 x^2)
HWY_INLINE ActAndSlope GeluTanhSlope(DF d, VF x) {
  const VF one = hn::Set(d, 1.0f);
  const VF k = hn::Set(d, 2.0f * 0.79788456080286536f);  // 2 sqrt(2 / pi)
  const VF x2 = hn::Mul(x, x);
  const SigmoidPair sp =
      Sigmoids(d, hn::Mul(hn::MulAdd(hn::Mul(x2, hn::Set(d, 0.044715f)), x, x), k));
  const VF du2 = hn::Mul(hn::MulAdd(x2, hn::Set(d, 3.0f * 0.044715f), one), k);
  const VF xs = hn::Mul(x, sp.s);
  // x s (1 - s) is 0 wherever |x| is past about 10.7 (exp(-2|u|) underflows), and u' may be inf
  // there (x^2 overflows past 1.8e19): the term is then 0, not 0 x inf.
  const VF t = hn::Mul(xs, sp.one_minus_s);
  return {xs, hn::Add(hn::IfThenZeroElse(hn::Eq(t, hn::Zero(d)), hn::Mul(t, du2)), sp.s)};
}

template <Activation A>
HWY_INLINE ActAndSlope Slope(DF d, VF x) {
  if constexpr (A == Activation::kSilu) {
    return Silu(d, x);
  } else if constexpr (A == Activation::kGelu) {
    return GeluErf(d, x);
  } else {
    return GeluTanhSlope(d, x);
  }
}

// Columns [c0, c1) of one row: d_gate = g * up * act'(gate), d_up = g * act(gate). With
// `stream`, and where both halves of the input gradient line up for streaming stores at the same
// lane (StreamStart; they do when a half is a whole number of registers), the columns from there
// are streamed two vectors at a time with the three input streams prefetched into L2 as the
// forward does; the rest, and everything otherwise, is stored plainly a vector at a time.
template <Activation A, DType T>
HWY_INLINE void Columns(const void* grad, const void* gate, const void* up, void* d_gate,
                        void* d_up, int64_t c0, int64_t c1, bool stream) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto one_vector = [&](const void* g_row, const void* x_row, const void* u_row, void* dx_row,
                        void* du_row, int64_t at) {
    const VF g = LoadF<T>(d, g_row, at);
    const ActAndSlope a = Slope<A>(d, LoadF<T>(d, x_row, at));
    StoreF<T>(d, hn::Mul(hn::Mul(g, LoadF<T>(d, u_row, at)), a.slope), dx_row, at);
    StoreF<T>(d, hn::Mul(g, a.act), du_row, at);
  };
  auto plain = [&](int64_t i, int64_t end) {
    for (; i + N <= end; i += N) one_vector(grad, gate, up, d_gate, d_up, i);
    if (i < end) {
      const int64_t n = end - i;
      Tail<T> gt, xt, ut, dxt, dut;
      one_vector(gt.load(grad, i, n), xt.load(gate, i, n), ut.load(up, i, n), dxt.buf, dut.buf, 0);
      dxt.store(d_gate, i, n);
      dut.store(d_up, i, n);
    }
  };
  const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
  const char* ahead[] = {static_cast<const char*>(grad) + kL2PrefetchBytes,
                         static_cast<const char*>(gate) + kL2PrefetchBytes,
                         static_cast<const char*>(up) + kL2PrefetchBytes};
  // Lanes [at, at + 2N), in LoadTwoF's order, streamed.
  auto streamed_pair = [&](int64_t at) {
    // Past the row's end these reach the next rows' (or no) memory: a prefetch never faults.
    for (int64_t b = at * es; b < (at + 2 * N) * es; b += 64) {
      for (const char* stream_ahead : ahead) PrefetchToL2(stream_ahead + b);
    }
    VF g0, g1, x0, x1, u0, u1;
    LoadTwoF<T>(d, grad, at, g0, g1);
    LoadTwoF<T>(d, gate, at, x0, x1);
    LoadTwoF<T>(d, up, at, u0, u1);
    const ActAndSlope a0 = Slope<A>(d, x0), a1 = Slope<A>(d, x1);
    StoreTwoF<T, true>(d, hn::Mul(hn::Mul(g0, u0), a0.slope), hn::Mul(hn::Mul(g1, u1), a1.slope),
                       d_gate, at);
    StoreTwoF<T, true>(d, hn::Mul(g0, a0.act), hn::Mul(g1, a1.act), d_up, at);
  };
  const int64_t streamed = stream ? StreamStart<T>(d, d_gate, c0) : -1;
  StreamFromStart(d, c0, c1, streamed == StreamStart<T>(d, d_up, c0) ? streamed : -1, plain,
                  streamed_pair);
}

template <Activation A, DType T>
void RunTyped(const BackwardProblem& p) {
  constexpr int64_t kChunk = 8192;  // columns per work item
  const int64_t chunks = (p.d + kChunk - 1) / kChunk;
  const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
  const int64_t item_bytes = std::min(p.d, kChunk) * es * 5;
  const bool stream = p.rows * 2 * p.d * es >= kernels::HWY_NAMESPACE::kStreamBytes;
  kernels::parallel_ranges(p.rows * chunks, item_bytes, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t r = item / chunks;
      const int64_t c0 = (item % chunks) * kChunk;
      const char* gate = p.input.data + p.input.offset(r) * es;
      char* d_gate = p.grad_input.data + p.grad_input.offset(r) * es;
      Columns<A, T>(p.grad_output.data + p.grad_output.offset(r) * es, gate, gate + p.d * es,
                    d_gate, d_gate + p.d * es, c0, std::min(p.d, c0 + kChunk), stream);
    }
    if (stream) hwy::FlushStream();
  });
}

void RunBackward(const BackwardProblem& p) {
  for_activation_and_dtype(p.activation, p.dtype, [&](auto a, auto t) {
    RunTyped<decltype(a)::value, decltype(t)::value>(p);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace backplane::activation
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace backplane::activation {

HWY_EXPORT(RunBackward);

Status backward_cpu(Activation activation, const DLTensor* grad_output, const DLTensor* input,
                    const DLTensor* grad_input) {
  return kernels::guarded_call(backward_op_name(activation), "", [&] {
    BackwardProblem p;
    Status s = make_backward_problem(activation, grad_output, input, grad_input,
                                     kernels::Memory::kHost, &p);
    if (!s.ok() || p.rows == 0 || p.d == 0) return s;
    HWY_DYNAMIC_DISPATCH(RunBackward)(p);
    return s;
  });
}

}  // namespace backplane::activation
#endif  // HWY_ONCE
