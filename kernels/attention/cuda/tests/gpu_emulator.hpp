// The attention kernels' GPU emulation: the CUDA execution model from
// tests/support/cuda_emulator.hpp, plus the NVIDIA primitives the flash kernel uses (ldmatrix,
// mma.sync m16n8k16, cp.async), written here from the PTX ISA's definitions of their fragment
// layouts, independently of how the kernel uses them, so the emulation checks that use.
//
// Include this first, define BACKPLANE_GPU_EMULATE, then include the .cu file.
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda_emulator.hpp"

namespace backplane::attention::gpu {

// cp.async: copies at once; the commit and wait calls have nothing left to do.
inline void copy_async_16(void* shared, const void* global) {
  std::memcpy(shared, global, 16);
}
inline void copy_async_commit() {}
template <int kPending>
void copy_async_wait() {}

// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lanes 8i..8i+7 give the addresses of the
// 8 rows (8 contiguous 16-bit elements each) of matrix i. Lane l receives in register i the
// elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix i, or of its transpose.
inline void ldmatrix(uint32_t (&r)[4], const uint16_t* p, bool transpose) {
  using namespace backplane::emulator;
  WarpSlots& w = warp_slots();
  const int l = lane();
  w.pointer[l] = p;
  warp_sync();
  const int g = l / 4, t = l % 4;
  for (int i = 0; i < 4; ++i) {
    uint16_t lo, hi;
    if (transpose) {
      lo = w.pointer[8 * i + 2 * t][g];
      hi = w.pointer[8 * i + 2 * t + 1][g];
    } else {
      lo = w.pointer[8 * i + g][2 * t];
      hi = w.pointer[8 * i + g][2 * t + 1];
    }
    r[i] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
  warp_sync();
}
inline void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* p) {
  ldmatrix(r, p, false);
}
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t* p) {
  ldmatrix(r, p, true);
}

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: D = A B + C with, for lane l (g = l / 4,
// t = l % 4; the lower half of each register is the lower column or row index):
//   A (16x16): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   B (16x8):  b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]
//   C, D (16x8, fp32): c0, c1 = C[g][2t], C[g][2t+1]; c2, c3 = C[g+8][2t], C[g+8][2t+1]
template <class T>
void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  using namespace backplane::emulator;
  WarpSlots& w = warp_slots();
  const int l = lane();
  for (int i = 0; i < 4; ++i) w.a[l][i] = a[i];
  w.b[l][0] = b0;
  w.b[l][1] = b1;
  warp_sync();
  float A[16][16], B[16][8];
  auto lo = [](uint32_t v) { return T::load(static_cast<uint16_t>(v & 0xffffu)); };
  auto hi = [](uint32_t v) { return T::load(static_cast<uint16_t>(v >> 16)); };
  for (int k = 0; k < 32; ++k) {
    const int g = k / 4, t = k % 4;
    const uint32_t* ak = w.a[k];
    A[g][2 * t] = lo(ak[0]), A[g][2 * t + 1] = hi(ak[0]);
    A[g + 8][2 * t] = lo(ak[1]), A[g + 8][2 * t + 1] = hi(ak[1]);
    A[g][2 * t + 8] = lo(ak[2]), A[g][2 * t + 9] = hi(ak[2]);
    A[g + 8][2 * t + 8] = lo(ak[3]), A[g + 8][2 * t + 9] = hi(ak[3]);
    B[2 * t][g] = lo(w.b[k][0]), B[2 * t + 1][g] = hi(w.b[k][0]);
    B[2 * t + 8][g] = lo(w.b[k][1]), B[2 * t + 9][g] = hi(w.b[k][1]);
  }
  warp_sync();
  const int g = l / 4, t = l % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + (e >> 1) * 8, col = 2 * t + (e & 1);
    float sum = c[e];
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    c[e] = sum;
  }
}

}  // namespace backplane::attention::gpu
