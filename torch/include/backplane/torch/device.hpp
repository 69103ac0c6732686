// Device names between backplane, LibTorch (c10::Device) and DLPack (DLDevice).
//
// backplane and LibTorch share one grammar (`type` or `type:index`) and, for the types both
// know, one name: cpu, cuda, xpu, mps, hpu, meta, ... The exceptions:
//   - rocm: LibTorch's ROCm builds call AMD GPUs "cuda" (HIP stands in for CUDA, c10's own "hip"
//     type is internal), so backplane's rocm:N is LibTorch's cuda:N. The reverse cannot tell an
//     AMD cuda from an NVIDIA one: LibTorch's cuda:N is backplane's cuda:N, which on a machine
//     with only AMD GPUs is the same GPU (the rocm plugin registers cuda for it, as PyTorch does).
//     On a machine with both vendors, a ROCm LibTorch's cuda:N is backplane's rocm:N.
//   - hip (c10's internal type) is backplane's rocm.
// DLPack: cpu <-> kDLCPU, cuda <-> kDLCUDA, rocm <-> kDLROCM, xpu <-> kDLOneAPI, mps <-> kDLMetal.
#pragma once

#include <dlpack/dlpack.h>
#include <backplane/rules/device.hpp>

#include <c10/core/Device.h>

namespace backplane::torch {

// backplane -> LibTorch. An index-less device stays index-less (c10 reads "cuda" as the current
// device). Throws InvalidArgument when this LibTorch has no such device type, with LibTorch's
// list of the types it knows.
c10::Device torch_device(const Device& device);

// LibTorch -> backplane: c10's name (the PrivateUse1 backend under the name it registered),
// hip -> rocm; index -1 (c10's "current" or CPU's none) becomes no index.
Device backplane_device(const c10::Device& device);

// backplane -> DLPack. An index-less device is index 0: DLPack has no "current device". Throws
// InvalidArgument for a type DLPack cannot name (hpu, meta, ...), listing those it can.
DLDevice dlpack_device(const Device& device);

// DLPack -> backplane; kDLCPU gives index-less "cpu". Throws InvalidArgument for a device type
// with no backplane name (kDLCUDAHost, kDLVulkan, ...), listing the accepted ones.
Device backplane_device(const DLDevice& device);

// "kDLCUDA:1", for messages.
std::string to_string(const DLDevice& device);

}  // namespace backplane::torch
