// Test framework for the plugin loader, after Vulkan-Loader's tests/framework: a temporary
// plugin folder that tests fill with manifests pointing at the fake plugins
// (tests/fake_plugins), and a runtime opened on it whose log lines are captured.
//
//   PluginFolder dir;
//   dir.add_manifest("fake_good", fake_library("good"), {"fakeaccel"});
//   dir.add_raw_manifest("broken.json", "{");
//   Runtime rt = dir.open();
//   EXPECT_TRUE(dir.log().contains("plugin 'fake_good': init"));
#pragma once

#include <backplane/plugin.h>
#include <backplane/runtime/runtime.hpp>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "temp_folder.hpp"

namespace backplane::testing {

// The library of fake plugin `variant` (tests/fake_plugins), e.g. fake_library("good").
std::filesystem::path fake_library(std::string_view variant);

// Log lines captured from a runtime; safe to fill from many threads.
class LogCapture {
 public:
  void add(LogLevel level, const std::string& line);
  std::vector<std::string> lines() const;
  bool contains(std::string_view text) const;
  // Lines that contain `text`.
  size_t count(std::string_view text) const;
  // All lines, one per line, for failure messages.
  std::string dump() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

// A temporary plugin folder. Manifests load in the order they were added: each file is named
// "<NN>-<name>.json" with a running number NN.
class PluginFolder {
 public:
  PluginFolder() : log_(std::make_shared<LogCapture>()) {}

  const std::filesystem::path& path() const { return folder_.path(); }

  // Writes a well-formed manifest for plugin `name`, declaring `abi` (default: this build's,
  // which the fake plugins' tables report); returns the manifest's path.
  std::filesystem::path add_manifest(const std::string& name,
                                     const std::filesystem::path& library_path,
                                     const std::vector<std::string>& device_types,
                                     const std::string& abi = "1." +
                                                              std::to_string(BP_ABI_VERSION_MINOR));
  // Writes `text` as the file `filename` in the folder, as it is; returns its path.
  std::filesystem::path add_raw_manifest(const std::string& filename, const std::string& text);

  // Options that search only this folder and capture the log at debug level.
  RuntimeOptions options() const;
  Runtime open() const { return Runtime::open(options()); }

  LogCapture& log() const { return *log_; }
  std::shared_ptr<LogCapture> shared_log() const { return log_; }

 private:
  TempFolder folder_;
  std::shared_ptr<LogCapture> log_;
  int next_ = 0;
};

// The record of plugin `name`; fails the test (and throws) when there is none.
const PluginInfo& plugin_named(const Runtime& runtime, std::string_view name);

// Every plugin's name, status and error, for failure messages.
std::string describe(const Runtime& runtime);

}  // namespace backplane::testing
