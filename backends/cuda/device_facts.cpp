#include "device_facts.hpp"

#include <backplane/plugin.h>

#include <cctype>

namespace backplane::cuda {

std::string format_uuid(const char (&bytes)[16], std::string_view prefix) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(prefix);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    const auto byte = static_cast<unsigned char>(bytes[i]);
    out += kHex[byte >> 4];
    out += kHex[byte & 0x0f];
  }
  return out;
}

std::string arch_name(int major, int minor) {
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

uint64_t capabilities_for(int major, int minor) {
  const int cc = major * 10 + minor;
  uint64_t caps = BP_CAP_FP64;
  if (cc >= 53) caps |= BP_CAP_FP16;
  if (cc >= 80) caps |= BP_CAP_BF16 | BP_CAP_TF32;
  if (cc >= 89) caps |= BP_CAP_FP8;
  return caps;
}

std::string normalize_pci_bus_id(std::string_view bus_id) {
  std::string out;
  out.reserve(bus_id.size());
  for (char c : bus_id) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string::size_type colon = out.find(':');
  // Drop leading zeros of a domain wider than 4 digits, down to 4.
  if (colon != std::string::npos && colon > 4) {
    std::string::size_type drop = 0;
    while (drop < colon - 4 && out[drop] == '0') ++drop;
    out.erase(0, drop);
  }
  return out;
}

std::string driver_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace backplane::cuda
