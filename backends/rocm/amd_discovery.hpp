// Discovery of AMD GPUs through an opened HIP runtime: each GPU it shows, or the specific
// reason it shows none.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hip_api.hpp"

namespace backplane::rocm {

struct AmdGpu {
  std::string name;
  std::string uuid;           // "GPU-0123456789abcdef"; empty: unknown
  std::string pci_bus_id;     // "0000:c1:00.0"; empty: unknown
  std::string gcn_arch_name;  // "gfx90a:sramecc+:xnack-"; empty: unknown
  std::string arch;           // "gfx90a"; empty: unknown
  uint64_t memory_total = 0;
  int64_t multiprocessor_count = -1;  // compute units; -1: unknown
  int64_t clock_mhz = -1;
  int64_t warp_size = -1;  // 64 on CDNA and GCN, 32 on RDNA
  bool integrated = false;
  uint64_t capabilities = 0;
  std::string runtime_version;  // the HIP runtime's "5.2" (hub variants rocm52); empty: unknown
};

struct AmdDiscovery {
  std::vector<AmdGpu> gpus;        // in HIP's order: index i is HIP device i
  std::string unavailable_reason;  // set when gpus is empty
};

// The GPUs the runtime shows; the runtime has applied the visibility variables itself.
// `visibility_variable` (may be empty) is only named in a reason when no GPU is shown.
AmdDiscovery discover_amd_gpus(const HipRuntime& hip, const std::string& visibility_variable);

// HIP_VERSION (major * 10000000 + minor * 100000 + patch, what hipRuntimeGetVersion gives) as
// "major.minor"; empty for a value that is not one.
std::string hip_version_string(int version);

using GetEnv = std::function<const char*(const char*)>;

// The first of ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES that is set (an
// empty value counts: it hides every GPU); empty when none is.
std::string rocm_visibility_variable(const GetEnv& getenv);

// "; /dev/kfd does not exist (...)" when `kfd` is missing (ROCm reaches GPUs only through the
// amdgpu driver's /dev/kfd), else "".
std::string kfd_note(const std::string& kfd = "/dev/kfd");

}  // namespace backplane::rocm
