// The host side of the plugin ABI: status objects and the per-plugin bp_host_api.
#pragma once

#include <backplane/plugin.h>

#include <map>
#include <memory>
#include <string>

#include "logger.hpp"

// Defined here, opaque to plugins (plugin.h). Made by status_new, freed by the core.
struct bp_status {
  bp_status_code code;
  std::string message;
};

// One per loaded plugin; lives as long as the plugin.
struct bp_host_context {
  std::string plugin_name;
  const backplane::detail::Logger* logger;
  std::map<std::string, std::string> settings;  // what bp_host_api.setting answers (1.5)
};

namespace backplane::detail {

// What the host application gave one plugin by name (bp_host_api.setting).
using PluginSettings = std::map<std::string, std::string>;

struct StatusDeleter {
  void operator()(bp_status* status) const;
};
using StatusPtr = std::unique_ptr<bp_status, StatusDeleter>;

// Takes ownership of a status a plugin returned. Empty for success.
inline StatusPtr adopt(bp_status* status) {
  return StatusPtr(status);
}

// Makes a status inside the core (for registrar replies).
bp_status* make_status(bp_status_code code, const std::string& message);

// "invalid argument", "internal", ...
const char* status_code_name(bp_status_code code);

bp_host_api make_host_api(bp_host_context* context);

}  // namespace backplane::detail
