// 16x16 transposes of 32-bit words on AVX-512, shared by the AMX tiles (amx-inl.h: Q and P
// into pairs) and the fp32 panels (sdpa_block-inl.h: K into its tiles). Highway 1.0.3 has no
// cross-block shuffles of this kind, hence intrinsics, for the AVX3 targets only.
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

}  // namespace HWY_NAMESPACE
}  // namespace backplane::attention::cpu
HWY_AFTER_NAMESPACE();

#endif  // BACKPLANE_ATTENTION_CPU_TRANSPOSE_INL_H_
