// Runs the GPU kernels' source on CPU threads, for tests on machines without a GPU: one
// std::thread per GPU thread, blocks one after another, __syncthreads and warp-collective
// operations as barriers. The NVIDIA primitives the flash kernel uses (ldmatrix, mma.sync
// m16n8k16, cp.async) are written here from the PTX ISA's definitions of their fragment
// layouts, independently of how the kernel uses them, so the emulation checks that use.
//
// Include this first, define BACKPLANE_GPU_EMULATE, then include the .cu file.
#pragma once

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cpu/problem.hpp"  // the CPU kernels' fp16 conversions

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static  // blocks run one at a time, so one copy serves each block in turn

using std::max;
using std::min;

struct uint4 {
  uint32_t x, y, z, w;
};
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) {
  return {x, y, z, w};
}

namespace backplane::emulator {

struct Index {
  unsigned x = 0, y = 0, z = 0;
};

// A reusable barrier for `count` threads.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      done_.notify_all();
      return;
    }
    done_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  const int count_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

// What the 32 lanes of a warp exchange in a collective operation.
struct WarpSlots {
  const uint16_t* pointer[32];
  uint32_t a[32][4];
  uint32_t b[32][2];
  float value[32];
};

struct Block {
  Block(int threads, size_t shared_bytes)
      : barrier(threads), shared((shared_bytes + 15) / 16 + 1), slots(threads / 32) {
    for (int w = 0; w < threads / 32; ++w) warp_barriers.push_back(std::make_unique<Barrier>(32));
  }
  Barrier barrier;
  std::vector<uint4> shared;  // dynamic shared memory, 16-byte aligned
  std::vector<std::unique_ptr<Barrier>> warp_barriers;
  std::vector<WarpSlots> slots;
};

inline thread_local Index thread_index;
inline thread_local Index block_index;
inline thread_local Block* current = nullptr;

inline int lane() {
  return static_cast<int>(thread_index.x % 32);
}
inline WarpSlots& warp_slots() {
  return current->slots[thread_index.x / 32];
}
inline void warp_sync() {
  current->warp_barriers[thread_index.x / 32]->wait();
}

template <class T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(current->shared.data());
}

// Runs fn on every thread of every block of the grid.
template <class Fn>
void launch(Index grid, int threads, size_t shared_bytes, Fn fn) {
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        Block block(threads, shared_bytes);
        std::memset(block.shared.data(), 0xcd, block.shared.size() * sizeof(uint4));
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t) {
          pool.emplace_back([&, t] {
            thread_index = {static_cast<unsigned>(t), 0, 0};
            block_index = {x, y, z};
            current = &block;
            fn();
          });
        }
        for (std::thread& th : pool) th.join();
      }
    }
  }
}

}  // namespace backplane::emulator

#define threadIdx (::backplane::emulator::thread_index)
#define blockIdx (::backplane::emulator::block_index)

inline void __syncthreads() {
  backplane::emulator::current->barrier.wait();
}

inline float __shfl_xor_sync(unsigned /*mask*/, float v, int lane_mask) {
  using namespace backplane::emulator;
  WarpSlots& w = warp_slots();
  w.value[lane()] = v;
  warp_sync();
  const float other = w.value[lane() ^ lane_mask];
  warp_sync();
  return other;
}
inline float __shfl_xor(float v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}

inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __int_as_float(int i) {
  return __uint_as_float(static_cast<uint32_t>(i));
}
struct __half {
  uint16_t bits;
};
inline __half __ushort_as_half(uint16_t h) {
  return {h};
}
inline uint16_t __half_as_ushort(__half h) {
  return h.bits;
}
inline float __half2float(__half h) {
  return backplane::attention::cpu::f16_to_f32(h.bits);
}
inline __half __float2half_rn(float f) {
  return {backplane::attention::cpu::f32_to_f16(f)};
}
inline float __expf(float x) {
  return std::exp(x);
}

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
