#include "process_resources.hpp"

#include <fstream>
#include <string>

namespace backplane::conformance {

ProcessResources process_resources(const std::filesystem::path& library) {
  ProcessResources r;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++r.open_files;
  }
  std::ifstream maps("/proc/self/maps");
  const std::string name = library.string();
  for (std::string line; std::getline(maps, line);) {
    // The path is the last field; " (deleted)" may follow it.
    const size_t at = line.find(name);
    if (at != std::string::npos &&
        (at + name.size() == line.size() || line[at + name.size()] == ' ')) {
      ++r.library_mappings;
    }
  }
  return r;
}

}  // namespace backplane::conformance
