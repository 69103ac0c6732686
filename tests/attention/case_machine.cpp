#include "case_machine.hpp"

#include <algorithm>

namespace attention_test {

using backplane::ComputeCapability;
using backplane::HubKernelId;
using backplane::KernelInfo;

namespace {

KernelInfo attention_kernel(std::string implementation, std::string device_type,
                            std::string plugin) {
  KernelInfo kernel;
  kernel.op = backplane::kAttentionForward;
  kernel.implementation = std::move(implementation);
  kernel.device_type = std::move(device_type);
  kernel.plugin = std::move(plugin);
  return kernel;
}

}  // namespace

CaseMachine case_machine(const nlohmann::json& row) {
  CaseMachine m;
  const std::string type = row.at("device");
  m.device.device = backplane::Device(type, 0);
  m.device.plugin = type == "cpu" ? "cpu" : "gpu";
  if (!row.at("capability").is_null()) {
    m.device.compute_capability = ComputeCapability{row["capability"][0], row["capability"][1]};
  }
  m.env.available_device_types = {"cpu"};
  for (const nlohmann::json& accelerator : row.at("available")) {
    m.env.available_device_types.push_back(accelerator.get<std::string>());
  }
  for (const std::string& t : m.env.available_device_types) {
    const std::string plugin = t == "cpu" ? "cpu" : "gpu";
    m.kernels.push_back(attention_kernel("sdpa", t, plugin));
    m.kernels.push_back(attention_kernel("eager", t, plugin));
  }
  for (int version : row.at("packages")) {
    KernelInfo flash =
        attention_kernel("flash_attention_" + std::to_string(version), "cuda", "gpu");
    flash.min_compute_capability = ComputeCapability{version == 4 ? 9 : 8, 0};
    m.kernels.push_back(flash);
  }
  m.env.dtype = row.value("dtype", nlohmann::json()).is_null() ? std::string("bfloat16")
                                                               : row["dtype"].get<std::string>();
  m.env.model_class = "LlamaForCausalLM";
  const bool kernels_library = row.at("kernels");
  const std::vector<std::string> hub = row.at("hub");
  m.env.hub_installed = [kernels_library, hub](const HubKernelId& id) {
    return kernels_library && std::find(hub.begin(), hub.end(), id.repo) != hub.end();
  };
  return m;
}

}  // namespace attention_test
