// Runs CUDA kernels' source on CPU threads, for tests on machines without a GPU: one
// std::thread per GPU thread, blocks one after another, __syncthreads and warp-collective
// operations as barriers, device memory as host memory. Supplies the CUDA names the project's
// kernels and GPU checks use (execution model, bfloat16 and float16 types, the runtime calls
// for memory and errors); the attention tests add the NVIDIA matrix primitives on top
// (kernels/attention/cuda/tests/gpu_emulator.hpp).
//
// Define BACKPLANE_GPU_EMULATE, include this first, then the .cu file.
#pragma once

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/scalar_convert.hpp"

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

// Launch errors are kept per host thread, as the CUDA runtime does (cudaGetLastError below).
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
};

namespace backplane::emulator {

inline thread_local cudaError_t last_error = cudaSuccess;

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
      : barrier(threads), shared((shared_bytes + 15) / 16 + 1), slots((threads + 31) / 32) {
    for (int w = 0; w * 32 < threads; ++w) {  // the last warp may be partial
      warp_barriers.push_back(std::make_unique<Barrier>(std::min(32, threads - w * 32)));
    }
  }
  Barrier barrier;
  std::vector<uint4> shared;  // dynamic shared memory, 16-byte aligned
  std::vector<std::unique_ptr<Barrier>> warp_barriers;
  std::vector<WarpSlots> slots;
};

inline thread_local Index thread_index;
inline thread_local Index block_index;
inline thread_local Index block_dim;
inline thread_local Index grid_dim;
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

// Runs fn on every thread of every block of the grid. A configuration the GPU would refuse
// (no thread or more than 1024 per block, an empty grid, y or z above 65535) runs nothing and
// leaves cudaErrorInvalidConfiguration for cudaGetLastError, as a real launch does.
template <class Fn>
void launch(Index grid, int threads, size_t shared_bytes, Fn fn) {
  if (threads < 1 || threads > 1024 || grid.x < 1 || grid.y < 1 || grid.z < 1 ||
      grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    last_error = cudaErrorInvalidConfiguration;
    return;
  }
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
            block_dim = {static_cast<unsigned>(threads), 1, 1};
            grid_dim = grid;
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
#define blockDim (::backplane::emulator::block_dim)
#define gridDim (::backplane::emulator::grid_dim)

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
  return backplane::kernels::f16_to_f32(h.bits);
}
inline __half __float2half_rn(float f) {
  return {backplane::kernels::f32_to_f16(f)};
}
inline __half __float2half(float f) {
  return __float2half_rn(f);
}
struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __bfloat162float(__nv_bfloat16 h) {
  return backplane::kernels::bf16_to_f32(h.bits);
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return {backplane::kernels::f32_to_bf16(f)};
}
inline __nv_bfloat16 __float2bfloat16(float f) {
  return __float2bfloat16_rn(f);
}
inline float __expf(float x) {
  return std::exp(x);
}
inline float rsqrtf(float x) {
  return 1.0f / std::sqrt(x);
}

// The runtime: device memory is host memory, and launches run to completion before they return
// (so every stream is in order and synchronizing has nothing to wait for). Only an allocation
// or a launch configuration can fail.
struct CUstream_st;
using cudaStream_t = CUstream_st*;
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
inline cudaError_t cudaGetLastError() {
  const cudaError_t e = backplane::emulator::last_error;
  backplane::emulator::last_error = cudaSuccess;
  return e;
}
inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
  }
  return "cudaErrorUnknown";
}
inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
  }
  return "unknown error";
}
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::malloc(bytes == 0 ? 1 : bytes);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* to, const void* from, size_t bytes, cudaMemcpyKind) {
  std::memcpy(to, from, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() {
  return cudaSuccess;
}
