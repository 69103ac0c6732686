#include "amd_gpu_arch.hpp"

#include <backplane/plugin.h>

#include <cstdio>

namespace backplane::rocm {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A non-empty run of hex digits as a number; nullopt otherwise or past `max`.
std::optional<uint32_t> parse_hex(std::string_view s, uint32_t max) {
  if (s.empty() || s.size() > 8) return std::nullopt;
  uint64_t value = 0;
  for (char c : s) {
    const int d = hex_digit(c);
    if (d < 0) return std::nullopt;
    value = value * 16 + static_cast<uint64_t>(d);
  }
  if (value > max) return std::nullopt;
  return static_cast<uint32_t>(value);
}

}  // namespace

std::optional<GcnArch> parse_gcn_arch_name(std::string_view gcn_arch_name) {
  const size_t colon = gcn_arch_name.find(':');
  const std::string_view processor = gcn_arch_name.substr(0, colon);
  if (processor.size() < 6 || processor.substr(0, 3) != "gfx") return std::nullopt;
  const std::string_view major = processor.substr(3, processor.size() - 5);  // 1 or 2 digits
  if (major.size() > 2) return std::nullopt;
  GcnArch arch;
  for (char c : major) {
    if (c < '0' || c > '9') return std::nullopt;
    arch.major = arch.major * 10 + (c - '0');
  }
  arch.minor = hex_digit(processor[processor.size() - 2]);
  arch.stepping = hex_digit(processor[processor.size() - 1]);
  if (arch.minor < 0 || arch.stepping < 0) return std::nullopt;
  arch.processor = std::string(processor);
  std::string_view rest = colon == std::string_view::npos ? "" : gcn_arch_name.substr(colon + 1);
  while (!rest.empty()) {
    const size_t next = rest.find(':');
    if (const std::string_view feature = rest.substr(0, next); !feature.empty()) {
      arch.features.emplace_back(feature);
    }
    rest = next == std::string_view::npos ? "" : rest.substr(next + 1);
  }
  return arch;
}

// Capabilities by gfx target (native support in hardware and in ROCm's libraries):
//   target                      fp16  bf16  fp8
//   gfx8 and older               -     -     -
//   gfx9  (gfx900-gfx908)        x     -     -    Vega, MI50, MI100
//   gfx90a                       x     x     -    MI200
//   gfx94x                       x     x     x    MI300 (fp8 as e4m3fnuz/e5m2fnuz)
//   gfx95x                       x     x     x    MI350 (OCP fp8)
//   gfx10 (gfx1010-gfx1036)      x     -     -    RDNA 1 and 2
//   gfx11                        x     x     -    RDNA 3 (bf16 WMMA)
//   gfx12 and newer              x     x     x    RDNA 4 (fp8 WMMA)
// fp64 on every AMD GPU (slow on consumer parts, but there); unified memory on APUs
// (hipDeviceAttributeIntegrated), whose GPU uses the host's memory.
uint64_t amd_capabilities(const GcnArch& arch, bool integrated) {
  uint64_t caps = BP_CAP_FP64;
  if (integrated) caps |= BP_CAP_UNIFIED_MEMORY;
  if (arch.major >= 9) caps |= BP_CAP_FP16;
  const bool gfx90a = arch.major == 9 && arch.minor == 0 && arch.stepping == 0xa;
  const bool gfx94x_or_95x = arch.major == 9 && (arch.minor == 4 || arch.minor == 5);
  if (gfx90a || gfx94x_or_95x || arch.major >= 11) caps |= BP_CAP_BF16;
  if (gfx94x_or_95x || arch.major >= 12) caps |= BP_CAP_FP8;
  return caps;
}

std::string format_hip_uuid(const char (&bytes)[16]) {
  bool all_hex = true;
  bool all_zero = true;
  for (char c : bytes) {
    all_hex = all_hex && hex_digit(c) >= 0;
    all_zero = all_zero && c == 0;
  }
  if (all_zero) return "";
  if (all_hex) return "GPU-" + std::string(bytes, sizeof bytes);
  std::string out;
  char hex[3];
  for (size_t i = 0; i < sizeof bytes; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    std::snprintf(hex, sizeof hex, "%02x",
                  static_cast<unsigned>(static_cast<unsigned char>(bytes[i])));
    out += hex;
  }
  return out;
}

std::optional<std::string> normalize_pci_bus_id(std::string_view text) {
  // [domain:]bus:device.function
  const size_t dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::optional<uint32_t> function = parse_hex(text.substr(dot + 1), 7);
  std::string_view head = text.substr(0, dot);
  const size_t last_colon = head.rfind(':');
  if (last_colon == std::string_view::npos) return std::nullopt;
  const std::optional<uint32_t> device = parse_hex(head.substr(last_colon + 1), 0x1f);
  head = head.substr(0, last_colon);
  const size_t first_colon = head.rfind(':');
  const std::optional<uint32_t> bus = parse_hex(head.substr(first_colon + 1), 0xff);
  std::optional<uint32_t> domain = 0;
  if (first_colon != std::string_view::npos) {
    domain = parse_hex(head.substr(0, first_colon), 0xffffffff);
  }
  if (!function || !device || !bus || !domain) return std::nullopt;
  char out[32];
  std::snprintf(out, sizeof out, "%04x:%02x:%02x.%x", *domain, *bus, *device, *function);
  return std::string(out);
}

}  // namespace backplane::rocm
