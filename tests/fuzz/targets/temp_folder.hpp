// A folder of its own for a fuzz target that must hand a parser files, removed at exit.
#pragma once

#include <filesystem>
#include <string_view>

namespace backplane::fuzz {

class TempFolder {
 public:
  TempFolder();
  ~TempFolder();
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `bytes` to path()/name, replacing it.
  std::filesystem::path write(const std::string& name, std::string_view bytes) const;

 private:
  std::filesystem::path path_;
};

}  // namespace backplane::fuzz
