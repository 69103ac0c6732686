#include "host_api.hpp"

#include <new>

namespace backplane::detail {
namespace {

// Returned when a status cannot be allocated; never freed.
bp_status out_of_memory_status{BP_OUT_OF_MEMORY, "out of memory while reporting an error"};

bp_status* host_status_new(bp_host_context*, bp_status_code code, const char* message) {
  if (code == BP_OK) return nullptr;
  return make_status(code, message != nullptr ? message : "");
}

void host_log(bp_host_context* context, bp_log_level level, const char* message) {
  const auto core_level = static_cast<LogLevel>(level > BP_LOG_DEBUG ? BP_LOG_DEBUG : level);
  if (context == nullptr || !context->logger->enabled(core_level)) return;
  try {
    context->logger->log(core_level, "plugin '" + context->plugin_name +
                                         "': " + (message != nullptr ? message : ""));
  } catch (...) {  // logging must never throw into a plugin
  }
}

void host_status_free(bp_host_context*, bp_status* status) {
  StatusDeleter()(status);
}

const char* host_status_message(bp_host_context*, const bp_status* status) {
  return status != nullptr ? status->message.c_str() : "";
}

const char* host_setting(bp_host_context* context, const char* key) {
  if (context == nullptr || key == nullptr) return nullptr;
  const auto it = context->settings.find(key);
  return it == context->settings.end() ? nullptr : it->second.c_str();
}

}  // namespace

void StatusDeleter::operator()(bp_status* status) const {
  if (status != &out_of_memory_status) delete status;
}

bp_status* make_status(bp_status_code code, const std::string& message) {
  try {
    return new bp_status{code, message};
  } catch (...) {
    return &out_of_memory_status;
  }
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

bp_host_api make_host_api(bp_host_context* context) {
  bp_host_api api{};
  api.struct_size = sizeof api;
  api.abi_major = BP_ABI_VERSION_MAJOR;
  api.abi_minor = BP_ABI_VERSION_MINOR;
  api.context = context;
  api.status_new = &host_status_new;
  api.log = &host_log;
  api.status_free = &host_status_free;
  api.status_message = &host_status_message;
  api.setting = &host_setting;
  return api;
}

}  // namespace backplane::detail
