// Finding a model from one word (model_source.hpp): local paths, then the Hugging Face cache
// as huggingface_hub 2.x reads it offline (constants.py for the folders, file_download.py's
// try_to_load_from_cache for refs and snapshots, _validators.py for ids).
#include <backplane/error.hpp>
#include <backplane/model/model_source.hpp>

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "../env.hpp"

namespace backplane {
namespace {

bool is_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

bool is_word_char(char c) {
  return is_id_char(c) && c != '-' && c != '.';
}

// One part of a repo id: 1-96 id characters between word boundaries (REPO_ID_REGEX).
bool is_id_part(std::string_view part) {
  return !part.empty() && part.size() <= 96 && std::all_of(part.begin(), part.end(), is_id_char) &&
         is_word_char(part.front()) && is_word_char(part.back());
}

std::optional<std::string> home_of_user(const std::string& user, const EnvLookup& env) {
  if (user.empty()) {
    if (auto home = env("HOME")) return home;
  }
  const passwd* entry = user.empty() ? getpwuid(getuid()) : getpwnam(user.c_str());
  if (entry == nullptr || entry->pw_dir == nullptr) return std::nullopt;
  return std::string(entry->pw_dir);
}

// Python's os.path.expanduser: a leading "~" or "~user" up to the first "/".
std::string expand_user(const std::string& path, const EnvLookup& env) {
  if (path.empty() || path[0] != '~') return path;
  const size_t slash = path.find('/');
  const std::string user =
      path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
  const std::optional<std::string> home = home_of_user(user, env);
  if (!home) return path;
  std::string rest = slash == std::string::npos ? "" : path.substr(slash);
  std::string root = *home;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root + rest;
}

// Python's posixpath.expandvars: $name ([A-Za-z0-9_]+) and ${name}; unset ones stay as written.
std::string expand_vars(const std::string& path, const EnvLookup& env) {
  std::string out;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] != '$') {
      out += path[i++];
      continue;
    }
    size_t end = i + 1;
    std::string name;
    if (end < path.size() && path[end] == '{') {
      const size_t close = path.find('}', end);
      if (close == std::string::npos) {
        out += path.substr(i);
        break;
      }
      name = path.substr(end + 1, close - end - 1);
      end = close + 1;
    } else {
      while (end < path.size() && is_word_char(path[end])) ++end;
      name = path.substr(i + 1, end - i - 1);
    }
    const std::optional<std::string> value = name.empty() ? std::nullopt : env(name.c_str());
    out += value ? *value : path.substr(i, end - i);
    i = end;
  }
  return out;
}

std::string expanded(const std::string& path, const EnvLookup& env) {
  return expand_vars(expand_user(path, env), env);
}

bool ends_with(const std::string& text, std::string_view tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// The first bytes of a file: enough to tell a tree file or an index from a config.json.
std::string file_head(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

ModelSource source_of_file(const std::filesystem::path& file) {
  const std::string name = file.filename().string();
  if (ends_with(name, ".safetensors")) return {ModelFileKind::kWeights, file, std::nullopt, ""};
  const std::string head = file_head(file);
  if (head.find("\"backplane-module-tree\"") != std::string::npos) {
    return {ModelFileKind::kTree, file, std::nullopt, ""};
  }
  if (ends_with(name, ".index.json") || head.find("\"weight_map\"") != std::string::npos) {
    return {ModelFileKind::kWeights, file, std::nullopt, ""};
  }
  return {ModelFileKind::kConfig, file, std::nullopt, ""};
}

ModelSource source_of_folder(const std::filesystem::path& folder, const std::string& what) {
  std::error_code ec;
  for (const char* weights : {"model.safetensors.index.json", "model.safetensors"}) {
    if (std::filesystem::is_regular_file(folder / weights, ec)) {
      return {ModelFileKind::kWeights, folder, std::nullopt, ""};
    }
  }
  if (std::filesystem::is_regular_file(folder / "config.json", ec)) {
    return {ModelFileKind::kConfig, folder / "config.json", std::nullopt, ""};
  }
  throw InvalidArgument(what +
                        " holds none of model.safetensors.index.json, model.safetensors or "
                        "config.json (a model folder as save_pretrained writes it)");
}

std::string read_ref(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text;
}

std::string cached_snapshots(const std::filesystem::path& snapshots) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(snapshots, ec), end; !ec && it != end;
       it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) return "none";
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

ModelSource source_in_cache(const HubId& id, const std::filesystem::path& cache,
                            const std::string& model) {
  std::string folder_name = "models";
  size_t start = 0;
  for (size_t slash; (slash = id.repo_id.find('/', start)) != std::string::npos;
       start = slash + 1) {
    folder_name += "--" + id.repo_id.substr(start, slash - start);
  }
  folder_name += "--" + id.repo_id.substr(start);
  const std::filesystem::path repo = cache / folder_name;
  std::error_code ec;
  const std::string hint =
      " (hwprobe never downloads: fetch it where there is a network, for example with `hf "
      "download " +
      id.repo_id + "`, and point HF_HUB_CACHE or HF_HOME at that cache)";
  if (!std::filesystem::is_directory(repo, ec)) {
    throw InvalidArgument("'" + model +
                          "' is no file or folder, and not in the Hugging Face cache: no folder '" +
                          repo.string() + "'" + hint);
  }
  std::string commit = id.revision;
  const std::filesystem::path ref = repo / "refs" / id.revision;
  if (std::filesystem::is_regular_file(ref, ec)) commit = read_ref(ref);
  const std::filesystem::path snapshots = repo / "snapshots";
  const std::filesystem::path snapshot = snapshots / commit;
  const bool plain_commit =
      !commit.empty() && commit.find('/') == std::string::npos && commit != "." && commit != "..";
  if (!plain_commit || !std::filesystem::is_directory(snapshot, ec)) {
    throw InvalidArgument(
        "'" + model + "': revision '" + id.revision + "' is not in the Hugging Face cache: " +
        (commit == id.revision ? "no file '" + ref.string() + "', and "
                               : "'" + ref.string() + "' names commit '" + commit + "', but ") +
        "no snapshot '" + snapshot.string() +
        "'; cached snapshots: " + cached_snapshots(snapshots) + hint);
  }
  ModelSource source =
      source_of_folder(snapshot, "The snapshot '" + snapshot.string() + "' of '" + model + "'");
  source.hub_id = id;
  source.commit = commit;
  return source;
}

}  // namespace

