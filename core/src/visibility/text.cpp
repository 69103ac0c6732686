#include "text.hpp"

#include <backplane/error.hpp>

#include <limits>

namespace backplane::visibility_detail {

std::string quoted(std::string_view text) {
  return "'" + std::string(text) + "'";
}

std::string join(const std::vector<int>& values) {
  if (values.empty()) return "none";
  std::string out;
  for (int value : values) out += (out.empty() ? "" : ", ") + std::to_string(value);
  return out;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!is_digit(c)) return false;
  }
  return true;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> split_all(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(separator, start);
    if (end == std::string_view::npos) {
      pieces.push_back(text.substr(start));
      return pieces;
    }
    pieces.push_back(text.substr(start, end - start));
    start = end + 1;
  }
}

namespace {

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 99;
}

}  // namespace

CInteger read_c_integer(std::string_view text, int base) {
  CInteger number;
  std::size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    number.negative = text[i] == '-';
    ++i;
  }
  if (base == 0) {
    if (i + 2 < text.size() && text[i] == '0' && (text[i + 1] == 'x' || text[i + 1] == 'X') &&
        digit_value(text[i + 2]) < 16) {
      base = 16;
      i += 2;
    } else if (i < text.size() && text[i] == '0') {
      base = 8;
    } else {
      base = 10;
    }
  }
  const std::size_t first_digit = i;
  constexpr unsigned long long kMax = std::numeric_limits<unsigned long long>::max();
  const auto ubase = static_cast<unsigned long long>(base);
  while (i < text.size() && digit_value(text[i]) < base) {
    const auto digit = static_cast<unsigned long long>(digit_value(text[i]));
    if (number.magnitude > (kMax - digit) / ubase) {
      number.overflow = true;
    } else {
      number.magnitude = number.magnitude * ubase + digit;
    }
    if (!(number.digits.empty() && text[i] == '0')) number.digits += text[i];
    ++i;
  }
  if (i == first_digit) return CInteger{};
  if (number.digits.empty()) number.digits = "0";
  number.length = i;
  return number;
}

std::optional<int> as_index(const CInteger& number, int limit) {
  if (number.overflow || number.magnitude >= static_cast<unsigned long long>(limit)) {
    return std::nullopt;
  }
  return static_cast<int>(number.magnitude);
}

bool operator<(const PciAddress& a, const PciAddress& b) {
  if (a.domain != b.domain) return a.domain < b.domain;
  if (a.bus != b.bus) return a.bus < b.bus;
  if (a.device != b.device) return a.device < b.device;
  return a.function < b.function;
}

namespace {

std::optional<unsigned long long> hex_field(std::string_view text, std::size_t max_digits) {
  if (text.empty() || text.size() > max_digits) return std::nullopt;
  unsigned long long value = 0;
  for (char c : text) {
    const int digit = digit_value(c);
    if (digit >= 16) return std::nullopt;
    value = value * 16 + static_cast<unsigned long long>(digit);
  }
  return value;
}

}  // namespace

std::optional<PciAddress> parse_pci_bus_id(std::string_view text) {
  const std::vector<std::string_view> parts = split_all(text, ':');
  PciAddress address;
  std::string_view device_function;
  if (parts.size() == 3) {
    const auto domain = hex_field(parts[0], 8);
    const auto bus = hex_field(parts[1], 2);
    if (!domain || !bus) return std::nullopt;
    address.domain = *domain;
    address.bus = *bus;
    device_function = parts[2];
  } else if (parts.size() == 2) {
    const auto bus = hex_field(parts[0], 2);
    if (!bus) return std::nullopt;
    address.bus = *bus;
    device_function = parts[1];
    // Without a domain the function is required ("bus:device.function").
    if (device_function.find('.') == std::string_view::npos) return std::nullopt;
  } else {
    return std::nullopt;
  }
  const std::size_t dot = device_function.find('.');
  const auto device = hex_field(device_function.substr(0, dot), 2);
  if (!device) return std::nullopt;
  address.device = *device;
  if (dot != std::string_view::npos) {
    const auto function = hex_field(device_function.substr(dot + 1), 1);
    if (!function) return std::nullopt;
    address.function = *function;
  }
  return address;
}

std::vector<PciAddress> pci_addresses(const std::vector<PhysicalDevice>& devices,
                                      std::string_view who) {
  std::vector<PciAddress> addresses;
  addresses.reserve(devices.size());
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const auto address = parse_pci_bus_id(devices[i].pci_bus_id);
    if (!address) {
      throw InvalidArgument(std::string(who) + ": device " + std::to_string(i) +
                            " has PCI bus id " + quoted(devices[i].pci_bus_id) +
                            "; expected hexadecimal 'domain:bus:device.function' such as "
                            "'0000:18:00.0' (or 'domain:bus:device', 'bus:device.function')");
    }
    addresses.push_back(*address);
  }
  return addresses;
}

std::vector<int> all_indices(int count) {
  std::vector<int> indices;
  for (int i = 0; i < count; ++i) indices.push_back(i);
  return indices;
}

std::string visible_summary(const std::vector<int>& physical, std::string_view what) {
  const std::size_t n = physical.size();
  std::string noun = std::string(what) + (n == 1 ? "" : "s");
  if (n == 0) return "no " + std::string(what) + " is visible";
  return std::to_string(n) + " " + noun + " visible, in logical order: " + join(physical);
}

}  // namespace backplane::visibility_detail
