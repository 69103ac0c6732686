#include "topology_option.hpp"

#include <backplane/error.hpp>

#include <algorithm>
#include <system_error>

namespace hwprobe {

std::filesystem::path shipped_topology_directory() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return (self.parent_path().parent_path() / "share" / "backplane" / "topologies")
      .lexically_normal();
}

std::vector<std::string> shipped_topologies() {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(shipped_topology_directory(), ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".json") names.push_back(it->path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::filesystem::path resolve_topology(const std::string& name_or_file) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_file, ec)) {
    return std::filesystem::absolute(name_or_file, ec);
  }
  const std::filesystem::path shipped = shipped_topology_directory() / (name_or_file + ".json");
  if (name_or_file.find('/') == std::string::npos &&
      std::filesystem::is_regular_file(shipped, ec)) {
    return shipped;
  }
  std::string names;
  for (const std::string& n : shipped_topologies()) names += (names.empty() ? "" : ", ") + n;
  throw backplane::InvalidArgument(
      "--sim '" + name_or_file + "' is neither a topology file nor a shipped topology; shipped: " +
      (names.empty() ? "(none found)" : names));
}

}  // namespace hwprobe
