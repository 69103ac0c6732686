// Device-side helpers shared by the kernels, for both compilers: nvcc (NVIDIA) and hipcc
// (AMD, where __HIP_PLATFORM_AMD__ is defined). Element conversions are written out so that
// neither vendor's bf16 header is needed.
#pragma once

#include "platform.hpp"

#if defined(BACKPLANE_GPU_EMULATE)
// The tests run the kernels on CPU threads: tests/gpu_emulator.hpp, included first, supplies
// the CUDA names used here.
#define BACKPLANE_DYNAMIC_SHARED(type, name) \
  type* name = ::backplane::emulator::dynamic_shared<type>()
#elif defined(BACKPLANE_GPU_AMD)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#define BACKPLANE_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#else
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define BACKPLANE_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

#include <stdint.h>

#include "params.hpp"

namespace backplane::attention::gpu {

#if defined(BACKPLANE_GPU_AMD)
// The kernels reason in 32-lane warps; on a 64-lane wavefront each half is one of them, and
// the xor shuffles below (masks 1 and 2) stay inside a group of four lanes.
__device__ __forceinline__ float shuffle_xor(float v, int mask) {
  return __shfl_xor(v, mask);
}
#else
__device__ __forceinline__ float shuffle_xor(float v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}
#endif

__device__ __forceinline__ float bf16_to_float(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

// Round to nearest even; NaN stays NaN.
__device__ __forceinline__ uint16_t float_to_bf16(float f) {
  uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

__device__ __forceinline__ float f16_to_float(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ uint16_t float_to_f16(float f) {
  return __half_as_ushort(__float2half_rn(f));
}

// A 16-bit storage type: how its bits convert to and from float.
struct Bf16 {
  static __device__ __forceinline__ float load(uint16_t h) { return bf16_to_float(h); }
  static __device__ __forceinline__ uint16_t store(float f) { return float_to_bf16(f); }
};
struct F16 {
  static __device__ __forceinline__ float load(uint16_t h) { return f16_to_float(h); }
  static __device__ __forceinline__ uint16_t store(float f) { return float_to_f16(f); }
};

// Element `offset` of a tensor of `type`, as float.
__device__ __forceinline__ float load_element(const void* base, int64_t offset, ElementType type) {
  switch (type) {
    case ElementType::kFloat32:
      return static_cast<const float*>(base)[offset];
    case ElementType::kBfloat16:
      return bf16_to_float(static_cast<const uint16_t*>(base)[offset]);
    default:
      return f16_to_float(static_cast<const uint16_t*>(base)[offset]);
  }
}

__device__ __forceinline__ void store_element(void* base, int64_t offset, ElementType type,
                                              float value) {
  switch (type) {
    case ElementType::kFloat32:
      static_cast<float*>(base)[offset] = value;
      break;
    case ElementType::kBfloat16:
      static_cast<uint16_t*>(base)[offset] = float_to_bf16(value);
      break;
    default:
      static_cast<uint16_t*>(base)[offset] = float_to_f16(value);
      break;
  }
}

// The mask's additive bias at (b, h, i, j): 0 or -inf for a boolean mask, 0 without a mask.
__device__ __forceinline__ float mask_bias(const Params& p, int b, int h, int i, int j) {
  if (p.mask_type == MaskType::kNone) return 0.0f;
  const int64_t off =
      b * p.mask_stride[0] + h * p.mask_stride[1] + i * p.mask_stride[2] + j * p.mask_stride[3];
  switch (p.mask_type) {
    case MaskType::kBool:
      return static_cast<const uint8_t*>(p.mask)[off] ? 0.0f : -__int_as_float(0x7f800000);
    case MaskType::kAdditiveF32:
      return static_cast<const float*>(p.mask)[off];
    case MaskType::kAdditiveBf16:
      return bf16_to_float(static_cast<const uint16_t*>(p.mask)[off]);
    default:
      return f16_to_float(static_cast<const uint16_t*>(p.mask)[off]);
  }
}

// v reduced over the block's kThreads threads (summed, or the maximum with take_max) through
// `scratch`, kThreads floats of shared memory; every thread gets the result, and scratch is free
// again when it returns.
template <int kThreads>
__device__ float block_reduce(float v, float* scratch, bool take_max) {
  const int tid = static_cast<int>(threadIdx.x);
  scratch[tid] = v;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (tid < width) {
      const float other = scratch[tid + width];
      scratch[tid] = take_max ? fmaxf(scratch[tid], other) : scratch[tid] + other;
    }
    __syncthreads();
  }
  const float result = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return result;
}

// acc[c] += sum over t < count of weights[t] * element (row0 + t, d) of a [rows][dims] operand at
// `base` (element (r, d) at offset + r * row_stride + d * dim_stride), for this thread's dims
// d = threadIdx.x + c * kThreads below `dims`: a chunk of weighted rows, one weight per row in
// shared memory.
template <int kThreads, int kDimsPerThread>
__device__ void accumulate_rows(float (&acc)[kDimsPerThread], const float* weights, int count,
                                const void* base, int64_t offset, int64_t row_stride,
                                int64_t dim_stride, int dims, ElementType type) {
  for (int c = 0; c < kDimsPerThread; ++c) {
    const int d = static_cast<int>(threadIdx.x) + c * kThreads;
    if (d >= dims) break;
    float a = acc[c];
    for (int t = 0; t < count; ++t) {
      a += weights[t] * load_element(base, offset + t * row_stride + d * dim_stride, type);
    }
    acc[c] = a;
  }
}

__device__ __forceinline__ float negative_infinity() {
  return -__int_as_float(0x7f800000);
}

}  // namespace backplane::attention::gpu
