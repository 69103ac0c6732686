#include <backplane/plugin.h>
#include <backplane/error.hpp>
#include <backplane/hub/metadata.hpp>
#include <backplane/hub/repo_id.hpp>
#include <backplane/internal/checked_json.hpp>
#include <backplane/internal/device_types.hpp>
#include <backplane/internal/files.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "files.hpp"
#include "json_fields.hpp"

namespace backplane::hub {
namespace {

using detail::Fields;
using nlohmann::json;

bool is_kernel_name(const std::string& s) {  // the core's rule for op and implementation names
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool is_layer_name(const std::string& s) {
  return !s.empty() && s.size() <= 128 && std::isalpha(static_cast<unsigned char>(s[0])) &&
         std::all_of(s.begin(), s.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
         });
}

bool backend_has_version(const std::string& backend) {
  const internal::DeviceTypeFacts* type = internal::device_type_of_build_backend(backend);
  return type != nullptr && type->versioned_build;
}

PackageFunction parse_function(const json& item, const std::string& path,
                               const std::filesystem::path& file) {
  Fields f(item, path, file);
  PackageFunction fn;
  fn.name = f.string("name");
  fn.op = f.string("op");
  for (const auto& [key, value] : {std::pair{"name", &fn.name}, std::pair{"op", &fn.op}}) {
    if (!is_kernel_name(*value)) {
      f.fail(f.field(key), "'" + *value + "' must be 1-64 characters of a-z, 0-9 and '_'");
    }
  }
  fn.device_type = f.string("device_type");
  if (!std::all_of(fn.device_type.begin(), fn.device_type.end(),
                   [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; })) {
    f.fail(f.field("device_type"), "'" + fn.device_type + "' must be a device type (a-z, '_')");
  }
  fn.dtypes = f.strings("dtypes", false);
  if (const std::string cc = f.string("min_compute_capability", false); !cc.empty()) {
    try {
      const BackendVersion v = BackendVersion::parse(cc, f.field("min_compute_capability"));
      fn.min_compute_capability = ComputeCapability{v.major, v.minor};
    } catch (const InvalidArgument&) {
      f.fail(f.field("min_compute_capability"), "'" + cc + "' is not MAJOR.MINOR, e.g. \"8.0\"");
    }
  }
  if (const json* head = f.find("max_head_dim")) {
    if (!head->is_number_integer() || head->get<int64_t>() < 0 || head->get<int64_t>() > 65536) {
      f.fail(f.field("max_head_dim"), "must be an integer from 0 (no limit) to 65536");
    }
    fn.max_head_dim = head->get<int>();
  }
  return fn;
}

PackageLayer parse_layer(const json& item, const std::string& path,
                         const std::filesystem::path& file) {
  Fields f(item, path, file);
  PackageLayer layer;
  layer.name = f.string("name");
  if (!is_layer_name(layer.name)) {
    f.fail(f.field("name"), "'" + layer.name + "' must be a class name (A-Z a-z 0-9 _)");
  }
  layer.function = f.string("function");
  if (const json* backward = f.find("has_backward")) {
    if (!backward->is_boolean()) f.fail(f.field("has_backward"), "must be true or false");
    layer.has_backward = backward->get<bool>();
  }
  layer.backward_function = f.string("backward_function", false);
  if (layer.has_backward != !layer.backward_function.empty()) {
    f.fail(f.field(layer.has_backward ? "has_backward" : "backward_function"),
           layer.has_backward ? "is true, so backward_function must name the function that "
                                "computes the layer's gradients"
                              : "is set, so has_backward must be true");
  }
  return layer;
}

}  // namespace

const PackageFunction* PackageMetadata::function(std::string_view name) const {
  for (const PackageFunction& f : functions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

PackageMetadata parse_metadata(std::string_view text, const std::filesystem::path& file) {
  const json root = parse_checked_json(text, file.string());
  Fields f(root, "", file);
  PackageMetadata m;

  const json& format = f.required("format");
  if (!format.is_number_integer() || format.get<int64_t>() != kMetadataFormat) {
    f.fail("format", format.dump() + " is not a format this build reads; expected " +
                         std::to_string(kMetadataFormat));
  }
  const std::string abi = f.string("abi_version");
  const size_t dot = abi.find('.');
  const std::string abi_major = abi.substr(0, dot);
  const std::string abi_minor = dot == std::string::npos ? "" : abi.substr(dot + 1);
  if (!detail::is_small_number(abi_major) || !detail::is_small_number(abi_minor)) {
    f.fail("abi_version", "'" + abi + "' is not MAJOR.MINOR, e.g. \"1.3\"");
  }
  m.abi_major = static_cast<uint32_t>(std::stoul(abi_major));
  m.abi_minor = static_cast<uint32_t>(std::stoul(abi_minor));
  if (m.abi_major != BP_ABI_VERSION_MAJOR) {
    f.fail("abi_version", "the package is built for plugin ABI " + abi + "; this build loads ABI " +
                              std::to_string(BP_ABI_VERSION_MAJOR) + ".x");
  }
  m.repo_id = f.string("repo_id");
  try {
    RepoId::parse(m.repo_id, "repo_id");
  } catch (const InvalidArgument& e) {
    f.fail("repo_id", e.what());
  }
  m.version = f.string("version");
  m.license = f.string("license");

  Fields backend(f.required("backend"), "backend", file);
  m.backend = backend.string("name");
  if (const std::string version = backend.string("version", false); !version.empty()) {
    try {
      m.backend_version = BackendVersion::parse(version, "backend.version");
    } catch (const InvalidArgument&) {
      f.fail("backend.version", "'" + version + "' is not MAJOR.MINOR, e.g. \"13.0\"");
    }
  }
  if (backend_has_version(m.backend) && !m.backend_version) {
    f.fail("backend.version",
           "is missing; backend " + m.backend + " needs its version, e.g. \"13.0\"");
  }
  if (!backend_has_version(m.backend) && m.backend_version) {
    f.fail("backend.version", "backend " + m.backend + " has no version");
  }
  m.archs = f.strings("archs", true);
  m.library = f.string("library");
  if (m.library.find('/') != std::string::npos || m.library == "." || m.library == "..") {
    f.fail("library", "'" + m.library + "' must be a file name in the variant folder, no '/'");
  }

  const json& functions = f.array("functions", true);
  if (functions.empty()) f.fail("functions", "must list at least one function");
  std::set<std::string> names;
  for (size_t i = 0; i < functions.size(); ++i) {
    const std::string path = "functions[" + std::to_string(i) + "]";
    m.functions.push_back(parse_function(functions[i], path, file));
    if (!names.insert(m.functions.back().name).second) {
      f.fail(path + ".name", "'" + m.functions.back().name + "' is listed twice");
    }
  }
  const json& layers = f.array("layers", false);
  std::set<std::string> layer_names;
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string path = "layers[" + std::to_string(i) + "]";
    m.layers.push_back(parse_layer(layers[i], path, file));
    const PackageLayer& layer = m.layers.back();
    if (!layer_names.insert(layer.name).second) {
      f.fail(path + ".name", "'" + layer.name + "' is listed twice");
    }
    if (m.function(layer.function) == nullptr) {
      f.fail(path + ".function", "'" + layer.function + "' is not one of the package's functions");
    }
    if (!layer.backward_function.empty() && m.function(layer.backward_function) == nullptr) {
      f.fail(path + ".backward_function",
             "'" + layer.backward_function + "' is not one of the package's functions");
    }
  }
  return m;
}

PackageMetadata read_metadata(const std::filesystem::path& file) {
  return parse_metadata(internal::read_bounded_file(file, 1 << 20, file.string()), file);
}

std::string to_json(const PackageMetadata& m) {
  json functions = json::array();
  for (const PackageFunction& fn : m.functions) {
    json j = {{"name", fn.name}, {"op", fn.op}, {"device_type", fn.device_type}};
    if (!fn.dtypes.empty()) j["dtypes"] = fn.dtypes;
    if (fn.min_compute_capability) j["min_compute_capability"] = fn.min_compute_capability->str();
    if (fn.max_head_dim > 0) j["max_head_dim"] = fn.max_head_dim;
    functions.push_back(std::move(j));
  }
  json layers = json::array();
  for (const PackageLayer& l : m.layers) {
    json layer = {{"name", l.name}, {"function", l.function}, {"has_backward", l.has_backward}};
    if (!l.backward_function.empty()) layer["backward_function"] = l.backward_function;
    layers.push_back(std::move(layer));
  }
  json backend = {{"name", m.backend}};
  if (m.backend_version) backend["version"] = m.backend_version->str();
  const json root = {{"format", m.format},     {"abi_version", m.abi_version()},
                     {"repo_id", m.repo_id},   {"version", m.version},
                     {"license", m.license},   {"backend", backend},
                     {"archs", m.archs},       {"library", m.library},
                     {"functions", functions}, {"layers", layers}};
  return root.dump(2) + "\n";
}

void check_metadata_fits(const PackageMetadata& m, const BuildVariant& variant,
                         const std::filesystem::path& file) {
  auto fail = [&](const std::string& field, const std::string& what) {
    throw InvalidArgument(file.string() + ": " + field + ": " + what);
  };
  if (variant.kind == BuildVariant::Kind::kGeneric) {
    // A generic variant (torch-npu) names the device type; metadata.json its build backend.
    const internal::DeviceTypeFacts* type = internal::device_type_facts(variant.backend);
    const std::string family = type != nullptr ? std::string(type->build_backend) : variant.backend;
    if (family != "universal" && m.backend != family) {
      fail("backend.name", "'" + m.backend + "' does not match the variant folder " + variant.name +
                               " (backend " + family + ")");
    }
    return;
  }
  if (m.backend != variant.backend) {
    fail("backend.name", "'" + m.backend + "' does not match the variant folder " + variant.name +
                             " (backend " + variant.backend + ")");
  }
  if (variant.backend_version && m.backend_version != variant.backend_version) {
    fail("backend.version", "'" + (m.backend_version ? m.backend_version->str() : "(none)") +
                                "' does not match the variant folder " + variant.name + " (" +
                                variant.backend_version->str() + ")");
  }
}

std::string arch_mismatch(const PackageMetadata& m, const DeviceInfo& device) {
  if (m.archs.empty()) return {};
  std::string listed;
  for (const std::string& a : m.archs) listed += (listed.empty() ? "" : " ") + a;
  if (m.backend == "cuda" && device.compute_capability) {
    const ComputeCapability cc = *device.compute_capability;
    for (const std::string& a : m.archs) {
      // sm_XY (and sm_XYa / compute_XY): binary compatible with X.Z for Z >= Y.
      const size_t under = a.find('_');
      if (under == std::string::npos) continue;
      std::string digits = a.substr(under + 1);
      while (!digits.empty() && !std::isdigit(static_cast<unsigned char>(digits.back()))) {
        digits.pop_back();
      }
      if (digits.size() < 2 || digits.size() > 7 ||
          !std::all_of(digits.begin(), digits.end(), ::isdigit)) {
        continue;
      }
      const int major = std::stoi(digits.substr(0, digits.size() - 1));
      const int minor = digits.back() - '0';
      if (major == cc.major && minor <= cc.minor) return {};
    }
    return "the package is built for " + listed + "; " + device.device.str() +
           " has compute capability " + cc.str();
  }
  if (std::find(m.archs.begin(), m.archs.end(), device.arch) != m.archs.end()) return {};
  return "the package is built for " + listed + "; " + device.device.str() + " is " +
         (device.arch.empty() ? "of unknown arch" : device.arch);
}

}  // namespace backplane::hub
