#include "topology.hpp"

#include <backplane/error.hpp>
#include <backplane/internal/checked_json.hpp>
#include <backplane/internal/files.hpp>
#include <backplane/internal/text.hpp>
#include <backplane/units.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace backplane::sim {
namespace {

using nlohmann::json;

// A topology names a few dozen devices; anything much larger is not one.
constexpr std::uintmax_t kMaxTopologyBytes = 1 << 20;
constexpr size_t kMaxDevices = 4096;

class DeviceReader {
 public:
  DeviceReader(const json& object, size_t position)
      : object_(object), where_("device " + std::to_string(position)) {}

  std::string string(const char* key, bool required) const {
    auto it = object_.find(key);
    if (it == object_.end()) {
      if (required) fail(std::string("is missing \"") + key + "\"");
      return "";
    }
    if (!it->is_string()) fail(std::string("\"") + key + "\" must be a string");
    return it->get<std::string>();
  }

  int64_t count(const char* key) const {
    auto it = object_.find(key);
    if (it == object_.end()) return 0;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 1000000) {
      fail(std::string("\"") + key + "\" must be an integer from 0 to 1000000");
    }
    return it->get<int64_t>();
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw TopologyError(where_ + " " + what);
  }

 private:
  const json& object_;
  std::string where_;
};

void read_compute_capability(const DeviceReader& reader, const std::string& text, SimDevice& d) {
  const size_t dot = text.find('.');
  const bool digits = dot != std::string::npos && dot > 0 && dot + 1 < text.size() && dot <= 2 &&
                      text.size() - dot - 1 <= 2 &&
                      std::all_of(text.begin(), text.end(),
                                  [](char c) { return c == '.' || (c >= '0' && c <= '9'); }) &&
                      std::count(text.begin(), text.end(), '.') == 1;
  if (!digits)
    reader.fail("\"compute_capability\" \"" + text + "\" is not MAJOR.MINOR, e.g. \"9.0\"");
  d.compute_capability_major = std::stoi(text.substr(0, dot));
  d.compute_capability_minor = std::stoi(text.substr(dot + 1));
}

SimDevice read_device(const json& object, size_t position) {
  const DeviceReader reader(object, position);
  if (!object.is_object()) reader.fail("must be a JSON object");
  SimDevice d;
  d.type = reader.string("type", true);
  const auto& types = simulated_types();
  if (std::find(types.begin(), types.end(), d.type) == types.end()) {
    reader.fail("has type \"" + d.type + "\"; a topology may declare " + internal::join(types));
  }
  d.name = reader.string("name", true);
  if (d.name.empty()) reader.fail("has an empty name");
  d.vendor = reader.string("vendor", false);
  std::transform(d.vendor.begin(), d.vendor.end(), d.vendor.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (d.type == "cuda" && d.vendor != "nvidia" && d.vendor != "amd") {
    reader.fail("of type cuda needs \"vendor\": \"nvidia\" or \"amd\"");
  }
  try {
    d.memory = parse_memory_size(reader.string("memory", true));
  } catch (const InvalidArgument& e) {
    reader.fail(std::string("\"memory\": ") + e.what());
  }
  if (const std::string cc = reader.string("compute_capability", false); !cc.empty()) {
    read_compute_capability(reader, cc, d);
  } else if (d.type == "cuda" && d.vendor == "nvidia") {
    reader.fail("of vendor nvidia needs \"compute_capability\", e.g. \"9.0\"");
  }
  d.uuid = reader.string("uuid", false);
  d.pci_bus_id = reader.string("pci_bus_id", false);
  d.arch = reader.string("arch", false);
  if (d.arch.empty() && d.compute_capability_major >= 0) {
    d.arch = "sm_" + std::to_string(d.compute_capability_major) +
             std::to_string(d.compute_capability_minor);
  }
  d.multiprocessors = reader.count("multiprocessors");
  d.clock_mhz = reader.count("clock_mhz");
  d.sub_devices = reader.count("sub_devices");
  d.cores = reader.count("cores");
  if (d.type == "neuron" && d.cores == 0) d.cores = 1;
  return d;
}

}  // namespace

const std::vector<std::string>& simulated_types() {
  static const std::vector<std::string> types = {"cuda", "xpu",  "mps",    "hpu", "npu",
                                                 "mlu",  "musa", "neuron", "tpu"};
  return types;
}

Topology parse_topology(const std::string& json_text) {
  json root;
  try {
    root = parse_checked_json(json_text, "");
  } catch (const InvalidArgument& e) {
    throw TopologyError(e.what());
  }
  if (!root.is_object()) throw TopologyError("the top level must be a JSON object");
  Topology topology;
  if (auto name = root.find("name"); name != root.end() && name->is_string()) {
    topology.name = name->get<std::string>();
  }
  auto devices = root.find("devices");
  if (devices == root.end() || !devices->is_array()) {
    throw TopologyError("\"devices\" must be an array of device objects");
  }
  if (devices->size() > kMaxDevices) {
    throw TopologyError("\"devices\" lists " + std::to_string(devices->size()) +
                        " devices; the limit is " + std::to_string(kMaxDevices));
  }
  std::set<std::string> uuids, pci_ids;
  for (size_t i = 0; i < devices->size(); ++i) {
    SimDevice d = read_device((*devices)[i], i);
    if (!d.uuid.empty() && !uuids.insert(d.uuid).second) {
      throw TopologyError("device " + std::to_string(i) + " repeats uuid " + d.uuid);
    }
    if (!d.pci_bus_id.empty() && !pci_ids.insert(d.pci_bus_id).second) {
      throw TopologyError("device " + std::to_string(i) + " repeats pci_bus_id " + d.pci_bus_id);
    }
    topology.devices.push_back(std::move(d));
  }
  return topology;
}

Topology read_topology(const std::filesystem::path& file) {
  std::string text;
  try {
    text = internal::read_bounded_file(file, kMaxTopologyBytes, file.string());
  } catch (const InvalidArgument& e) {
    throw TopologyError(e.what());
  }
  return parse_topology(text);
}

}  // namespace backplane::sim
