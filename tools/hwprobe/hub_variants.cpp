// The build variant of each Hub kernel the default mapping names, per device, as kernel-hub
// resolve chooses it (hub::Store::resolve over hub::system_facts): hwprobe built with the hub.
#include <backplane/hub.hpp>

#include "json_report.hpp"

namespace hwprobe {

nlohmann::json hub_variants_json(const backplane::Runtime& runtime) {
  using nlohmann::json;
  const backplane::KernelMapping mapping = runtime.default_kernel_mapping();
  json out = json::array();
  std::optional<backplane::hub::Store> store;
  std::string store_error;
  try {
    store = backplane::hub::Store::from_environment();
  } catch (const backplane::Error& e) {
    store_error = e.what();
  }
  for (const auto& d : runtime.devices()) {
    const backplane::HubDevice hub = runtime.hub_device(d.device);
    const backplane::BackendInfo* backend = runtime.backend(d.device.type());
    const backplane::hub::SystemFacts facts =
        backplane::hub::system_facts(d, backend != nullptr ? backend->hub_key : "");
    std::vector<std::string> repos;
    for (const std::string& layer : mapping.layers()) {
      for (const backplane::KernelMode mode :
           {backplane::KernelMode::inference(), backplane::KernelMode::training()}) {
        const backplane::LayerKernelChoice choice = mapping.lookup(layer, hub, mode);
        if (!choice.entry || choice.entry->kernel.is_local_path()) continue;
        const std::string& repo = choice.entry->kernel.repo;
        if (std::find(repos.begin(), repos.end(), repo) == repos.end()) repos.push_back(repo);
      }
    }
    for (const std::string& repo : repos) {
      json row = {{"device", device_label(d.device)},
                  {"repo", repo},
                  {"revision", nullptr},
                  {"variant", nullptr},
                  {"decisions", json::array()},
                  {"error", nullptr}};
      try {
        if (!store) throw backplane::InvalidArgument(store_error);
        const backplane::hub::ResolvedVariant r = store->resolve(
            backplane::hub::RepoId::parse(repo, "kernel mapping"), std::nullopt, facts);
        row["revision"] = r.package.revision;
        if (r.variant) row["variant"] = *r.variant;
        for (const auto& decision : r.resolution.decisions) {
          json j = {{"variant", decision.variant},
                    {"accepted", decision.accepted},
                    {"reason", decision.reason}};
          if (!decision.accepted) j["refused_by"] = decision.refused_by;
          row["decisions"].push_back(std::move(j));
        }
      } catch (const backplane::Error& e) {
        row["error"] = e.what();  // not installed, or the store cannot be read
      }
      out.push_back(std::move(row));
    }
  }
  return out;
}

}  // namespace hwprobe
