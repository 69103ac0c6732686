// The CPU kernels' float32 math, one function per accuracy (each says its error and what it
// is for):
//   ExpF        e^x, ~2e-7, any x (the activations)
//   ExpInRange  e^x, ~2e-7, x in [-87.3, 88] (the caller clamps)
//   Exp2F<6>    2^x for x <= 0, ~2e-7 (softmax probabilities in float32)
//   Exp2F<4>    2^x for x <= 0, ~4e-5 (softmax probabilities rounded to bfloat16)
//   Exp2Coarse  2^y, ~7.5e-5, y in [-126, 127) (activations rounded to bfloat16)
//   RecipF      1 / x, ~1 ulp
// Included once per SIMD target (foreach_target), hence the toggle guard.
#if defined(BACKPLANE_KERNELS_COMMON_SIMD_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef BACKPLANE_KERNELS_COMMON_SIMD_MATH_INL_H_
#undef BACKPLANE_KERNELS_COMMON_SIMD_MATH_INL_H_
#else
#define BACKPLANE_KERNELS_COMMON_SIMD_MATH_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace backplane::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// 2^n for a whole n in [-127, 127] (2^-127 as 0): the low bits of n + 1.5 * 2^23 + 127 are
// n + 127, which shifted by 23 fill the exponent field. One add and one shift, where converting
// n to an integer costs, on AVX2, the conversion and four ops that fix up lanes out of int32's
// range (Highway's ConvertTo), which a whole n in this range never is.
HWY_INLINE VF Pow2OfWhole(DF d, VF n) {
  const hn::RebindToUnsigned<DF> du;
  const VF biased = hn::Add(n, hn::Set(d, 12582912.0f + 127.0f));
  return hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(du, biased)));
}

// e^x for x in [-87.3, 88] (ExpF and the sigmoids clamp or mask the rest): x = n ln2 + r with
// n = round(x / ln2) and r reduced in two parts (Cody and Waite), e^r by a degree-5 polynomial
// fitted for the least relative error on |r| <= ln2 / 2 (1.4e-7, against 1.6e-7 for the Taylor
// polynomial of degree 6, one op more), then scaled by 2^n (one vscalefps on AVX-512, which
// takes any n; elsewhere the exponent bits, for n in [-126, 127]). kNegated: e^-x for -x in that
// range, without negating x: the reduction then yields -r and the polynomial takes it with its
// odd coefficients negated, every step the exact negation of e^x's at -x (round to nearest is
// symmetric), so the bits are those of ExpInRange(-x) for one op less.
template <bool kNegated = false>
HWY_INLINE VF ExpInRange(DF d, VF x) {
  constexpr float kSign = kNegated ? -1.0f : 1.0f;
  const VF n = hn::Round(hn::Mul(x, hn::Set(d, kSign * 1.44269504088896341f)));
  VF r;  // r, or -r when kNegated
  if constexpr (kNegated) {
    r = hn::MulAdd(n, hn::Set(d, 0.693145751953125f), x);
    r = hn::MulAdd(n, hn::Set(d, 1.428606765330187e-06f), r);
  } else {
    r = hn::NegMulAdd(n, hn::Set(d, 0.693145751953125f), x);
    r = hn::NegMulAdd(n, hn::Set(d, 1.428606765330187e-06f), r);
  }
  VF p = hn::Set(d, kSign * 8.2976548e-3f);
  p = hn::MulAdd(p, r, hn::Set(d, 4.19153832e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, kSign * 1.66675746e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.99988943e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, kSign * 9.99999702e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.00000012f));
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  return VF{_mm512_scalef_ps(p.raw, n.raw)};
#else
  return hn::Mul(p, Pow2OfWhole(d, n));
#endif
}

// e^x, relative error about 2e-7, any x, for the activations: 0 below about -87.3 (never a
// denormal); x is capped at 88.
HWY_INLINE VF ExpF(DF d, VF x) {
  x = hn::Min(x, hn::Set(d, 88.0f));
  const VF low = hn::Set(d, -87.3f);
  return hn::IfThenZeroElse(hn::Lt(x, low), ExpInRange(d, hn::Max(x, low)));
}

