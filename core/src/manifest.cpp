#include "manifest.hpp"

#include <backplane/internal/checked_json.hpp>
#include <backplane/internal/files.hpp>
#include <backplane/rules/device.hpp>

#include <nlohmann/json.hpp>

#include <charconv>
#include <fstream>
#include <sstream>

#include "plugin_safety/library_location.hpp"

namespace backplane::detail {
namespace {

using nlohmann::json;

const json& require(const json& object, const char* key, const char* where) {
  auto it = object.find(key);
  if (it == object.end()) {
    throw ManifestError(std::string("missing \"") + key + "\" in " + where);
  }
  return *it;
}

std::string require_string(const json& object, const char* key, const char* where) {
  const json& value = require(object, key, where);
  if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
    throw ManifestError(std::string("\"") + key + "\" in " + where + " must be a non-empty string");
  }
  return value.get<std::string>();
}

bool is_plugin_name(const std::string& name) {
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  }
  return !name.empty() && name.size() <= 64;
}

bool parse_uint(std::string_view text, uint32_t& out) {
  if (text.empty() || text.size() > 9) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::pair<uint32_t, uint32_t> parse_abi_version(const std::string& text, const std::string& what) {
  const size_t dot = text.find('.');
  uint32_t major = 0, minor = 0;
  if (dot == std::string::npos || !parse_uint(std::string_view(text).substr(0, dot), major) ||
      !parse_uint(std::string_view(text).substr(dot + 1), minor)) {
    throw ManifestError(what + " \"" + text + "\" is not MAJOR.MINOR, e.g. \"1.0\"");
  }
  return {major, minor};
}

Manifest parse_manifest(const std::string& json_text, const std::filesystem::path& manifest_path) {
  json root;
  try {
    root = parse_checked_json(json_text, "");
  } catch (const InvalidArgument& e) {
    throw ManifestError(e.what());
  }
  if (!root.is_object()) throw ManifestError("the top level must be a JSON object");

  const std::string format = require_string(root, "file_format_version", "the manifest");
  if (format.rfind("1.", 0) != 0) {
    throw ManifestError("file_format_version \"" + format +
                        "\" is not supported; this core reads 1.x.y");
  }

  const json& plugin = require(root, "plugin", "the manifest");
  if (!plugin.is_object()) throw ManifestError("\"plugin\" must be a JSON object");

  Manifest m;
  m.name = require_string(plugin, "name", "\"plugin\"");
  if (!is_plugin_name(m.name)) {
    throw ManifestError("plugin name \"" + m.name +
                        "\" must be 1-64 characters of a-z, 0-9, '_' or '-'");
  }

  const std::filesystem::path library = require_string(plugin, "library_path", "\"plugin\"");
  m.library_is_relative = !library.is_absolute();
  if (m.library_is_relative) {
    if (std::string escape = relative_library_escape_reason(library); !escape.empty()) {
      throw ManifestError(escape);
    }
  }
  m.library = library.is_absolute() ? library : manifest_path.parent_path() / library;
  m.library = m.library.lexically_normal();

  std::tie(m.abi_major, m.abi_minor) =
      parse_abi_version(require_string(plugin, "abi_version", "\"plugin\""), "abi_version");

  const json& types = require(plugin, "device_types", "\"plugin\"");
  if (!types.is_array() || types.empty()) {
    throw ManifestError("\"device_types\" must be a non-empty array of device type names");
  }
  for (const json& type : types) {
    if (!type.is_string() || !is_valid_device_type_name(type.get_ref<const std::string&>())) {
      throw ManifestError("device type " + type.dump() +
                          " in \"device_types\" is not a name of letters and '_'");
    }
    m.device_types.push_back(type.get<std::string>());
  }
  return m;
}

Manifest read_manifest(const std::filesystem::path& manifest_path) {
  std::string text;
  try {
    text = internal::read_bounded_file(manifest_path, kMaxManifestBytes, "manifest");
  } catch (const InvalidArgument& e) {
    throw ManifestError(e.what());
  }
  return parse_manifest(text, manifest_path);
}

}  // namespace backplane::detail
