#include <backplane/error.hpp>
#include <backplane/runtime/sim_topology.hpp>

#include <backplane/internal/dynamic_library.hpp>

#include <algorithm>
#include <system_error>

namespace backplane {
namespace fs = std::filesystem;

fs::path shipped_topology_directory() {
  std::error_code ec;
  // The folder of the library this function is compiled into: libbackplane.so.
  fs::path library =
      internal::library_holding(reinterpret_cast<const void*>(&shipped_topology_directory));
  if (library.empty()) return {};
  if (fs::path canonical = fs::weakly_canonical(library, ec); !ec) library = canonical;
  // Installed: the data folder as seen from the library folder (lib/x86_64-linux-gnu on
  // Debian); the build tree keeps libraries in lib/ and data in share/ beside it.
  for (const char* relative : {BACKPLANE_DATADIR_FROM_LIBDIR, "../share"}) {
    const fs::path folder =
        (library.parent_path() / relative / "backplane" / "topologies").lexically_normal();
    if (fs::is_directory(folder, ec)) return folder;
  }
  return {};
}

std::vector<std::string> shipped_topologies() {
  std::vector<std::string> names;
  std::error_code ec;
  const fs::path folder = shipped_topology_directory();
  if (folder.empty()) return names;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".json") names.push_back(it->path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

fs::path resolve_sim_topology(std::string_view name_or_file, std::string_view source) {
  const std::string text(name_or_file);
  std::error_code ec;
  if (!text.empty() && fs::is_regular_file(text, ec)) return fs::absolute(text, ec);
  const fs::path folder = shipped_topology_directory();
  const bool plain_name = !text.empty() && text.find('/') == std::string::npos;
  if (plain_name && !folder.empty() && fs::is_regular_file(folder / (text + ".json"), ec)) {
    return folder / (text + ".json");
  }
  std::string names;
  for (const std::string& n : shipped_topologies()) names += (names.empty() ? "" : ", ") + n;
  throw InvalidArgument(std::string(source) + " '" + text +
                        "' is neither a topology file nor a shipped topology; shipped: " +
                        (names.empty() ? std::string("none") : names) +
                        (folder.empty() ? std::string(" (no folder of shipped topologies found)")
                                        : " (in " + folder.string() + ")"));
}

}  // namespace backplane
