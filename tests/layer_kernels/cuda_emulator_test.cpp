// The CPU emulator the GPU kernels' emulated tests run on (tests/support/cuda_emulator.hpp):
// the launches a GPU would refuse are refused with the runtime's error, and blocks whose size is
// no multiple of 32 still synchronize and shuffle within their partial last warp.
#include "cuda_emulator.hpp"
// (first: it defines the CUDA names used below)
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace {

using backplane::emulator::Index;
using backplane::emulator::launch;

struct BadLaunch {
  const char* what;
  Index grid;
  int threads;
};

TEST(CudaEmulator, RefusesTheLaunchesAGpuRefuses) {
  const BadLaunch cases[] = {
      {"no thread", {1, 1, 1}, 0},
      {"1025 threads", {1, 1, 1}, 1025},
      {"an empty grid", {0, 1, 1}, 32},
      {"grid.y above 65535", {1, 65536, 1}, 32},
      {"grid.z above 65535", {1, 1, 65536}, 32},
      {"grid.x above 2^31 - 1", {0x80000000u, 1, 1}, 32},
  };
  for (const BadLaunch& c : cases) {
    std::atomic<int> ran{0};
    launch(c.grid, c.threads, 0, [&] { ++ran; });
    EXPECT_EQ(ran.load(), 0) << c.what;
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration) << c.what;
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << c.what << ": the error is read once";
  }
  EXPECT_STREQ(cudaGetErrorName(cudaErrorInvalidConfiguration), "cudaErrorInvalidConfiguration");
}

// 2 blocks of 40 threads: each thread writes its index, waits at the barrier, reads its
// neighbour's; the 8 lanes of the partial warp exchange values with xor shuffles.
TEST(CudaEmulator, APartialWarpSynchronizesAndShuffles) {
  constexpr int kThreads = 40;
  std::vector<float> seen(2 * kThreads, -1.0f), shuffled(2 * kThreads, -1.0f);
  launch({2, 1, 1}, kThreads, 0, [&] {
    static float slot[kThreads];  // what __shared__ becomes here
    const int t = static_cast<int>(threadIdx.x);
    const int global = static_cast<int>(blockIdx.x) * kThreads + t;
    slot[t] = static_cast<float>(global);
    __syncthreads();
    seen[global] = slot[(t + 1) % kThreads];
    if (t >= 32) shuffled[global] = __shfl_xor_sync(0xffu, static_cast<float>(global), 1);
  });
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < kThreads; ++t) {
      const int global = b * kThreads + t;
      EXPECT_EQ(seen[global], static_cast<float>(b * kThreads + (t + 1) % kThreads)) << global;
      if (t >= 32) {
        EXPECT_EQ(shuffled[global], static_cast<float>(global ^ 1)) << global;
      }
    }
  }
}

}  // namespace
