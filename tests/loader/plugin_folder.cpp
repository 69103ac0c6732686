#include "plugin_folder.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace backplane::testing {

std::filesystem::path fake_library(std::string_view variant) {
  return std::filesystem::path(BACKPLANE_FAKE_PLUGIN_DIR) /
         ("libfake_" + std::string(variant) + BACKPLANE_FAKE_PLUGIN_SUFFIX);
}

void LogCapture::add(LogLevel level, const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  lines_.push_back(std::string(to_string(level)) + ": " + line);
}

std::vector<std::string> LogCapture::lines() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lines_;
}

bool LogCapture::contains(std::string_view text) const {
  return count(text) > 0;
}

size_t LogCapture::count(std::string_view text) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(std::count_if(lines_.begin(), lines_.end(), [&](const std::string& l) {
    return l.find(text) != std::string::npos;
  }));
}

std::string LogCapture::dump() const {
  std::string out;
  for (const std::string& line : lines()) out += "  " + line + "\n";
  return out;
}

std::filesystem::path PluginFolder::add_manifest(const std::string& name,
                                                 const std::filesystem::path& library_path,
                                                 const std::vector<std::string>& device_types,
                                                 const std::string& abi) {
  const nlohmann::json manifest = {{"file_format_version", "1.0.0"},
                                   {"plugin",
                                    {{"name", name},
                                     {"library_path", library_path.string()},
                                     {"abi_version", abi},
                                     {"device_types", device_types}}}};
  char prefix[8];
  std::snprintf(prefix, sizeof prefix, "%02d-", next_);
  return add_raw_manifest(prefix + name + ".json", manifest.dump(2));
}

std::filesystem::path PluginFolder::add_raw_manifest(const std::string& filename,
                                                     const std::string& text) {
  ++next_;
  const std::filesystem::path file = path() / filename;
  std::ofstream out(file, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + file.string());
  return file;
}

RuntimeOptions PluginFolder::options() const {
  RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{path()};
  options.log_level = LogLevel::kDebug;
  // The sink holds the capture alive: it may be called until the last Runtime copy is gone.
  options.log_sink = [log = log_](LogLevel level, const std::string& line) {
    log->add(level, line);
  };
  return options;
}

const PluginInfo& plugin_named(const Runtime& runtime, std::string_view name) {
  for (const PluginInfo& info : runtime.plugins()) {
    if (info.name == name) return info;
  }
  ADD_FAILURE() << "no plugin named '" << name << "'; plugins:\n" << describe(runtime);
  throw std::runtime_error("no plugin named " + std::string(name));
}

std::string describe(const Runtime& runtime) {
  std::string out;
  for (const PluginInfo& info : runtime.plugins()) {
    out += "  " + info.name + " [" + to_string(info.status) + "] " + info.error + " (" +
           info.manifest.string() + ")\n";
  }
  return out;
}

}  // namespace backplane::testing
