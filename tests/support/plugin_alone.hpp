// Opens a runtime that loads one plugin from its manifest: with every log line kept (how a
// plugin's own tests see it exactly as the core does), or quietly, for tests that look only at
// what it registered.
#pragma once

#include <backplane/runtime/runtime.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace backplane::testing {

struct PluginAlone {
  Runtime runtime;
  std::vector<std::pair<LogLevel, std::string>> lines;  // everything logged, debug included
};

inline std::unique_ptr<PluginAlone> open_plugin_alone(const std::filesystem::path& manifest) {
  auto lines = std::make_shared<std::vector<std::pair<LogLevel, std::string>>>();
  RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{manifest};
  options.log_level = LogLevel::kDebug;
  options.log_sink = [lines](LogLevel level, const std::string& line) {
    lines->emplace_back(level, line);
  };
  Runtime runtime = Runtime::open(options);
  return std::make_unique<PluginAlone>(PluginAlone{std::move(runtime), *lines});
}

// The log goes nowhere: errors are read from the runtime (plugins(), backends()) instead.
inline Runtime open_plugin_quietly(const std::filesystem::path& manifest) {
  RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{manifest};
  options.log_sink = [](LogLevel, const std::string&) {};
  return Runtime::open(options);
}

}  // namespace backplane::testing
