// Status objects of the plugin ABI, made and freed on the host side. Every host that loads
// libraries speaking plugin.h (the core's runtime, the hub's kernel packages) uses these, so a
// status made by one may be freed by another.
#pragma once

#include <backplane/plugin.h>

#include <memory>
#include <string>

// Defined here, opaque to plugins (plugin.h). Made by bp_host_api.status_new, freed by the host.
struct bp_status {
  bp_status_code code;
  std::string message;
  // False only for the static status returned when allocating one fails. Carried in the object
  // so that each library linking this code (each has its own copy of that static) frees the
  // others' statuses correctly.
  bool on_heap = true;
};

namespace backplane::detail {

struct StatusDeleter {
  void operator()(bp_status* status) const;
};
using StatusPtr = std::unique_ptr<bp_status, StatusDeleter>;

// Takes ownership of a status a plugin returned. Empty for success.
inline StatusPtr adopt(bp_status* status) {
  return StatusPtr(status);
}

// Never NULL: when allocating fails, a static "out of memory" status that freeing ignores.
bp_status* make_status(bp_status_code code, const std::string& message);

// The message of a status, freeing it. Empty for NULL (success).
std::string take_status_message(bp_status* status);

// "invalid argument", "internal", ...
const char* status_code_name(bp_status_code code);

}  // namespace backplane::detail
