// Plugin manifests: a JSON file that describes a plugin without loading it.
//   {"file_format_version": "1.0.0",
//    "plugin": {"name": "cpu", "library_path": "libbackplane-cpu.so",
//               "abi_version": "1.1", "device_types": ["cpu"]}}
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace backplane::detail {

struct Manifest {
  std::string name;
  std::filesystem::path library;     // absolute: library_path resolved against the manifest folder
  bool library_is_relative = false;  // library_path was relative: it must stay in that folder
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  std::vector<std::string> device_types;
};

// Thrown with a message that names the field and what is accepted.
class ManifestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Manifest files bigger than this are refused unread: a manifest is a few hundred bytes.
inline constexpr std::uintmax_t kMaxManifestBytes = 64 * 1024;

Manifest parse_manifest(const std::string& json_text, const std::filesystem::path& manifest_path);
Manifest read_manifest(const std::filesystem::path& manifest_path);

// "1.1" -> {1, 1}; throws ManifestError naming `what` otherwise.
std::pair<uint32_t, uint32_t> parse_abi_version(const std::string& text, const std::string& what);

}  // namespace backplane::detail
