#include "plugin_host/host_api.hpp"

namespace backplane::detail {
namespace {

bp_status* host_status_new(bp_host_context*, bp_status_code code, const char* message) {
  if (code == BP_OK) return nullptr;
  return make_status(code, message != nullptr ? message : "");
}

void host_log(bp_host_context* context, bp_log_level level, const char* message) {
  const auto host_level = static_cast<LogLevel>(level > BP_LOG_DEBUG ? BP_LOG_DEBUG : level);
  if (context == nullptr || !context->logger.enabled(host_level)) return;
  try {
    context->logger.log(host_level, context->label + ": " + (message != nullptr ? message : ""));
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
