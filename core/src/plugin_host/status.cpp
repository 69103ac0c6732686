#include "plugin_host/status.hpp"

namespace backplane::detail {
namespace {

bp_status out_of_memory_status{BP_OUT_OF_MEMORY, "out of memory while reporting an error", false};

}  // namespace

void StatusDeleter::operator()(bp_status* status) const {
  if (status != nullptr && status->on_heap) delete status;
}

bp_status* make_status(bp_status_code code, const std::string& message) {
  try {
    return new bp_status{code, message};
  } catch (...) {
    return &out_of_memory_status;
  }
}

std::string take_status_message(bp_status* status) {
  return status != nullptr ? adopt(status)->message : std::string();
}

const char* status_code_name(bp_status_code code) {
  switch (code) {
    case BP_OK:
      return "ok";
    case BP_INVALID_ARGUMENT:
      return "invalid argument";
    case BP_NOT_FOUND:
      return "not found";
    case BP_ALREADY_EXISTS:
      return "already exists";
    case BP_UNAVAILABLE:
      return "unavailable";
    case BP_UNIMPLEMENTED:
      return "unimplemented";
    case BP_INTERNAL:
      return "internal";
    case BP_OUT_OF_MEMORY:
      return "out of memory";
  }
  return "unknown status code";
}

}  // namespace backplane::detail
