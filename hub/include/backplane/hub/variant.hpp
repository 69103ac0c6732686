// Build variants: the `build/<variant>/` folder names of a kernel package, and which of them
// suits a system (docs/device-rules.md §7.2; the `kernels` library's variants.py). Pure functions
// over plain data, so tables test every rule; system_facts() fills the facts from a device.
//
// Names (hub/README.md, "Build variants", has the full grammar):
//   arch:    [FRAMEWORK-]CXXABI-BACKEND-CPU-OS   cxx11-cu130-x86_64-linux,
//                                                torch212-cxx11-cu130-x86_64-linux
//            (CXXABI may be left out after a framework: torch212-cu130-x86_64-linux)
//   generic: noarch-FAMILY | torch-FAMILY        noarch-cuda, noarch-universal, torch-universal
// BACKEND is cpu, metal, neuron, tpu, or a family with its version: cuXY (cuda), rocmXY,
// xpuXY, cannXY, where the last digit is the minor version (cu130 is CUDA 13.0, cu128 12.8).
#pragma once

#include <backplane/export.hpp>
#include <backplane/runtime/device_info.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::hub {

struct BACKPLANE_API BackendVersion {
  int major = 0;
  int minor = 0;
  // "13.0", "12.8", "2025.3"; a third part is ignored ("12.4.1"). Throws InvalidArgument naming
  // `source`.
  static BackendVersion parse(std::string_view text, std::string_view source);
  std::string str() const { return std::to_string(major) + "." + std::to_string(minor); }
  friend bool operator==(const BackendVersion& a, const BackendVersion& b) {
    return a.major == b.major && a.minor == b.minor;
  }
  friend bool operator!=(const BackendVersion& a, const BackendVersion& b) { return !(a == b); }
};

struct BACKPLANE_API BuildVariant {
  enum class Kind { kArch, kGeneric };

  std::string name;  // as written
  Kind kind = Kind::kArch;
  // "torch" for the `kernels` library's Torch builds; empty for this project's own.
  std::string framework;
  std::optional<BackendVersion> framework_version;  // torch212 -> 2.12; none for torch-FAMILY
  std::string cxx_abi;  // "cxx11", "cxx98"; empty when the name has none
  // "cpu", "cuda", "rocm", "xpu", "cann", "metal", "neuron", "tpu"; generic builds may also
  // name "npu" (the `kernels` library's name for cann) or "universal" (any backend).
  std::string backend;
  std::optional<BackendVersion> backend_version;  // cuda, rocm, xpu, cann (arch builds)
  std::string cpu;                                // "x86_64", "aarch64" (arch builds)
  std::string os;                                 // "linux", "darwin", "windows" (arch builds)

  // Throws InvalidArgument naming the text and what is accepted.
  static BuildVariant parse(std::string_view text);
};

// What a variant is matched against: the device's backend and this process.
struct BACKPLANE_API SystemFacts {
  std::string backend = "cpu";  // a BuildVariant backend name (cuda, rocm, cpu, metal, ...)
  // The backend's version: for cuda, the newest CUDA the driver supports. None: unknown, and
  // every variant that needs it is refused with `backend_version_note` as the reason.
  std::optional<BackendVersion> backend_version;
  std::string backend_version_note;  // where the version came from, or why it is unknown
  std::string cpu;                   // "x86_64"
  std::string os;                    // "linux"
  std::string cxx_abi;               // "cxx11" or "cxx98": the libstdc++ ABI of this build
  // The LibTorch version of the host process, when it has one (framework-tagged variants must
  // match it); none: such variants are refused. The core never links LibTorch, so only the
  // caller can tell.
  std::optional<BackendVersion> torch_version;

  // This process's CPU, OS and C++ ABI, with the cpu backend.
  static SystemFacts host();
};

// The facts for a device: its backend's Hub key (cuda, rocm, xpu, npu, mps, cpu) mapped to a
// variant backend (mps -> metal, npu -> cann), the CUDA version from the cuda plugin's
// "driver_version" property (other backends from a "runtime_version" property when their
// plugin reports one), and this process's CPU, OS and C++ ABI.
BACKPLANE_API SystemFacts system_facts(const DeviceInfo& device, const std::string& hub_key);

struct VariantDecision {
  std::string variant;
  bool accepted = false;
  std::string reason;  // why it was refused; for an accepted one, why it ranks where it does
};

struct VariantResolution {
  // Accepted variants first, best first: this project's arch builds, then Torch arch builds
  // (each with the highest backend minor version first), then generic builds for the backend,
  // then universal ones. Refused variants follow in name order.
  std::vector<VariantDecision> decisions;
  const VariantDecision* chosen() const {
    return !decisions.empty() && decisions.front().accepted ? &decisions.front() : nullptr;
  }
};

// Rules (docs/device-rules.md §7.2): CPU and OS exact; a C++ ABI tag must equal the system's; a
// framework must match exactly (Torch major.minor); CUDA: same major, variant minor <= the
// system's; other versioned backends exact; unversioned backends equal; a generic build when its
// family is the system's backend or universal. A name that does not parse is refused with the
// parse error.
BACKPLANE_API VariantResolution resolve_variants(const std::vector<std::string>& variants,
                                                 const SystemFacts& system);

// "Cannot find a build variant for this system in <repo> (revision: <rev>)", then one line per
// variant with why it was refused ("  - cxx11-cu130-x86_64-linux: ..."), or a line saying the
// package has none.
BACKPLANE_API std::string no_variant_message(const std::string& repo, const std::string& revision,
                                             const VariantResolution& resolution);

}  // namespace backplane::hub
