#include "plugin_host/logger.hpp"

#include <cstdio>

namespace backplane::detail {

const char* level_name(LogLevel level) {
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

Logger::Logger(LogLevel level, LogSink sink) : level_(level), sink_(std::move(sink)) {}

void Logger::log(LogLevel level, const std::string& message) const {
  if (!enabled(level)) return;
  if (sink_) {
    sink_(level, message);
    return;
  }
  // One fprintf per line keeps lines from different threads whole.
  std::fprintf(stderr, "backplane: %s: %s\n", level_name(level), message.c_str());
}

}  // namespace backplane::detail
