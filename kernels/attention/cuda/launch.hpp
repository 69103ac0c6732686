// Internal: the kernel launchers, and the few runtime names that differ between CUDA and HIP.
// Included by the .cu files only (it needs the vendor's runtime header).
#pragma once

#include "platform.hpp"

#if defined(BACKPLANE_GPU_AMD)
#include <hip/hip_runtime.h>
#else
#include <cuda_runtime.h>
#endif

#include "params.hpp"

namespace backplane::attention::gpu {

#if defined(BACKPLANE_GPU_AMD)
using GpuStream = hipStream_t;
using LaunchStatus = hipError_t;
inline constexpr LaunchStatus kLaunchOk = hipSuccess;
#define gpuGetLastError hipGetLastError
#define gpuGetErrorName hipGetErrorName
#define gpuGetErrorString hipGetErrorString
#define gpuGetDevice hipGetDevice
#define gpuSetDevice hipSetDevice
#define gpuFuncSetAttribute hipFuncSetAttribute
#else
using GpuStream = cudaStream_t;
using LaunchStatus = cudaError_t;
inline constexpr LaunchStatus kLaunchOk = cudaSuccess;
#define gpuGetLastError cudaGetLastError
#define gpuGetErrorName cudaGetErrorName
#define gpuGetErrorString cudaGetErrorString
#define gpuGetDevice cudaGetDevice
#define gpuSetDevice cudaSetDevice
#define gpuFuncSetAttribute cudaFuncSetAttribute
#endif

// Queue the kernel for a valid, non-empty problem on the current device.
LaunchStatus launch_eager(const Params& params, GpuStream stream);
// params.dtype is bfloat16 or float16; head dims at most 256.
LaunchStatus launch_flash(const Params& params, GpuStream stream);
// Both backward kernels (dq, then dk and dv), for a valid call with batch and heads_kv > 0.
LaunchStatus launch_eager_backward(const BackwardParams& params, GpuStream stream);

}  // namespace backplane::attention::gpu
