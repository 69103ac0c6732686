// Device-side helpers of the CUDA layer kernels (nvcc, or the tests' CPU emulation): row views,
// element conversions, launches, launch errors as Status.
#pragma once

#if defined(BACKPLANE_GPU_EMULATE)
// The tests run the kernels on CPU threads: tests/support/cuda_emulator.hpp, included first,
// supplies the CUDA names used here.
#define BACKPLANE_LAUNCH(kernel, blocks, threads, stream, ...)                                   \
  ((void)(stream), ::backplane::emulator::launch({static_cast<unsigned>(blocks), 1, 1}, threads, \
                                                 0, [&] { kernel(__VA_ARGS__); }))
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
// kernel<<<blocks, threads, 0, stream>>>(...); `kernel` is a name without a comma (a template's
// instance goes through a local pointer first).
#define BACKPLANE_LAUNCH(kernel, blocks, threads, stream, ...) \
  kernel<<<blocks, threads, 0, stream>>>(__VA_ARGS__)
#endif

#include <cstdint>
#include <string>

#include "common/tensor.hpp"

namespace backplane::kernels::gpu {

// Rows (common/tensor.hpp) passed by value to a kernel.
struct DeviceRows {
  char* data;
  int lead;
  int64_t shape[8];
  int64_t stride[8];

  __device__ int64_t offset(int64_t row) const {
    if (lead == 1) return row * stride[0];
    int64_t off = 0;
    for (int d = lead - 1; d >= 0; --d) {
      off += (row % shape[d]) * stride[d];
      row /= shape[d];
    }
    return off;
  }
};

inline DeviceRows device_rows(const Rows& r) {
  DeviceRows d{};
  d.data = r.data;
  d.lead = r.lead;
  for (int i = 0; i < 8; ++i) {
    d.shape[i] = r.shape[i];
    d.stride[i] = r.stride[i];
  }
  return d;
}

// float32 arithmetic on every storage type; stores round to nearest even.
__device__ __forceinline__ float to_float(float x) {
  return x;
}
__device__ __forceinline__ float to_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ float to_float(__half x) {
  return __half2float(x);
}
template <class S>
__device__ __forceinline__ S from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

template <DType T>
struct Storage;
template <>
struct Storage<DType::kF32> {
  using type = float;
};
template <>
struct Storage<DType::kBF16> {
  using type = __nv_bfloat16;
};
template <>
struct Storage<DType::kF16> {
  using type = __half;
};

// The status of the launch just made: its configuration error, if any.
inline Status launch_status(const char* op) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return Status::Ok();
  return {StatusCode::kInternal, std::string(op) + ": kernel launch failed: " +
                                     cudaGetErrorName(e) + ": " + cudaGetErrorString(e)};
}

}  // namespace backplane::kernels::gpu
