// The device_map argument of from_pretrained(), parsed as transformers does it before any
// placement (modeling_utils.py: the str / int / dict checks ahead of loading).
#include <backplane/error.hpp>
#include <backplane/rules/selection.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <limits>

namespace backplane {

namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr const char* kStrategies[] = {"auto", "balanced", "balanced_low_0", "sequential"};

[[noreturn]] void bad_string(std::string_view value) {
  throw InvalidArgument(
      "When passing device_map as a string, the value needs to be a device name (e.g. cpu, "
      "cuda:0) or 'auto', 'balanced', 'balanced_low_0', 'sequential' but found " +
      std::string(value) + ".");
}

[[noreturn]] void negative_int() {
  // The trailing space is transformers' own.
  throw InvalidArgument(
      "You can't pass device_map as a negative int. If you want to put the model on the cpu, "
      "pass device_map = 'cpu' ");
}

// "-12" or "12": what Python's int() would read back from the text, without whitespace or '+'.
bool is_integer_text(std::string_view text) {
  if (!text.empty() && text[0] == '-') text.remove_prefix(1);
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

int index_from_text(std::string_view text) {
  if (text[0] == '-') negative_int();
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw InvalidArgument("device_map index " + std::string(text) +
                          " is too large: no process has that many accelerators");
  }
  return value;
}

DeviceMapTarget index_target(int index) {
  DeviceMapTarget target;
  target.kind = DeviceMapTarget::Kind::kIndex;
  target.index = index;
  return target;
}

DeviceMapTarget device_target(Device device) {
  DeviceMapTarget target;
  target.kind = DeviceMapTarget::Kind::kDevice;
  target.device = std::move(device);
  return target;
}

// One value of the dict form. Accelerate takes an int, "disk", or anything torch.device takes.
DeviceMapTarget dict_target(const std::string& module, const OrderedJson& value,
                            const std::vector<std::string>& known_types) {
  const std::string where = "device_map entry '" + module + "'";
  if (value.is_number_integer()) {
    const long long index = value.get<long long>();
    if (index < 0 || index > std::numeric_limits<int>::max()) {
      throw InvalidArgument(where + ": accelerator index " + std::to_string(index) +
                            " is out of range; give a non-negative int, 'disk' or a device name "
                            "(e.g. cpu, cuda:0)");
    }
    return index_target(static_cast<int>(index));
  }
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    if (text == "disk") {
      DeviceMapTarget target;
      target.kind = DeviceMapTarget::Kind::kDisk;
      return target;
    }
    try {
      return device_target(parse_device(text, known_types));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(where + ": " + e.what() +
                            "; give a non-negative int, 'disk' or a device name (e.g. cpu, "
                            "cuda:0)");
    }
  }
  throw InvalidArgument(where +
                        ": expected a non-negative int, 'disk' or a device name (e.g. "
                        "cpu, cuda:0), found " +
                        value.dump());
}

DeviceMapRequest parse_dict(std::string_view value, const std::vector<std::string>& known_types) {
  OrderedJson object;
  try {
    object = OrderedJson::parse(value.begin(), value.end());
  } catch (const OrderedJson::parse_error& e) {
    throw InvalidArgument("device_map '" + std::string(value) +
                          "' is not a valid JSON object {module: device}: " + e.what());
  }
  if (!object.is_object()) {
    throw InvalidArgument("device_map '" + std::string(value) +
                          "' is not a JSON object {module: device}");
  }
  DeviceMapRequest request;
  request.kind = DeviceMapKind::kExplicit;
  for (const auto& [module, target] : object.items()) {
    request.modules.emplace_back(module, dict_target(module, target, known_types));
  }
  return request;
}

}  // namespace

const char* to_string(DeviceMapKind kind) {
  switch (kind) {
    case DeviceMapKind::kAuto:
      return "auto";
    case DeviceMapKind::kBalanced:
      return "balanced";
    case DeviceMapKind::kBalancedLow0:
      return "balanced_low_0";
    case DeviceMapKind::kSequential:
      return "sequential";
    case DeviceMapKind::kDevice:
      return "device";
    case DeviceMapKind::kIndex:
      return "index";
    case DeviceMapKind::kExplicit:
      return "explicit";
  }
  return "?";
}

std::string DeviceMapTarget::str() const {
  switch (kind) {
    case Kind::kIndex:
      return std::to_string(index);
    case Kind::kDevice:
      return device.str();
    case Kind::kDisk:
      return "disk";
  }
  return "?";
}

std::string DeviceMapRequest::str() const {
  switch (kind) {
    case DeviceMapKind::kDevice:
    case DeviceMapKind::kIndex:
      return modules.empty() ? "" : modules.front().second.str();
    case DeviceMapKind::kExplicit: {
      OrderedJson object = OrderedJson::object();
      for (const auto& [module, target] : modules) {
        if (target.kind == DeviceMapTarget::Kind::kIndex) {
          object[module] = target.index;
        } else {
          object[module] = target.str();
        }
      }
      return object.dump();
    }
    default:
      return to_string(kind);
  }
}

DeviceMapRequest parse_device_map(std::string_view value,
                                  const std::vector<std::string>& known_types) {
  for (size_t i = 0; i < std::size(kStrategies); ++i) {
    if (value == kStrategies[i]) {
      DeviceMapRequest request;
      request.kind = static_cast<DeviceMapKind>(i);
      return request;
    }
  }
  if (is_integer_text(value)) return parse_device_map_index(index_from_text(value));
  if (!value.empty() && value.front() == '{') return parse_dict(value, known_types);
  // transformers: {"": torch.device(value)}, any RuntimeError becoming its own message.
  try {
    DeviceMapRequest request;
    request.kind = DeviceMapKind::kDevice;
    request.modules.emplace_back("", device_target(parse_device(value, known_types)));
    return request;
  } catch (const InvalidArgument&) {
    bad_string(value);
  }
}

DeviceMapRequest parse_device_map(std::string_view value) {
  return parse_device_map(value, builtin_device_types());
}

DeviceMapRequest parse_device_map_index(long long index) {
  if (index < 0) negative_int();
  if (index > std::numeric_limits<int>::max()) {
    throw InvalidArgument("device_map index " + std::to_string(index) +
                          " is too large: no process has that many accelerators");
  }
  DeviceMapRequest request;
  request.kind = DeviceMapKind::kIndex;
  request.modules.emplace_back("", index_target(static_cast<int>(index)));
  return request;
}

}  // namespace backplane
