#include "temp_folder.hpp"

#include <cstdlib>
#include <fstream>
#include <string>
#include <system_error>

namespace backplane::fuzz {

TempFolder::TempFolder() {
  std::string pattern = (std::filesystem::temp_directory_path() / "backplane-fuzz-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) std::abort();
  path_ = pattern;
}

TempFolder::~TempFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::filesystem::path TempFolder::write(const std::string& name, std::string_view bytes) const {
  const std::filesystem::path file = path_ / name;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) std::abort();
  return file;
}

}  // namespace backplane::fuzz
