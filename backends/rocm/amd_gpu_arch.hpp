// What an AMD GPU is, from the strings the HIP runtime gives: the gfx target (arch), the
// capabilities that follow from it, and identifiers in the forms users type. Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::rocm {

// An LLVM AMDGPU target, "gfx90a:sramecc+:xnack-": processor gfx90a = GFX 9.0 stepping a,
// with target features.
struct GcnArch {
  std::string processor;              // "gfx90a": the device's arch
  int major = 0;                      // 9   (decimal: gfx1100 is 11)
  int minor = 0;                      // 0   (one hex digit)
  int stepping = 0;                   // 0xa (one hex digit)
  std::vector<std::string> features;  // {"sramecc+", "xnack-"}
};

// nullopt unless `gcn_arch_name` starts with gfx<major><minor><stepping>.
std::optional<GcnArch> parse_gcn_arch_name(std::string_view gcn_arch_name);

// bp_device_capability bits of a GPU of this arch; see the table in amd_gpu_arch.cpp.
uint64_t amd_capabilities(const GcnArch& arch, bool integrated);

// hipDeviceGetUuid() gives the 16 ASCII hex digits of the ROCm unique id; this returns
// "GPU-<those digits>", the form ROCR_VISIBLE_DEVICES and rocm-smi use. Bytes that are not all
// hex digits are printed as a standard UUID instead. Empty for an all-zero id (none).
std::string format_hip_uuid(const char (&bytes)[16]);

// "0000:c1:00.0" (lower case, 4-digit domain) from hipDeviceGetPCIBusId() output; nullopt when
// the text is not domain:bus:device.function.
std::optional<std::string> normalize_pci_bus_id(std::string_view text);

}  // namespace backplane::rocm
