// Text helpers shared by the visibility rules. Internal: no compatibility promise.
#pragma once

#include <backplane/rules/visibility.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::visibility_detail {

// "'text'", for notes and messages.
std::string quoted(std::string_view text);

// "0, 2, 1", or "none" for an empty list.
std::string join(const std::vector<int>& values);

bool is_space(char c);
bool is_digit(char c);
bool all_digits(std::string_view text);  // non-empty and only 0-9
std::string_view trim(std::string_view text);

// Splits like Python's str.split(sep): n separators give n + 1 pieces, empty ones included.
std::vector<std::string_view> split_all(std::string_view text, char separator);

// The leading integer of `text`, read as C's strtol/strtoul read it: leading whitespace, an
// optional sign, then digits in `base` (10, or 0 to detect "0x" hex and "0" octal).
struct CInteger {
  std::size_t length = 0;  // characters consumed; 0 when no digit was read
  bool negative = false;
  bool overflow = false;  // the magnitude does not fit 64 bits
  unsigned long long magnitude = 0;
  std::string digits;  // the digits read, leading zeros removed ("0" for zero)
};
CInteger read_c_integer(std::string_view text, int base);

// The value of a non-negative CInteger as an index, or nullopt when it is at or beyond `limit`.
std::optional<int> as_index(const CInteger& number, int limit);

// A parsed PCI address, ordered as nvidia-smi and compute-runtime order them.
struct PciAddress {
  unsigned long long domain = 0, bus = 0, device = 0, function = 0;
  friend bool operator<(const PciAddress& a, const PciAddress& b);
};

// The accepted forms of cudaDeviceGetByPCIBusId, hexadecimal: "domain:bus:device.function",
// "domain:bus:device", "bus:device.function".
std::optional<PciAddress> parse_pci_bus_id(std::string_view text);

// Parses every device's PCI bus id; throws InvalidArgument naming the first bad one.
std::vector<PciAddress> pci_addresses(const std::vector<PhysicalDevice>& devices,
                                      std::string_view who);

// 0, 1, ..., count - 1.
std::vector<int> all_indices(int count);

// "3 devices visible: 1, 0, 2", the closing note of most rules.
std::string visible_summary(const std::vector<int>& physical, std::string_view what);

}  // namespace backplane::visibility_detail
