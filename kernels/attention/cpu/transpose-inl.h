// Transposes of 32-bit words: 16x16 on AVX-512, shared by the AMX tiles (amx-inl.h: Q and P
// into pairs) and the fp32 panels (sdpa_block-inl.h: K into its tiles); Highway 1.0.3 has no
// cross-block shuffles of this kind, hence intrinsics, for the AVX3 targets only. And a square
// of one vector's lanes on every target (TransposeSquare: Q^T and K's tiles).
// Included once per SIMD target (foreach_target), hence the toggle guard.
#if defined(BACKPLANE_ATTENTION_CPU_TRANSPOSE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef BACKPLANE_ATTENTION_CPU_TRANSPOSE_INL_H_
#undef BACKPLANE_ATTENTION_CPU_TRANSPOSE_INL_H_
#else
#define BACKPLANE_ATTENTION_CPU_TRANSPOSE_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace backplane::attention::cpu {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL

// r[c] becomes column c: lane i of the new r[c] is lane c of the old r[i].
HWY_INLINE void Transpose16x16Regs(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // r[4g + k] holds, in 128-bit lane L, column 4L + k of rows 4g..4g+3.
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_shuffle_i32x4(r[k], r[4 + k], 0x88);           // columns k, 8+k; rows 0-7
    t[4 + k] = _mm512_shuffle_i32x4(r[k], r[4 + k], 0xdd);       // columns 4+k, 12+k; rows 0-7
    t[8 + k] = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0x88);  // rows 8-15
    t[12 + k] = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0xdd);
  }
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_i32x4(t[k], t[8 + k], 0x88);
    r[k + 8] = _mm512_shuffle_i32x4(t[k], t[8 + k], 0xdd);
  }
}

// dst[c * ld + i] = lane c of r[i], for 16 rows of 16 32-bit elements (r is overwritten).
HWY_INLINE void Transpose16x16Rows(__m512i r[16], uint32_t* dst, int64_t ld) {
  Transpose16x16Regs(r);
  for (int c = 0; c < 16; ++c) _mm512_storeu_si512(dst + c * ld, r[c]);
}

// dst[c * ld + r] = src[r * ls + c] for a 16 x 16 block of 32-bit elements.
HWY_INLINE void Transpose16x16(const uint32_t* src, int64_t ls, uint32_t* dst, int64_t ld) {
  __m512i r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(src + i * ls);
  Transpose16x16Rows(r, dst, ld);
}

#endif  // HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL

namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
// Within each 128-bit block, a 4x4 transpose: lane k of block b of the new r[i] is lane i of
// block b of the old r[k].
template <class D, class V = hn::Vec<D>>
HWY_INLINE void Transpose4InBlocks(D d, V& r0, V& r1, V& r2, V& r3) {
  const hn::Repartition<uint64_t, D> d64;
  const V t0 = hn::InterleaveLower(d, r0, r1);  // a0 b0 a1 b1
  const V t1 = hn::InterleaveUpper(d, r0, r1);  // a2 b2 a3 b3
  const V t2 = hn::InterleaveLower(d, r2, r3);  // c0 d0 c1 d1
  const V t3 = hn::InterleaveUpper(d, r2, r3);  // c2 d2 c3 d3
  const auto lo = [&](V x, V y) {
    return hn::BitCast(d, hn::InterleaveLower(d64, hn::BitCast(d64, x), hn::BitCast(d64, y)));
  };
  const auto hi = [&](V x, V y) {
    return hn::BitCast(d, hn::InterleaveUpper(d64, hn::BitCast(d64, x), hn::BitCast(d64, y)));
  };
  r0 = lo(t0, t2);  // a0 b0 c0 d0
  r1 = hi(t0, t2);  // a1 b1 c1 d1
  r2 = lo(t1, t3);
  r3 = hi(t1, t3);
}
#endif  // HWY_TARGET != HWY_SCALAR

// r[c] becomes column c of the N x N square of floats that r's N vectors were rows of:
// vectors of 16 lanes (AVX-512), 8 or 4 (in 128-bit blocks) or 1; false for other widths.
template <class D, class V = hn::Vec<D>>
HWY_INLINE bool TransposeSquareRegs(D d, V* r) {
  constexpr size_t kN = hn::MaxLanes(D());
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  static_assert(kN == 16, "AVX-512 vectors of floats have 16 lanes");
  (void)d;
  __m512i w[16];
  for (size_t i = 0; i < 16; ++i) w[i] = _mm512_castps_si512(r[i].raw);
  Transpose16x16Regs(w);
  for (size_t i = 0; i < 16; ++i) r[i] = V{_mm512_castsi512_ps(w[i])};
  return true;
#elif HWY_TARGET == HWY_SCALAR
  static_assert(kN == 1, "one lane");
  (void)d, (void)r;
  return true;
#else
  if constexpr (kN == 4 || kN == 8) {
    for (size_t i = 0; i < kN; i += 4) Transpose4InBlocks(d, r[i], r[i + 1], r[i + 2], r[i + 3]);
    if constexpr (kN == 8) {
      // r[k] is [column k | column 4 + k] of rows 0-3, r[4 + k] the same of rows 4-7.
      for (size_t k = 0; k < 4; ++k) {
        const V col = hn::ConcatLowerLower(d, r[4 + k], r[k]);
        r[4 + k] = hn::ConcatUpperUpper(d, r[4 + k], r[k]);
        r[k] = col;
      }
    }
    return true;
  } else {
    (void)d, (void)r;
    return false;
  }
#endif
}

// dst[c * ld + i] = src[i * ls + c] for i, c below the float vector's lane count N; false
// (nothing written) where TransposeSquareRegs has no square of N.
HWY_INLINE bool TransposeSquare(const float* src, int64_t ls, float* dst, int64_t ld) {
  const hn::ScalableTag<float> d;
  constexpr size_t kN = hn::MaxLanes(d);
  hn::Vec<decltype(d)> r[kN];
  for (size_t i = 0; i < kN; ++i) r[i] = hn::LoadU(d, src + static_cast<int64_t>(i) * ls);
  if (!TransposeSquareRegs(d, r)) return false;
  for (size_t c = 0; c < kN; ++c) hn::StoreU(r[c], d, dst + static_cast<int64_t>(c) * ld);
  return true;
}

}  // namespace HWY_NAMESPACE
}  // namespace backplane::attention::cpu
HWY_AFTER_NAMESPACE();

#endif  // BACKPLANE_ATTENTION_CPU_TRANSPOSE_INL_H_
