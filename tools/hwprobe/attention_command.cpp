// hwprobe attention: what each attn_implementation value resolves to on each device
// (core/include/backplane/rules/attention.hpp): the kernel that runs, native or from the Hub, its
// plugin and requirements, transformers' warnings, or why it cannot run.
#include <backplane/rules/attention.hpp>

#include <algorithm>
#include <iostream>

#include <nlohmann/json.hpp>

#include "command.hpp"

namespace po = boost::program_options;

namespace hwprobe {

namespace {

using OrderedJson = nlohmann::ordered_json;

// One requested value on one device: a resolution, or why there is none.
struct Row {
  std::optional<std::string> requested;  // nullopt: the default
  std::optional<backplane::AttentionResolution> resolution;
  std::string error;
};

OrderedJson optional_json(const std::optional<std::string>& value) {
  return value ? OrderedJson(*value) : OrderedJson(nullptr);
}

OrderedJson kernel_json(const backplane::KernelInfo& k) {
  return {
      {"plugin", k.plugin},
      {"device_type", k.device_type},
      {"min_compute_capability", k.min_compute_capability
                                     ? OrderedJson(k.min_compute_capability->str())
                                     : OrderedJson(nullptr)},
      {"dtypes", k.dtypes},
      {"max_head_dim", k.max_head_dim > 0 ? OrderedJson(k.max_head_dim) : OrderedJson(nullptr)}};
}

OrderedJson row_json(const Row& row) {
  OrderedJson out = {{"requested", optional_json(row.requested)}};
  if (!row.resolution) {
    out["implementation"] = nullptr;
    out["source"] = nullptr;
    out["error"] = row.error;
    return out;
  }
  const backplane::AttentionResolution& r = *row.resolution;
  out["implementation"] = r.implementation;
  out["source"] = backplane::to_string(r.source);
  out["kernel"] = r.kernel ? kernel_json(*r.kernel) : OrderedJson(nullptr);
  out["hub"] = r.hub ? OrderedJson{{"repo", r.hub->repo},
                                   {"revision", optional_json(r.hub->revision)},
                                   {"function", optional_json(r.hub->function)}}
                     : OrderedJson(nullptr);
  out["warnings"] = r.warnings;
  out["notes"] = r.notes;
  out["error"] = nullptr;
  return out;
}

// "native, plugin cpu; float32 bfloat16 float16" or "hub kernels-community/flash-attn2".
std::string served_by(const backplane::AttentionResolution& r) {
  if (!r.kernel) return "hub " + (r.hub ? r.hub->str() : r.implementation);
  const backplane::KernelInfo& k = *r.kernel;
  std::string text = "native, plugin " + k.plugin;
  std::string needs;
  if (k.min_compute_capability) needs += " cc>=" + k.min_compute_capability->str();
  for (const std::string& dtype : k.dtypes) needs += " " + dtype;
  if (k.max_head_dim > 0) needs += " head_dim<=" + std::to_string(k.max_head_dim);
  return needs.empty() ? text : text + ";" + needs;
}

void print_text(const backplane::DeviceInfo& device, const std::vector<Row>& rows) {
  std::cout << device.device.str() << " (" << (device.name.empty() ? device.plugin : device.name)
            << (device.compute_capability
                    ? ", compute capability " + device.compute_capability->str()
                    : std::string())
            << ")\n";
  size_t width = 9;  // "(default)"
  for (const Row& row : rows) width = std::max(width, row.requested.value_or("").size());
  const std::string indent(2 + width + 2, ' ');
  for (const Row& row : rows) {
    const std::string label = row.requested.value_or("(default)");
    std::cout << "  " << label << std::string(width - label.size() + 2, ' ');
    if (!row.resolution) {
      std::cout << "error: " << row.error << "\n";
      continue;
    }
    const backplane::AttentionResolution& r = *row.resolution;
    std::cout << r.implementation << " (" << served_by(r) << ")\n";
    for (const std::string& w : r.warnings) std::cout << indent << "warning: " << w << "\n";
    for (const std::string& n : r.notes) std::cout << indent << "note: " << n << "\n";
  }
}

}  // namespace

int run_attention(const std::vector<std::string>& args) {
  CommonOptions common;
  std::string device_text;
  std::string impl;
  std::string dtype;
  int head_dim = 0;
  std::vector<std::string> hub_kernels;
  po::options_description description("Options");
  description.add_options()("device", po::value(&device_text)->value_name("DEVICE"),
                            "one device (\"cuda:1\", \"cpu\"); default: every device")(
      "impl", po::value(&impl)->value_name("NAME"),
      "one attn_implementation value: eager, sdpa, flash_attention_2|3|4, flex_attention, a "
      "\"paged|\" variant or a Hub kernel org/repo[@revision][:function]; default: the "
      "default and every name")("dtype", po::value(&dtype)->value_name("DTYPE"),
                                "the model's dtype: float16, bfloat16 or float32")(
      "head-dim", po::value(&head_dim)->value_name("N"), "the model's head dimension")(
      "with-hub-kernel", po::value(&hub_kernels)->value_name("REPO")->composing(),
      "resolve as if the local kernel store held this Hub kernel (org/repo); repeatable");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(
          args, description, "",
          "hwprobe attention [--device DEVICE] [--impl NAME] [--dtype DTYPE] [--head-dim N] "
          "[--with-hub-kernel REPO]... [--json] [--sim NAME|FILE]",
          vm)) {
    return kExitOk;
  }
  auto refuse = [](const std::string& message) {
    std::cerr << "hwprobe attention: " << message << "\n";
    return kExitUsage;
  };
  backplane::AttentionQuery query;
  if (vm.count("dtype")) {
    if (dtype != "float16" && dtype != "bfloat16" && dtype != "float32") {
      return refuse("--dtype '" + dtype + "' is not one of float16, bfloat16, float32");
    }
    query.dtype = dtype;
  }
  if (vm.count("head-dim")) {
    if (head_dim <= 0)
      return refuse("--head-dim must be positive, not " + std::to_string(head_dim));
    query.head_dim = head_dim;
  }
  std::vector<std::string> store;
  try {
    for (const std::string& text : hub_kernels) {
      store.push_back(backplane::HubKernelId::parse(text).repo);
    }
  } catch (const backplane::InvalidArgument& e) {
    return refuse(std::string("--with-hub-kernel: ") + e.what());
  }
  // Until the local kernel store exists, what it holds is what the command line says.
  query.hub_installed = [store](const backplane::HubKernelId& id) {
    return std::find(store.begin(), store.end(), id.repo) != store.end();
  };

