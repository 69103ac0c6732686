// AMX primitives shared by the forward's bf16 tiles (sdpa_amx-inl.h) and the backward's
// (sdpa_backward_amx-inl.h): the tile configuration and one general tile product (the 16x16
// transposes they use are in transpose-inl.h). Highway 1.0.3 has no AMX, hence intrinsics in
// functions built for amx-tile/amx-bf16 on top of the AVX3 targets, run only where the CPU and
// the OS allow AMX (amx_bf16_available()). Everything here is HWY_INLINE: the header is
// included by several files of one target.
// Included once per SIMD target (foreach_target), hence the toggle guard.
#if defined(BACKPLANE_ATTENTION_CPU_AMX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef BACKPLANE_ATTENTION_CPU_AMX_INL_H_
#undef BACKPLANE_ATTENTION_CPU_AMX_INL_H_
#else
#define BACKPLANE_ATTENTION_CPU_AMX_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "cpu/transpose-inl.h"

HWY_BEFORE_NAMESPACE();
namespace backplane::attention::cpu {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#ifndef BACKPLANE_AMX_TARGET
#define BACKPLANE_AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512bf16")))
#endif

// Palette 1, all eight tiles 16 rows x 64 bytes: tiles 0-3 accumulate, 4-5 hold A, 6-7 hold B.
BACKPLANE_AMX_TARGET HWY_INLINE void AmxConfigure() {
  struct alignas(64) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
  } cfg;
  std::memset(&cfg, 0, sizeof(cfg));
  cfg.palette = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

// 16-bit lanes [a0..a15, b0..b15] -> pairs [a0 b0 a1 b1 ...].
HWY_INLINE __m512i PairIndex() {
  alignas(64) static const uint16_t idx[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                               21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                               11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_load_si512(idx);
}

// C[m][n] (+)= sum_k A[m][k] B[k][n] on the tiles, 32 x 32 of C at a time (tiles 0-3 accumulate,
// 4-5 hold A, 6-7 hold B; AmxConfigure() first). A: bf16 rows, lda elements apart; B: bf16
// pairs along k (the VNNI layout), word (k / 2, n) at b[(k / 2) * ldb + n]; C: fp32 rows, ldc
// apart. rows and cols multiples of 32, depth of 32.
BACKPLANE_AMX_TARGET HWY_INLINE void AmxGemm(int64_t rows, int64_t cols, int64_t depth,
                                             const uint16_t* a, int64_t lda, const uint32_t* b,
                                             int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  const int a_stride = static_cast<int>(lda * 2), b_stride = static_cast<int>(ldb * 4);
  const int c_stride = static_cast<int>(ldc * 4);
  for (int64_t m0 = 0; m0 < rows; m0 += 32) {
    for (int64_t n0 = 0; n0 < cols; n0 += 32) {
      float* c0 = c + m0 * ldc + n0;
      float* c1 = c0 + 16 * ldc;
      if (accumulate) {
        _tile_loadd(0, c0, c_stride);
        _tile_loadd(1, c0 + 16, c_stride);
        _tile_loadd(2, c1, c_stride);
        _tile_loadd(3, c1 + 16, c_stride);
      } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
      }
      for (int64_t k0 = 0; k0 < depth; k0 += 32) {
        _tile_loadd(4, a + m0 * lda + k0, a_stride);
        _tile_loadd(5, a + (m0 + 16) * lda + k0, a_stride);
        _tile_loadd(6, b + (k0 / 2) * ldb + n0, b_stride);
        _tile_loadd(7, b + (k0 / 2) * ldb + n0 + 16, b_stride);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, c0, c_stride);
      _tile_stored(1, c0 + 16, c_stride);
      _tile_stored(2, c1, c_stride);
      _tile_stored(3, c1 + 16, c_stride);
    }
  }
}

#endif  // HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL

}  // namespace HWY_NAMESPACE
}  // namespace backplane::attention::cpu
HWY_AFTER_NAMESPACE();

#endif  // BACKPLANE_ATTENTION_CPU_AMX_INL_H_
