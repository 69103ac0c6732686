// KernelConfig (transformers' user kernel mapping) from JSON into mapping entries.
#include <backplane/error.hpp>
#include <backplane/rules/kernel_mapping.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>

namespace backplane {
namespace {

using nlohmann::json;

struct Where {
  std::string source;
  std::string layer;
  std::string device;  // empty: every key
  std::string error(const std::string& why) const {
    std::string at = "kernel config " + source + ", layer \"" + layer + "\"";
    if (!device.empty()) at += ", device \"" + device + "\"";
    return at + ": " + why;
  }
};

// "org/repo:Layer" or ["org/repo:Layer", {"revision"|"version"|"trust_remote_code": ...}].
LayerKernelRef parse_kernel(const json& value, const Where& where) {
  const json* text = &value;
  const json* metadata = nullptr;
  if (value.is_array()) {
    if (value.size() != 2 || !value[0].is_string() || !value[1].is_object()) {
      throw InvalidArgument(
          where.error("a list must be [\"org/repo:Layer\", {metadata}], got " + value.dump()));
    }
    text = &value[0];
    metadata = &value[1];
  }
  if (!text->is_string()) {
    throw InvalidArgument(
        where.error("expected \"org/repo:Layer\" (or per device / per mode "
                    "objects of those), got " +
                    value.dump()));
  }
  LayerKernelRef ref;
  try {
    ref = LayerKernelRef::parse(text->get<std::string>());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(where.error(e.what()));
  }
  if (metadata == nullptr) return ref;
  for (const auto& [key, field] : metadata->items()) {
    if (key == "revision" && field.is_string()) {
      ref.revision = field.get<std::string>();
    } else if (key == "version" && field.is_number_integer()) {
      ref.version = field.get<int>();
    } else if (key == "trust_remote_code" && field.is_boolean()) {
      ref.trust_remote_code = field.get<bool>();
    } else {
      throw InvalidArgument(
          where.error("metadata \"" + key + "\": " + field.dump() +
                      " is not accepted; accepted: \"revision\" (string), \"version\" (integer), "
                      "\"trust_remote_code\" (true or false)"));
    }
  }
  if (ref.revision.has_value() == ref.version.has_value()) {
    throw InvalidArgument(where.error(
        "metadata needs exactly one of \"revision\" and \"version\" (they exclude each other)"));
  }
  return ref;
}

bool is_mode_object(const json& value) {
  if (!value.is_object() || value.empty()) return false;
  for (const auto& item : value.items()) {
    try {
      KernelMode::parse(item.key());
    } catch (const InvalidArgument&) {
      return false;
    }
  }
  return true;
}

void add_for_device(KernelMapping& mapping, const json& value, const Where& where) {
  KernelMappingEntry entry;
  entry.layer = where.layer;
  entry.device_key = where.device;
  entry.source = where.source;
  if (is_mode_object(value)) {
    for (const auto& [mode, kernel] : value.items()) {
      entry.mode = KernelMode::parse(mode);
      entry.kernel = parse_kernel(kernel, where);
      mapping.add(entry);
    }
    return;
  }
  entry.mode = KernelMode::fallback();
  entry.kernel = parse_kernel(value, where);
  mapping.add(entry);
}

}  // namespace

const std::vector<std::string>& kernel_config_device_keys() {
  static const std::vector<std::string> keys = {"cuda",   "rocm", "xpu", "npu",
                                                "neuron", "tpu",  "mps", "cpu"};
  return keys;
}

KernelMapping parse_kernel_config(const json& config, const std::vector<std::string>& device_keys,
                                  std::string_view source) {
  if (!config.is_object()) {
    throw InvalidArgument("kernel config " + std::string(source) +
                          ": expected an object {\"Layer\": \"org/repo:Layer\" | {\"cuda\": "
                          "\"org/repo:Layer\", ...}}, got " +
                          std::string(config.type_name()));
  }
  const std::vector<std::string>& known = kernel_config_device_keys();
  const auto check_key = [&](const Where& where) {
    if (std::find(known.begin(), known.end(), where.device) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      throw InvalidArgument(where.error("unknown device key; accepted: " + list));
    }
  };
  KernelMapping mapping;
  for (const auto& [layer, value] : config.items()) {
    Where where{std::string(source), layer, ""};
    if (layer.empty()) throw InvalidArgument(where.error("the layer name is empty"));
    if (value.is_object() && value.empty()) {
      throw InvalidArgument(
          where.error("the object is empty; give \"org/repo:Layer\" or "
                      "{\"cuda\": \"org/repo:Layer\", ...}"));
    }
    // A per-device object has device keys; a per-mode object applies to every device.
    if (value.is_object() && !is_mode_object(value)) {
      for (const auto& [device, per_device] : value.items()) {
        where.device = device;
        check_key(where);
        add_for_device(mapping, per_device, where);
      }
      continue;
    }
    for (const std::string& device : device_keys) {
      where.device = device;
      check_key(where);
      add_for_device(mapping, value, where);
    }
  }
  return mapping;
}

}  // namespace backplane
