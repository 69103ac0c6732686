#include <backplane/error.hpp>
#include <backplane/hub/store.hpp>

#include <stdlib.h>

namespace backplane::hub {

LocalKernels LocalKernels::parse(std::string_view value, std::string_view source) {
  LocalKernels local;
  const std::string form = "; expected org/repo=/absolute/path, items separated by ':'";
  size_t start = 0;
  while (start <= value.size()) {
    size_t end = value.find(':', start);
    if (end == std::string_view::npos) end = value.size();
    const std::string item(value.substr(start, end - start));
    start = end + 1;
    if (item.empty()) continue;
    const size_t equals = item.find('=');
    if (equals == std::string::npos) {
      throw InvalidArgument(std::string(source) + ": item '" + item + "' has no '='" + form);
    }
    const RepoId repo = RepoId::parse(item.substr(0, equals), source);
    const std::filesystem::path path = item.substr(equals + 1);
    if (path.empty() || !path.is_absolute()) {
      throw InvalidArgument(std::string(source) + ": item '" + item + "': the path '" +
                            path.string() + "' is not absolute" + form);
    }
    if (!local.repos.emplace(repo.str(), path.lexically_normal()).second) {
      throw InvalidArgument(std::string(source) + ": " + repo.str() + " is given twice");
    }
  }
  return local;
}

LocalKernels LocalKernels::from_environment() {
  const char* value = ::secure_getenv("BACKPLANE_LOCAL_KERNELS");
  if (value == nullptr) return {};
  return parse(value, "BACKPLANE_LOCAL_KERNELS");
}

std::filesystem::path default_store_root() {
  auto absolute_env = [](const char* name) -> std::filesystem::path {
    const char* value = ::secure_getenv(name);
    if (value == nullptr || *value == '\0') return {};
    return value;
  };
  if (std::filesystem::path cache = absolute_env("BACKPLANE_HUB_CACHE"); !cache.empty()) {
    if (!cache.is_absolute()) {
      throw InvalidArgument("BACKPLANE_HUB_CACHE: '" + cache.string() +
                            "' is not an absolute path");
    }
    return cache.lexically_normal();
  }
  // XDG Base Directory: a relative XDG_CACHE_HOME is invalid and ignored.
  if (std::filesystem::path xdg = absolute_env("XDG_CACHE_HOME"); xdg.is_absolute()) {
    return (xdg / "backplane" / "hub").lexically_normal();
  }
  if (std::filesystem::path home = absolute_env("HOME"); home.is_absolute()) {
    return (home / ".cache" / "backplane" / "hub").lexically_normal();
  }
  throw InvalidArgument(
      "no kernel store: BACKPLANE_HUB_CACHE, XDG_CACHE_HOME and HOME are all unset (or not "
      "absolute); set BACKPLANE_HUB_CACHE to a folder");
}

}  // namespace backplane::hub
