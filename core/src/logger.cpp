#include "logger.hpp"

#include <backplane/error.hpp>

#include <cstdio>

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

namespace detail {

Logger::Logger(LogLevel level, LogSink sink) : level_(level), sink_(std::move(sink)) {}

void Logger::log(LogLevel level, const std::string& message) const {
  if (!enabled(level)) return;
  if (sink_) {
    sink_(level, message);
    return;
  }
  // One fprintf per line keeps lines from different threads whole.
  std::fprintf(stderr, "backplane: %s: %s\n", to_string(level), message.c_str());
}

}  // namespace detail
}  // namespace backplane
