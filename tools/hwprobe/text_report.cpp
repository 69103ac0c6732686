#include "text_report.hpp"

#include <backplane/plugin.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "json_report.hpp"

namespace hwprobe {
namespace {

using Row = std::vector<std::string>;

// Prints rows as columns padded to their widest cell; the last column is not padded.
void print_table(std::ostream& out, const std::vector<Row>& rows) {
  std::vector<size_t> widths;
  for (const Row& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const Row& row : rows) {
    std::string line = "  ";
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

std::string int_property(const backplane::DeviceInfo& d, const char* name) {
  const backplane::Property* p = d.property(name);
  if (p == nullptr || !std::holds_alternative<int64_t>(p->value)) return "";
  return std::to_string(std::get<int64_t>(p->value));
}

std::string details(const backplane::DeviceInfo& d) {
  std::vector<std::string> parts;
  if (d.compute_capability) parts.push_back("compute " + d.compute_capability->str());
  if (!d.arch.empty()) parts.push_back(d.arch);
  // "2 cores, 4 threads, 1 NUMA", each part only when the plugin reports it.
  std::string topology;
  for (const auto& [property, unit] : {std::pair<const char*, const char*>{"cores", " cores"},
                                       {"threads", " threads"},
                                       {"numa_nodes", " NUMA"}}) {
    if (std::string value = int_property(d, property); !value.empty()) {
      topology += (topology.empty() ? "" : ", ") + value + unit;
    }
  }
  if (!topology.empty()) parts.push_back(topology);
  if (const backplane::Property* simd = d.property("simd")) {
    if (const auto* list = std::get_if<std::vector<std::string>>(&simd->value);
        list && !list->empty()) {
      std::string joined;
      for (const std::string& f : *list) joined += (joined.empty() ? "" : " ") + f;
      parts.push_back(joined);
    }
  }
  if (d.simulated) parts.push_back("simulated");
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

std::string backend_status(const backplane::BackendInfo& b) {
  if (!b.replaced_by.empty()) {
    return "replaced by plugin '" + b.replaced_by + "'" +
           (b.available ? "" : " (unavailable: " + b.unavailable_reason + ")");
  }
  std::string status = b.available ? "available" : "unavailable: " + b.unavailable_reason;
  return b.simulated ? status + " (simulated)" : status;
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

void print_runtime(std::ostream& out, const backplane::Runtime& runtime) {
  out << "backplane " << BACKPLANE_VERSION_STRING << " (plugin ABI " << BP_ABI_VERSION_MAJOR << "."
      << BP_ABI_VERSION_MINOR << ")\n\nBackends\n";
  std::vector<Row> backends{{"TYPE", "PLUGIN", "STATUS"}};
  for (const auto& b : runtime.backends())
    backends.push_back({b.type, b.plugin, backend_status(b)});
  if (runtime.backends().empty()) backends.push_back({"(none)", "", ""});
  print_table(out, backends);

  out << "\nDevices\n";
  std::vector<Row> devices{{"DEVICE", "NAME", "MEMORY", "DETAILS"}};
  for (const auto& d : runtime.devices()) {
    devices.push_back({device_label(d.device), d.name, format_bytes(d.memory_total), details(d)});
  }
  if (runtime.devices().empty()) devices.push_back({"(none)", "", "", ""});
  print_table(out, devices);

  out << "\nKernels\n";
  std::vector<Row> kernels{{"OP", "IMPLEMENTATION", "DEVICE", "PLUGIN", "REQUIRES"}};
  for (const auto& k : runtime.kernels()) {
    std::string requires_text;
    for (const std::string& d : k.dtypes) requires_text += (requires_text.empty() ? "" : " ") + d;
    if (k.min_compute_capability) {
      requires_text += "; compute capability >= " + k.min_compute_capability->str();
    }
    kernels.push_back({k.op, k.implementation, k.device_type, k.plugin, requires_text});
  }
  if (runtime.kernels().empty()) kernels.push_back({"(none)", "", "", "", ""});
  print_table(out, kernels);

  // Layers without a kernel on a device are left out; a device with none shows "-".
  out << "\nLayer kernels (use_kernels defaults)\n";
  std::vector<Row> layers{{"DEVICE", "LAYER", "INFERENCE", "TRAINING", "SOURCE"}};
  for (const auto& row : layer_kernels_json(runtime)) {
    const auto cell = [](const nlohmann::json& choice) {
      return choice["kernel"].is_null() ? std::string("-") : choice["kernel"].get<std::string>();
    };
    const nlohmann::json& inference = row["inference"];
    const nlohmann::json& training = row["training"];
    if (inference["kernel"].is_null() && training["kernel"].is_null()) continue;
    std::string source = inference.value("source", "");
    const std::string training_source = training.value("source", "");
    if (source.empty() || (!training_source.empty() && training_source != source)) {
      source += (source.empty() ? "" : ", ") + training_source;
    }
    layers.push_back({row["device"].get<std::string>(), row["layer"].get<std::string>(),
                      cell(inference), cell(training), source});
  }
  if (layers.size() == 1) layers.push_back({"(none)", "", "", "", ""});
  print_table(out, layers);
#ifdef HWPROBE_WITH_HUB
  // The variant of each of those kernels' packages, chosen and refused as kernel-hub resolve
  // says it.
  out << "\nLayer kernel packages (the build variant each device would load)\n";
  std::vector<Row> packages{{"DEVICE", "REPO", "VARIANT", "WHY"}};
  for (const auto& row : hub_variants_json(runtime)) {
    const std::string device = row["device"], repo = row["repo"];
    if (!row["error"].is_null()) {
      packages.push_back({device, repo, "-", row["error"].get<std::string>()});
      continue;
    }
    const std::string at = repo + "@" + row["revision"].get<std::string>();
    if (row["variant"].is_null()) packages.push_back({device, at, "-", "no variant fits:"});
    for (const auto& d : row["decisions"]) {
      const bool chosen = d["accepted"].get<bool>() && d["variant"] == row["variant"];
      if (chosen) {
        packages.push_back(
            {device, at, d["variant"].get<std::string>(), d["reason"].get<std::string>()});
      } else {
        packages.push_back(
            {"", "", (d["accepted"].get<bool>() ? "+ " : "- ") + d["variant"].get<std::string>(),
             d["reason"].get<std::string>()});
      }
    }
  }
  if (packages.size() == 1) packages.push_back({"(none)", "", "", ""});
  print_table(out, packages);
#endif

  out << "\nPlugins\n";
  std::vector<Row> plugins{{"NAME", "VERSION", "ABI", "LIBRARY", "STATUS"}};
  for (const auto& p : runtime.plugins()) {
    std::string status = backplane::to_string(p.status);
    if (!p.error.empty()) status += ": " + p.error;
    plugins.push_back({p.name, p.version.empty() ? "-" : p.version,
                       p.abi_version.empty() ? "-" : p.abi_version,
                       p.library.empty() ? "-" : p.library.string(), status});
  }
  if (runtime.plugins().empty()) plugins.push_back({"(no manifests found)", "", "", "", ""});
  print_table(out, plugins);
}

void print_plugins(std::ostream& out, const backplane::Runtime& runtime) {
  out << "Search path, in order\n";
  std::vector<Row> path;
  for (const auto& entry : runtime.search_path()) path.push_back({entry.string()});
  if (path.empty()) path.push_back({"(empty)"});
  print_table(out, path);
  out << "\nManifests, in search order\n";
  std::vector<Row> rows{{"NAME", "MANIFEST", "STATUS"}};
  for (const auto& p : runtime.plugins()) {
    std::string status = backplane::to_string(p.status);
    if (!p.error.empty()) status += ": " + p.error;
    rows.push_back({p.name, p.manifest.string(), status});
  }
  if (runtime.plugins().empty()) rows.push_back({"(none found)", "", ""});
  print_table(out, rows);
}

void print_explanation(std::ostream& out, const backplane::Runtime& runtime) {
  for (const backplane::BackendInfo& b : runtime.backends()) {
    out << b.type << " (plugin " << b.plugin << "): " << backend_status(b) << "\n";
    for (const std::string& note : b.visibility_notes) out << "  " << note << "\n";
    if (!b.replaced_by.empty() || !b.available) continue;
    const std::vector<backplane::DeviceInfo> devices = runtime.devices(b.type);
    if (devices.empty()) out << "  no devices\n";
    for (const backplane::DeviceInfo& d : devices) {
      out << "  " << d.device.str() << " is " << (d.simulated ? "simulated " : "") << d.name;
      if (d.physical_index >= 0) {
        out << ", physical device " << d.physical_index;
        if (!d.visibility_variable.empty()) {
          out << ", mapped to index " << *d.device.index() << " by " << d.visibility_variable;
        } else if (d.physical_index == *d.device.index()) {
          out << ", no visibility variable applies";
        }
      }
      out << "\n";
    }
  }
}

}  // namespace hwprobe
