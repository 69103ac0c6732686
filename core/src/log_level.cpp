// The log levels of RuntimeOptions and BACKPLANE_LOG.
#include <backplane/error.hpp>
#include <backplane/runtime/runtime.hpp>

#include "plugin_host/logger.hpp"

namespace backplane {

LogLevel parse_log_level(std::string_view text, std::string_view source) {
  if (text == "error") return LogLevel::kError;
  if (text == "warn") return LogLevel::kWarn;
  if (text == "info") return LogLevel::kInfo;
  if (text == "debug") return LogLevel::kDebug;
  throw InvalidArgument(std::string(source) + "='" + std::string(text) +
                        "' is not a log level; expected one of error, warn, info, debug");
}

const char* to_string(LogLevel level) {
  return detail::level_name(level);
}

}  // namespace backplane