  const backplane::Runtime runtime = open_runtime(common);
  std::vector<backplane::DeviceInfo> devices;
  try {
    devices = chosen_devices(
        runtime, vm.count("device") ? std::optional<std::string>(device_text) : std::nullopt);
  } catch (const backplane::Error& e) {
    return refuse(e.what());  // a device that is not here is bad input too
  }
  std::vector<std::optional<std::string>> requests;
  if (vm.count("impl")) {
    requests.emplace_back(impl);
  } else {
    requests.emplace_back(std::nullopt);
    for (const std::string& name : backplane::attention_implementation_names()) {
      requests.emplace_back(name);
    }
  }

  OrderedJson json_devices = OrderedJson::array();
  for (const backplane::DeviceInfo& device : devices) {
    std::vector<Row> rows;
    for (const std::optional<std::string>& requested : requests) {
      Row row{requested, std::nullopt, {}};
      try {
        std::optional<std::string_view> asked;
        if (requested) asked = *requested;
        row.resolution = runtime.resolve_attention(device.device, asked, query);
      } catch (const backplane::InvalidArgument& e) {
        return refuse(e.what());  // a value transformers refuses anywhere
      } catch (const backplane::Unavailable& e) {
        row.error = e.what();
      }
      rows.push_back(std::move(row));
    }
    if (common.json) {
      OrderedJson json_rows = OrderedJson::array();
      for (const Row& row : rows) json_rows.push_back(row_json(row));
      json_devices.push_back(
          {{"device", device.device.str()},
           {"plugin", device.plugin},
           {"compute_capability", device.compute_capability
                                      ? OrderedJson(device.compute_capability->str())
                                      : OrderedJson(nullptr)},
           {"resolutions", json_rows}});
    } else {
      if (&device != &devices.front()) std::cout << "\n";
      print_text(device, rows);
    }
  }
  if (common.json) {
    OrderedJson out = {
        {"dtype", optional_json(query.dtype)},
        {"head_dim", query.head_dim ? OrderedJson(*query.head_dim) : OrderedJson(nullptr)},
        {"hub_kernels", store},
        {"devices", json_devices}};
    std::cout << out.dump(2) << "\n";
  }
  return kExitOk;
}

}  // namespace hwprobe
