// What the core keeps of one backend plugin's init: its device types, devices, kernels and
// layer kernels, checked against its manifest and the plugins loaded before it. Nothing reaches
// the registry unless the whole init succeeds.
#pragma once

#include <backplane/plugin.h>

#include <map>
#include <string>

#include "manifest.hpp"
#include "plugin_host/registrar.hpp"
#include "registry.hpp"

namespace backplane::detail {

class PluginRegistration : public RegistrationHandler {
 public:
  PluginRegistration(const Manifest& manifest, const Registry& committed)
      : manifest_(manifest), committed_(committed) {}

  std::string add_device_type(const bp_device_type_desc& desc) override;
  std::string add_device(const bp_device_desc& desc) override;
  std::string check_kernel(const KernelInfo& kernel) override;
  std::string add_layer_kernel(const bp_layer_kernel_desc& desc) override;

  // This plugin's registrations (its kernels come from PluginLibrary::init).
  Registry& pending() { return pending_; }

  // Validation, exposed for table tests. Each returns an empty string or the reason.
  std::string check_device_type(const BackendInfo& backend) const;
  std::string check_device(const DeviceInfo& device) const;

 private:
  const Manifest& manifest_;
  const Registry& committed_;  // earlier plugins' registrations
  Registry pending_;
  std::map<std::string, int> devices_per_type_;  // registered so far, kept or not
};

// Whether a backend takes the place of an active one of the same type from another plugin:
// simulated over real, then available over unavailable.
bool replaces(const BackendInfo& challenger, const BackendInfo& incumbent);

}  // namespace backplane::detail
