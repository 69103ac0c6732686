// The log of a host and of what it loaded: lines below the chosen level are dropped before they are
// formatted.
#pragma once

#include <backplane/runtime/runtime.hpp>

#include <string>

namespace backplane::detail {

// "error", "warn", "info", "debug" (backplane::to_string(LogLevel) answers with it).
const char* level_name(LogLevel level);

class Logger {
 public:
  Logger() = default;  // warnings and errors, to stderr
  Logger(LogLevel level, LogSink sink);
  bool enabled(LogLevel level) const { return level <= level_; }
  void log(LogLevel level, const std::string& message) const;

 private:
  LogLevel level_ = LogLevel::kWarn;
  LogSink sink_;
};

}  // namespace backplane::detail
