// Build variants: the `build/<variant>/` folder names of a kernel package, and which of them
// suits a system (docs/device-rules.md §7.2; the `kernels` library's variants.py). Pure functions
// over plain data, so tables test every rule; system_facts() fills the facts from a device.
//
// Names (hub/README.md, "Build variants", has the full grammar):
//   this project's:  CXXABI-BACKEND-CPU-OS               cxx11-cu130-x86_64-linux
//                    noarch-FAMILY                        noarch-cuda, noarch-universal
//   kernel-builder:  torchXY[-CXXABI]-BACKEND-CPU-OS      torch215-cxx11-cu130-x86_64-linux
//                    torch-stable-abiXY-BACKEND-CPU-OS    torch-stable-abi29-cu128-x86_64-linux
//                    tvm-ffiXY-BACKEND-CPU-OS             tvm-ffi01-cu128-x86_64-linux
//                    torch-NAME (Python only)             torch-cuda, torch-universal
// BACKEND is cpu, metal, neuron, tpu, or a family with its version: cuXY (cuda), rocmXY,
// xpuXY, cannXY, where the last digit is the minor version (cu130 is CUDA 13.0, cu128 12.8).
// The kernel-builder forms resolve exactly as the `kernels` library 0.17 resolves them (a
// differential test runs its own functions over a table of variants and systems).
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
  // "torch" (torchXY, and the Python-only torch-NAME), "torch-stable-abi", "tvm-ffi" for
  // kernel-builder builds; empty for this project's own.
  std::string framework;
  // torch212 -> 2.12, torch-stable-abi29 -> 2.9, tvm-ffi01 -> 0.1; none for torch-NAME.
  std::optional<BackendVersion> framework_version;
  std::string cxx_abi;  // "cxx11", "cxx98"; empty when the name has none
  // "cpu", "cuda", "rocm", "xpu", "cann", "metal", "neuron", "tpu"; generic builds may also
  // name "npu" (the `kernels` library's name for cann) or "universal" (any backend), and a
  // torch-NAME build any NAME (the `kernels` library accepts any and matches it by name).
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
  // The LibTorch version of the host process, when it has one (torchXY builds must equal it,
  // stable-ABI builds be no newer); none: such builds are refused. The core never links
  // LibTorch, so only the caller can tell.
  std::optional<BackendVersion> torch_version;
  // That LibTorch's C++ ABI ("cxx11", "cxx98"), which a tagged torchXY build must match. The
  // `kernels` library knows it only on Linux (torch.compiled_with_cxx11_abi()); host() sets it
  // to this build's on Linux, as a LibTorch host links LibTorch with its own ABI.
  std::optional<std::string> torch_cxx_abi;
  std::optional<BackendVersion> tvm_ffi_version;  // tvm-ffi builds must equal it
  // macOS release (darwin): Metal arch builds need 26 or later (they are built for Metal 4).
  std::optional<BackendVersion> macos_version;

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
  // For a refused one, the rule that refused it, in the order they are checked: "parse", "cpu",
  // "os", "torch_version", "torch_cxx_abi", "stable_abi", "tvm_ffi", "cxx_abi", "backend",
  // "cuda_version", "backend_version" (a versioned backend whose system version is unknown),
  // "metal_macos". Empty for an accepted one.
  std::string refused_by;
};

struct VariantResolution {
  // Accepted variants first, best first: this project's arch builds; then, as the `kernels`
  // library orders them, stable-ABI builds (newest ABI first), torchXY builds (untagged before
  // tagged), tvm-ffi builds, each with the highest backend minor version first; then generic
  // builds for the backend (noarch-, then torch-), then universal ones. Ties by name. Refused
  // variants follow in name order.
  std::vector<VariantDecision> decisions;
  const VariantDecision* chosen() const {
    return !decisions.empty() && decisions.front().accepted ? &decisions.front() : nullptr;
  }
};

// Rules (docs/device-rules.md §7.2), checked in this order: CPU and OS exact; a torchXY build
// needs the host's Torch major.minor and, when tagged, its C++ ABI; a stable-ABI build an ABI no
// newer than the host's Torch; a tvm-ffi build the host's tvm-ffi major.minor; this project's
// builds this build's C++ ABI; then the backend: CUDA same major and variant minor <= the
// system's, other backends equal (versioned ones by version); Metal arch builds macOS 26. A
// generic build when its family is the system's backend (cann's is npu) or universal. A name
// that does not parse is refused with the parse error.
BACKPLANE_API VariantResolution resolve_variants(const std::vector<std::string>& variants,
                                                 const SystemFacts& system);

// "Cannot find a build variant for this system in <repo> (revision: <rev>)", then one line per
// variant with why it was refused ("  - cxx11-cu130-x86_64-linux: ..."), or a line saying the
// package has none.
BACKPLANE_API std::string no_variant_message(const std::string& repo, const std::string& revision,
                                             const VariantResolution& resolution);

}  // namespace backplane::hub
