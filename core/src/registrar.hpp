// The host side of bp_registrar: checks each registration of one plugin's init and collects
// it. Nothing reaches the registry unless the whole init succeeds.
#pragma once

#include <backplane/plugin.h>

#include <map>
#include <string>
#include <vector>

#include "host_api.hpp"
#include "manifest.hpp"
#include "registry.hpp"

struct bp_registrar_context {
  const backplane::detail::Manifest* manifest;
  const backplane::detail::Registry* committed;  // earlier plugins' registrations
  backplane::detail::Registry pending;           // this plugin's
  std::map<std::string, int> devices_per_type;   // registered so far, kept or not
  std::string first_error;  // kept even when the plugin ignores the status it was given
};

namespace backplane::detail {

bp_registrar make_registrar(bp_registrar_context* context);

// Whether a backend takes the place of an active one of the same type from another plugin:
// simulated over real, then available over unavailable.
bool replaces(const BackendInfo& challenger, const BackendInfo& incumbent);

// Validation, exposed for table tests. Each returns an empty string or the reason.
std::string check_device_type(const bp_registrar_context& context, const BackendInfo& backend);
std::string check_device(const bp_registrar_context& context, const DeviceInfo& device);

}  // namespace backplane::detail
