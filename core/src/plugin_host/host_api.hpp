// bp_host_api: what a host gives each library it loads (statuses, logging, settings).
#pragma once

#include <backplane/plugin.h>

#include <map>
#include <string>

#include "plugin_host/logger.hpp"
#include "plugin_host/status.hpp"

namespace backplane::detail {

// What the host application gave one plugin by name (bp_host_api.setting, ABI 1.5).
using PluginSettings = std::map<std::string, std::string>;

}  // namespace backplane::detail

// One per loaded library; lives as long as it does.
struct bp_host_context {
  std::string label;  // how its log lines start: "plugin 'cuda'", "kernel package 'org/repo@v1'"
  backplane::detail::Logger logger;
  backplane::detail::PluginSettings settings;
};

namespace backplane::detail {

bp_host_api make_host_api(bp_host_context* context);

}  // namespace backplane::detail
