// The gated activations' float32 math, shared by the forward (activation.cpp) and backward
// (activation_backward.cpp) CPU kernels. Included once per SIMD target (foreach_target), hence
// the toggle guard.
#if defined(BACKPLANE_ACTIVATION_CPU_ACTIVATION_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef BACKPLANE_ACTIVATION_CPU_ACTIVATION_MATH_INL_H_
#undef BACKPLANE_ACTIVATION_CPU_ACTIVATION_MATH_INL_H_
#else
#define BACKPLANE_ACTIVATION_CPU_ACTIVATION_MATH_INL_H_
#endif

#include <hwy/highway.h>

#include "activation/activation.hpp"
#include "common/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace backplane::activation {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using kernels::DType;
using kernels::HWY_NAMESPACE::DF;
using kernels::HWY_NAMESPACE::ExpF;
using kernels::HWY_NAMESPACE::ExpInRange;
using kernels::HWY_NAMESPACE::RecipF;
using kernels::HWY_NAMESPACE::VF;

// x * sigmoid(y) = x / (1 + e^-y), to a few ulps: e^-y to 2e-7, then one correctly rounded
// division. y is held in [-87.3, 87.3]: above, 1 + e^-y is 1 already (and e^-y would be a
// denormal, a microcode assist each on Intel); below, the result (under 88 e^-87.3 = 1.1e-36)
// is 0, as with ExpF. For y < 0, 1 + e^-y is large and its rounding costs half an ulp: no
// cancellation on either side, so no split by sign. The division, not the reciprocal estimate
// and a Newton step: the divider works beside the FMA pipes, and on Zen 4 an L2-resident
// silu_and_mul took 4.6 ns a vector against 5.4 (6.1 with the sign split and ExpF).
HWY_INLINE VF TimesSigmoid(DF d, VF x, VF y) {
  const VF low = hn::Set(d, -87.3f);
  const VF e = ExpInRange<true>(d, hn::Min(hn::Max(y, low), hn::Set(d, 87.3f)));  // e^-y
  return hn::IfThenZeroElse(hn::Lt(y, low), hn::Div(x, hn::Add(hn::Set(d, 1.0f), e)));
}

// x * sigmoid(y) = x / (1 + e^-y) for results rounded to bfloat16: relative error below 2.5e-4
// (Exp2Coarse's and the reciprocal estimate's; 4e-4 where the estimate has 12 bits), against
// bfloat16's step of 3.9e-3. Half the ops of TimesSigmoid: no sign split and no Newton step.
// On AVX-512 the exponent needs no clamp: vreduceps takes +-inf to 0 and vscalefps gives 0 or
// inf, so 1 + e^-y is 1 or inf (result x or 0, as x / (1 + e^-y) in float32). Elsewhere
// Exp2Coarse builds 2^round in the exponent bits, so e^-y is held in [2^-64, 2^125]: below,
// 1 + e^-y is 1 already; above (y < -86.6), the result is x * 2^-125 instead of smaller.
HWY_INLINE VF TimesSigmoidBf16(DF d, VF x, VF y) {
  VF t = hn::Mul(y, hn::Set(d, -1.44269504088896341f));  // -y log2(e)
#if HWY_TARGET != HWY_AVX3 && HWY_TARGET != HWY_AVX3_DL
  t = hn::Min(hn::Max(t, hn::Set(d, -64.0f)), hn::Set(d, 125.0f));
#endif
  const VF one_plus_e = hn::Add(kernels::HWY_NAMESPACE::Exp2Coarse(d, t), hn::Set(d, 1.0f));
  return hn::Mul(x, hn::ApproximateReciprocal(one_plus_e));
}

// erfc(z) for z >= 0 by the Chebyshev fit of Press et al., Numerical Recipes (2nd ed.) 6.2,
// relative error < 1.2e-7: erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2).
HWY_INLINE VF ErfcNonNegative(DF d, VF z) {
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
  return hn::Mul(t, ExpF(d, hn::NegMulAdd(z, z, p)));
}

// x / 2 * (1 + erf(x / sqrt(2))) through erfc(z), z = |x| / sqrt(2): gelu = h for x < 0 and
// x - h for x >= 0, h = x / 2 * erfc(z): no cancellation on either side.
HWY_INLINE VF Gelu(DF d, VF x) {
  const VF erfc = ErfcNonNegative(d, hn::Mul(hn::Abs(x), hn::Set(d, 0.70710678118654752f)));
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

}  // namespace HWY_NAMESPACE
}  // namespace backplane::activation
HWY_AFTER_NAMESPACE();

#endif  // BACKPLANE_ACTIVATION_CPU_ACTIVATION_MATH_INL_H_
