// hwprobe's JSON: field names are stable; later versions only add fields.
#pragma once

#include <backplane/backplane.hpp>

#include <nlohmann/json.hpp>

namespace hwprobe {

nlohmann::json device_json(const backplane::DeviceInfo& device);
nlohmann::json backend_json(const backplane::BackendInfo& backend);
nlohmann::json plugin_json(const backplane::PluginInfo& plugin);
nlohmann::json kernel_json(const backplane::KernelInfo& kernel);
// Per device and layer of the plugins' default kernel mapping, the Hub kernel that would replace
// the layer in inference and in training mode: [{device, layer, inference, training}], each
// mode {kernel, source, matched_mode} or {kernel: null, reason}.
nlohmann::json layer_kernels_json(const backplane::Runtime& runtime);
#ifdef HWPROBE_WITH_HUB
// Per device, each Hub kernel repo the default mapping names (hub_variants.cpp): the revision
// and build variant the store would load for that device and every decision with its reason,
// as kernel-hub resolve prints them: [{device, repo, revision, variant, decisions, error}].
nlohmann::json hub_variants_json(const backplane::Runtime& runtime);
#endif
// {backplane_version, abi_version, plugins, backends, devices, kernels, layer_kernels} and, built
// with the kernel hub, hub_variants.
nlohmann::json runtime_json(const backplane::Runtime& runtime);
// {search_path, plugins}
nlohmann::json plugins_json(const backplane::Runtime& runtime);

// "cpu" for the host CPU (it has one device), "cuda:3" otherwise.
std::string device_label(const backplane::Device& device);
std::vector<std::string> capability_names(uint64_t capabilities);

}  // namespace hwprobe
