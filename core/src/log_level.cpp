// The log levels of RuntimeOptions and BACKPLANE_LOG.
#include <backplane/error.hpp>
#include <backplane/runtime/runtime.hpp>

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
  switch (level) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "unknown";
}

}  // namespace backplane
