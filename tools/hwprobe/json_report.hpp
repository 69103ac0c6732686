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
// {backplane_version, abi_version, plugins, backends, devices, kernels, layer_kernels}
nlohmann::json runtime_json(const backplane::Runtime& runtime);
// {search_path, plugins}
nlohmann::json plugins_json(const backplane::Runtime& runtime);

// "cpu" for the host CPU (it has one device), "cuda:3" otherwise.
std::string device_label(const backplane::Device& device);
std::vector<std::string> capability_names(uint64_t capabilities);

}  // namespace hwprobe
