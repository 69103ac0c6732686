// build/<variant>/metadata.json: what a variant of a kernel package holds and needs
// (hub/README.md, "metadata.json", lists every field).
#pragma once

#include <backplane/export.hpp>
#include <backplane/hub/variant.hpp>
#include <backplane/runtime/device_info.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::hub {

inline constexpr int kMetadataFormat = 1;

// A function of the package: one kernel its library registers (bp_kernel_desc), declared here
// so that a package can be listed and checked without loading it.
struct PackageFunction {
  std::string name;                 // the kernel's implementation name: "rms_norm"
  std::string op;                   // the ABI op it implements: "rms_norm", "attention_forward"
  std::string device_type;          // "cpu", "cuda", ...
  std::vector<std::string> dtypes;  // empty: any
  std::optional<ComputeCapability> min_compute_capability;
  int max_head_dim = 0;  // 0: no limit
};

// A layer the package can stand in for ("RMSNorm"), the function that does its forward and,
// for training, the one that does its backward.
struct PackageLayer {
  std::string name;               // the layer class name in the mapping: "RMSNorm", "SiluAndMul"
  std::string function;           // one of the package's functions
  bool has_backward = false;      // usable in training mode
  std::string backward_function;  // one of the package's functions; set when has_backward is
};

struct PackageMetadata {
  int format = kMetadataFormat;
  uint32_t abi_major = 0;  // the plugin ABI the library is built against ("1.3")
  uint32_t abi_minor = 0;
  std::string repo_id;                            // "org/repo"
  std::string version;                            // the package's own version, free form
  std::string license;                            // an SPDX expression, free form
  std::string backend;                            // as in variant names: "cpu", "cuda", "rocm", ...
  std::optional<BackendVersion> backend_version;  // required for cuda, rocm, xpu, cann
  std::vector<std::string> archs;                 // "x86_64"; "sm_80", "sm_90"; "gfx90a"
  std::string library;  // the shared library's file name in the variant folder
  std::vector<PackageFunction> functions;
  std::vector<PackageLayer> layers;

  std::string abi_version() const {
    return std::to_string(abi_major) + "." + std::to_string(abi_minor);
  }
  const PackageFunction* function(std::string_view name) const;
};

// Parses and checks metadata.json text. Every error is InvalidArgument naming `file` and the
// field ("build/cxx11-cpu-x86_64-linux/metadata.json: functions[0].op: ...").
BACKPLANE_API PackageMetadata parse_metadata(std::string_view text,
                                             const std::filesystem::path& file);
// Reads and parses a file (at most 1 MiB).
BACKPLANE_API PackageMetadata read_metadata(const std::filesystem::path& file);
// The metadata as JSON text, in the format parse_metadata reads.
BACKPLANE_API std::string to_json(const PackageMetadata& metadata);

// Checks that the metadata fits the variant folder it is in: the same backend and version (a
// generic variant names only the backend family, "universal" any), and a library that is a
// plain file name. Throws InvalidArgument naming `file` and the field.
BACKPLANE_API void check_metadata_fits(const PackageMetadata& metadata, const BuildVariant& variant,
                                       const std::filesystem::path& file);

// Why code built for `archs` of `backend` cannot run on `device`; empty when it can. CUDA: an
// sm_XY build runs on devices of compute capability X.Z with Z >= Y; cpu: the CPU architecture
// must be listed; others: the device's arch must be listed. An empty list runs anywhere.
BACKPLANE_API std::string arch_mismatch(const PackageMetadata& metadata, const DeviceInfo& device);

}  // namespace backplane::hub
