// Device-string parsing with c10's grammar and messages (docs/device-rules.md §1).
#include <backplane/error.hpp>
#include <backplane/internal/device_types.hpp>
#include <backplane/internal/text.hpp>
#include <backplane/rules/device.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

namespace backplane {
namespace {
Device parse_device_grammar(std::string_view text);
}  // namespace

Device::Device(std::string_view text) : Device(parse_device_grammar(text)) {}

Device::Device(std::string type, std::optional<int> index) : type_(std::move(type)), index_(index) {
  if (!is_valid_device_type_name(type_)) {
    throw InvalidArgument("Device type " + (type_.empty() ? std::string("''") : "'" + type_ + "'") +
                          " is not a device type name ([a-zA-Z_]+, such as cpu or cuda)" +
                          (type_.find(':') != std::string::npos
                               ? "; parse a device string such as 'cuda:1' with Device(\"cuda:1\")"
                               : std::string()));
  }
  if (index_ && *index_ < 0) {
    throw InvalidArgument("Device index must not be negative, got " + std::to_string(*index_) +
                          " for " + type_);
  }
}

std::string Device::str() const {
  return index_ ? type_ + ":" + std::to_string(*index_) : type_;
}

std::ostream& operator<<(std::ostream& os, const Device& device) {
  return os << device.str();
}

const std::vector<std::string>& builtin_device_types() {
  static const std::vector<std::string> types = {"cpu", "cuda", "xpu",    "mps", "hpu", "npu",
                                                 "mlu", "musa", "neuron", "tpu", "meta"};
  return types;
}

std::vector<std::string> reserved_type_owners(std::string_view type) {
  std::vector<std::string> owners;
  for (const internal::ReservedDeviceType& reserved : internal::kReservedDeviceTypes) {
    if (reserved.name != type) continue;
    for (std::string_view owner : reserved.owners) {
      if (!owner.empty()) owners.emplace_back(owner);
    }
  }
  return owners;
}

bool is_valid_device_type_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
  });
}

namespace {

[[noreturn]] void invalid(std::string_view text) {
  throw InvalidArgument("Invalid device string: '" + std::string(text) + "'");
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The grammar alone: type name, optional index, the cpu index rule. Known types are not checked.
Device parse_device_grammar(std::string_view text) {
  if (text.empty()) throw InvalidArgument("Device string must not be empty");

  const size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  if (!is_valid_device_type_name(name)) invalid(text);

  std::optional<int> index;
  if (colon != std::string_view::npos) {
    const std::string_view digits = text.substr(colon + 1);
    // Rejects a trailing ':', a sign, a second ':', trailing junk and leading zeros.
    if (!all_digits(digits) || (digits.size() > 1 && digits[0] == '0')) invalid(text);
    int value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc() || end != digits.data() + digits.size()) {
      throw InvalidArgument("Could not parse device index '" + std::string(digits) +
                            "' in device string '" + std::string(text) + "'");
    }
    index = value;
  }

  if (name == "cpu" && index && *index != 0) {
    throw InvalidArgument("CPU device index must be absent or zero, got " + std::to_string(*index));
  }
  return Device(std::string(name), index);
}

}  // namespace

Device parse_device(std::string_view text, const std::vector<std::string>& known_types) {
  Device device = parse_device_grammar(text);
  if (std::find(known_types.begin(), known_types.end(), device.type()) == known_types.end()) {
    throw InvalidArgument("Expected one of " + internal::join(known_types) +
                          " device type at start of device string: " + device.type());
  }
  return device;
}

Device parse_device(std::string_view text) {
  return parse_device(text, builtin_device_types());
}

}  // namespace backplane
