// What the layer-kernel packages (kernels/<family>/package.cpp) share: which device their
// variant serves, and a kernel library Status turned into the host's bp_status.
#pragma once

#include <backplane/plugin_sdk.hpp>

#include "common/abi_status.hpp"

namespace backplane::kernels {

// The variant being built: BACKPLANE_PACKAGE_CUDA for the cuda one, the cpu one otherwise.
#ifdef BACKPLANE_PACKAGE_CUDA
inline constexpr const char* kPackageDevice = "cuda";
#else
inline constexpr const char* kPackageDevice = "cpu";
#endif

// A kernel of the package: registered for kPackageDevice, float32, bfloat16 and float16, compute
// capability 8.0 and up on CUDA (the nvcc targets are sm_80 and sm_90).
inline sdk::KernelSpec package_kernel(const char* op, void (*function)(void), sdk::Host* host) {
  sdk::KernelSpec k;
  k.op = op;
  k.implementation = op;
  k.device_type = kPackageDevice;
  k.dtypes = {"float32", "bfloat16", "float16"};
#ifdef BACKPLANE_PACKAGE_CUDA
  k.min_compute_capability_major = 8;
  k.min_compute_capability_minor = 0;
#endif
  k.function = function;
  k.context = host;
  return k;
}

}  // namespace backplane::kernels