std::optional<HubId> parse_hub_id(std::string_view text) {
  HubId id;
  const size_t at = text.find('@');
  std::string_view repo = text.substr(0, at);
  if (at != std::string_view::npos) {
    const std::string_view revision = text.substr(at + 1);
    if (revision.empty() || revision.front() == '/' ||
        revision.find("..") != std::string_view::npos) {
      return std::nullopt;
    }
    id.revision = std::string(revision);
  }
  const size_t slash = repo.find('/');
  if (slash != std::string_view::npos && repo.find('/', slash + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  if (slash != std::string_view::npos && !is_id_part(repo.substr(0, slash))) return std::nullopt;
  if (!is_id_part(slash == std::string_view::npos ? repo : repo.substr(slash + 1)))
    return std::nullopt;
  if (repo.find("--") != std::string_view::npos || repo.find("..") != std::string_view::npos ||
      ends_with(std::string(repo), ".git")) {
    return std::nullopt;
  }
  id.repo_id = std::string(repo);
  return id;
}

std::filesystem::path hub_cache_folder(const EnvLookup& env) {
  if (auto cache = env("HF_HUB_CACHE")) return expanded(*cache, env);
  if (auto legacy = env("HUGGINGFACE_HUB_CACHE")) return expanded(*legacy, env);
  std::string home;
  if (auto hf_home = env("HF_HOME")) {
    home = *hf_home;
  } else {
    const std::optional<std::string> xdg = env("XDG_CACHE_HOME");
    home = (xdg ? *xdg : expand_user("~", env) + "/.cache") + "/huggingface";
  }
  return std::filesystem::path(expanded(home, env)) / "hub";
}

const char* to_string(ModelFileKind kind) {
  switch (kind) {
    case ModelFileKind::kConfig:
      return "config";
    case ModelFileKind::kWeights:
      return "weights";
    case ModelFileKind::kTree:
      return "tree";
  }
  return "unknown";
}

ModelSource locate_model(std::string_view model, const std::filesystem::path& hub_cache) {
  const std::string word(model);
  if (word.empty()) {
    throw InvalidArgument(
        "The model is empty: give a folder, a config.json, a .safetensors file, "
        "an index, a module tree file or a Hub id org/name[@revision]");
  }
  std::error_code ec;
  const std::filesystem::path path(word);
  if (std::filesystem::is_directory(path, ec))
    return source_of_folder(path, "Folder '" + word + "'");
  if (std::filesystem::exists(path, ec)) {
    if (!std::filesystem::is_regular_file(path, ec)) {
      throw InvalidArgument("'" + word + "' is neither a regular file nor a folder");
    }
    return source_of_file(path);
  }
  const std::optional<HubId> id = parse_hub_id(word);
  if (!id) {
    throw InvalidArgument("'" + word +
                          "' is no file or folder, and not a Hub id: expected org/name[@revision] "
                          "(letters, digits, '-', '_', '.'; at most 96 per part; no '--' or '..')");
  }
  return source_in_cache(*id, hub_cache, word);
}

ModelDescription model_from_source(const ModelSource& source) {
  switch (source.kind) {
    case ModelFileKind::kConfig:
      return model_from_config(source.path);
    case ModelFileKind::kWeights:
      return model_from_safetensors(source.path);
    case ModelFileKind::kTree:
      return model_from_tree(source.path);
  }
  throw InvalidArgument("unknown model file kind");
}

ModelSource locate_model(std::string_view model) {
  const EnvLookup env = [](const char* name) { return detail::secure_env(name); };
  return locate_model(model, hub_cache_folder(env));
}

ModelDescription model_from_path(std::string_view model) {
  return model_from_source(locate_model(model));
}

}  // namespace backplane
