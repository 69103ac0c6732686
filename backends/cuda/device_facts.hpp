// Pure functions that turn what the CUDA driver reports into the values the plugin registers:
// UUID and PCI id strings, arch names, capability flags. No driver needed; tested by tables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace backplane::cuda {

// "GPU-2f6b3ab5-8c3f-8a1e-e1b5-2d0ba8e5f5a1" from the 16 bytes of cuDeviceGetUuid: lower-case
// hex in 8-4-4-4-12 groups, as nvidia-smi and CUDA_VISIBLE_DEVICES write it. `prefix` is
// "GPU-", or "MIG-" for a MIG instance.
std::string format_uuid(const char (&bytes)[16], std::string_view prefix = "GPU-");

// "sm_90" for compute capability 9.0, "sm_120" for 12.0. The architecture-specific targets
// (sm_90a) are compiler targets, not device properties, so they never appear here.
std::string arch_name(int major, int minor);

// bp_device_capability bits of a compute capability: fp16 from 5.3, bf16 and tf32 from 8.0
// (Ampere), fp8 from 8.9 (Ada, Hopper), fp64 always.
uint64_t capabilities_for(int major, int minor);

// The PCI id in the sysfs form the other plugins use, "0000:18:00.0": lower-case, with a 4-digit
// domain. cuDeviceGetPCIBusId writes upper-case hex ("0000:3B:00.0") and nvidia-smi writes an
// 8-digit domain ("00000000:3B:00.0"); both become "0000:3b:00.0". A domain above 0xffff keeps
// all its digits.
std::string normalize_pci_bus_id(std::string_view bus_id);

// "12.4" from cuDriverGetVersion's 12040: the newest CUDA version the driver supports.
std::string driver_version_string(int version);

}  // namespace backplane::cuda