// 2^y to a relative error of 7.5e-5, for y in [-126, 127) (any y on AVX-512: vscalefps goes to
// 0 and inf, and vreduceps takes +-inf to 0): 2^n times a cubic in f = y - n, fitted for the
// least relative error. For results rounded to bfloat16 (a step of 2^-8 = 3.9e-3), where ExpF's
// 2e-7 buys nothing and costs seven more ops. On AVX-512, n = floor(y) and 2^n by vscalefps;
// elsewhere n = round(y), whose bits in n + 1.5 * 2^23 + 127, shifted by 23, are 2^n: no
// convert and no integer add (a bf16 silu_and_mul on Zen 3: 7% less time). round(y) by the
// rounding instruction, not left in the low bits of y + 1.5 * 2^23 + 127 by the float adder:
// that took a second constant (-(1.5 * 2^23 + 127), which the compiler made of the subtraction)
// and a longer chain, and in the bf16 activations' loop, at 16 registers, spills (7% less time
// again, one thread). Same bits either way: both round half to even.
HWY_INLINE VF Exp2Coarse(DF d, VF y) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  const VF f{_mm512_reduce_ps(y.raw, 0x09)};  // y - floor(y), no precision exception
  VF p = hn::Set(d, 0.07802433520555496f);    // fitted on [0, 1)
  p = hn::MulAdd(p, f, hn::Set(d, 0.22606727480888367f));
  p = hn::MulAdd(p, f, hn::Set(d, 0.6958335638046265f));
  p = hn::MulAdd(p, f, hn::Set(d, 0.9999251961708069f));
  return VF{_mm512_scalef_ps(p.raw, y.raw)};  // p * 2^floor(y)
#else
  const VF n = hn::Round(y);
  const VF f = hn::Sub(y, n);                // in [-0.5, 0.5]
  VF p = hn::Set(d, 0.055171627551317215f);  // fitted on [-0.5, 0.5]
  p = hn::MulAdd(p, f, hn::Set(d, 0.2426111400127411f));
  p = hn::MulAdd(p, f, hn::Set(d, 0.6932609677314758f));
  p = hn::MulAdd(p, f, hn::Set(d, 0.9999280571937561f));
  return hn::Mul(p, Pow2OfWhole(d, n));
#endif
}

// 1 / x to about 1 ulp: the hardware estimate and one Newton step.
HWY_INLINE VF RecipF(DF d, VF x) {
  const VF r = hn::ApproximateReciprocal(x);
  return hn::Mul(r, hn::NegMulAdd(x, r, hn::Set(d, 2.0f)));
}

// p(f) ~ 2^f for f in [-0.5, 0.5], for Exp2F.
template <int kDegree>
HWY_INLINE VF Exp2Poly(DF d, VF f) {
  if constexpr (kDegree == 6) {
    VF p = hn::Set(d, 1.535336188319500e-4f);
    p = hn::MulAdd(p, f, hn::Set(d, 1.339887440266574e-3f));
    p = hn::MulAdd(p, f, hn::Set(d, 9.618437357674640e-3f));
    p = hn::MulAdd(p, f, hn::Set(d, 5.550332471162809e-2f));
    p = hn::MulAdd(p, f, hn::Set(d, 2.402264791363012e-1f));
    p = hn::MulAdd(p, f, hn::Set(d, 6.931472028550421e-1f));
    return hn::MulAdd(p, f, hn::Set(d, 1.0f));
  } else {
    static_assert(kDegree == 4, "degree 4 or 6");
    VF p = hn::Set(d, 9.6181291076284772e-3f);
    p = hn::MulAdd(p, f, hn::Set(d, 5.5504108664821580e-2f));
    p = hn::MulAdd(p, f, hn::Set(d, 2.4022650695910071e-1f));
    p = hn::MulAdd(p, f, hn::Set(d, 6.9314718055994531e-1f));
    return hn::MulAdd(p, f, hn::Set(d, 1.0f));
  }
}

// 2^x for x <= 0 (x may be -inf), as 2^round(x) * p(f), f = x - round(x) in [-0.5, 0.5], for
// softmax probabilities. kDegree 6: Cephes' exp2f polynomial, relative error ~2e-7 (fp32
// probabilities); kDegree 4: Taylor, ~4e-5 (probabilities rounded to bf16 anyway). 0 below
// -126: never a denormal.
template <int kDegree = 6>
HWY_INLINE VF Exp2F(DF d, VF x) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  // vrndscaleps + vscalefps: the 2^n scaling in one instruction; results below 2^-126 become 0
  // (denormal probabilities would only slow the products down). The clamp at -126 keeps
  // vscalefps from producing a denormal even for the lanes zeroed afterwards: each one costs a
  // microcode assist, and the masked scores of a causal block (-inf) made that pass 11x slower
  // (96 against 8.5 cycles a vector, measured on a Xeon with AMX).
  const VF xc = hn::Max(x, hn::Set(d, -126.0f));
  const VF n{_mm512_roundscale_ps(xc.raw, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
  const VF p = Exp2Poly<kDegree>(d, hn::Sub(xc, n));
  return hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, -126.0f)), VF{_mm512_scalef_ps(p.raw, n.raw)});
#else
  x = hn::Max(x, hn::Set(d, -127.0f));
  const VF n = hn::Round(x);
  return hn::Mul(Exp2Poly<kDegree>(d, hn::Sub(x, n)), Pow2OfWhole(d, n));
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace backplane::kernels
HWY_AFTER_NAMESPACE();

#endif  // BACKPLANE_KERNELS_COMMON_SIMD_MATH_INL_H_
