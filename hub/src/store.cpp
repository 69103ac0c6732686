#include <backplane/error.hpp>
#include <backplane/hub/errors.hpp>
#include <backplane/hub/kernel_builder.hpp>
#include <backplane/hub/metadata.hpp>
#include <backplane/hub/store.hpp>

#include <algorithm>
#include <system_error>

#include "files.hpp"
#include "hf_cache.hpp"

namespace backplane::hub {
namespace fs = std::filesystem;

namespace {

InstalledPackage describe(const RepoId& repo, const std::string& revision, const fs::path& folder,
                          bool local) {
  return InstalledPackage{repo, revision, folder, detail::subfolders(folder / "build"), local};
}

std::string revisions_text(const std::vector<InstalledPackage>& found) {
  std::string out;
  for (const InstalledPackage& p : found) out += (out.empty() ? "" : ", ") + p.revision;
  return out;
}

}  // namespace

Store::Store(fs::path root, LocalKernels local, std::vector<fs::path> hf_caches)
    : root_(std::move(root)), local_(std::move(local)) {
  hf_caches_.push_back(root_);
  for (fs::path& cache : hf_caches) {
    if (!cache.empty() &&
        std::find(hf_caches_.begin(), hf_caches_.end(), cache) == hf_caches_.end()) {
      hf_caches_.push_back(std::move(cache));
    }
  }
}

Store Store::from_environment() {
  return Store(default_store_root(), LocalKernels::from_environment(), {default_hf_cache()});
}

fs::path default_hf_cache() {
  auto absolute_env = [](const char* name) -> fs::path {
    const char* value = ::secure_getenv(name);
    if (value == nullptr || *value == '\0') return {};
    const fs::path path(value);
    return path.is_absolute() ? path.lexically_normal() : fs::path();
  };
  for (const char* name : {"KERNELS_CACHE", "HF_HUB_CACHE"}) {
    if (fs::path p = absolute_env(name); !p.empty()) return p;
  }
  if (fs::path home = absolute_env("HF_HOME"); !home.empty()) return home / "hub";
  if (fs::path xdg = absolute_env("XDG_CACHE_HOME"); !xdg.empty())
    return xdg / "huggingface" / "hub";
  if (fs::path home = absolute_env("HOME"); !home.empty()) {
    return home / ".cache" / "huggingface" / "hub";
  }
  return {};
}

fs::path Store::folder(const RepoId& repo, const std::string& revision) const {
  check_revision(revision, "revision");
  return root_ / repo.org / repo.name / revision;
}

std::vector<InstalledPackage> Store::find(const RepoId& repo) const {
  if (auto it = local_.repos.find(repo.str()); it != local_.repos.end()) {
    return {describe(repo, kLocalRevision, it->second, true)};
  }
  std::vector<InstalledPackage> found;
  for (const std::string& revision : detail::subfolders(root_ / repo.org / repo.name)) {
    try {
      check_revision(revision, "store");
    } catch (const InvalidArgument&) {
      continue;  // not something install made
    }
    found.push_back(describe(repo, revision, root_ / repo.org / repo.name / revision, false));
  }
  for (const fs::path& cache : hf_caches_) {
    for (const detail::HfCachedRevision& r : detail::hf_cache_revisions(cache, repo)) {
      try {
        check_revision(r.revision, "hf-cache");
      } catch (const InvalidArgument&) {
        continue;  // a ref such as pr/1 cannot be named as a revision here
      }
      InstalledPackage p = describe(repo, r.revision, r.snapshot, false);
      p.hf_cache = true;
      p.commit = r.commit;
      p.link_root = r.repo_folder;
      found.push_back(std::move(p));
    }
  }
  return found;
}

std::vector<InstalledPackage> Store::list() const {
  detail::check_store_root(root_);
  std::vector<InstalledPackage> all;
  for (const std::string& org : detail::subfolders(root_)) {
    if (!RepoId::is_valid_part(org)) continue;  // .staging and strangers
    for (const std::string& name : detail::subfolders(root_ / org)) {
      if (!RepoId::is_valid_part(name)) continue;
      const RepoId repo{org, name};
      if (local_.repos.count(repo.str())) continue;  // listed below, as its local folder
      for (InstalledPackage& p : find(repo)) all.push_back(std::move(p));
    }
  }
  for (const auto& [id, path] : local_.repos) {
    all.push_back(
        describe(RepoId::parse(id, "BACKPLANE_LOCAL_KERNELS"), kLocalRevision, path, true));
  }
  // Repos only in a Hugging Face cache (those also in the store were listed with it).
  for (const fs::path& cache : hf_caches_) {
    for (const RepoId& repo : detail::hf_cache_repos(cache)) {
      const bool listed = std::any_of(all.begin(), all.end(),
                                      [&](const InstalledPackage& p) { return p.repo == repo; });
      if (listed) continue;
      for (InstalledPackage& p : find(repo)) all.push_back(std::move(p));
    }
  }
  std::sort(all.begin(), all.end(), [](const InstalledPackage& a, const InstalledPackage& b) {
    return a.repo.str() != b.repo.str() ? a.repo.str() < b.repo.str() : a.revision < b.revision;
  });
  return all;
}

InstalledPackage Store::locate(const RepoId& repo,
                               const std::optional<std::string>& revision) const {
  const std::vector<InstalledPackage> found = find(repo);
  if (!found.empty() && found.front().local) {
    std::error_code ec;
    if (!fs::is_directory(found.front().folder, ec)) {
      throw NotFound("BACKPLANE_LOCAL_KERNELS points " + repo.str() + " at " +
                     found.front().folder.string() + ", which is not a folder");
    }
    return found.front();
  }
  if (revision) check_revision(*revision, "revision");
  if (found.empty()) {
    std::string caches;
    for (size_t i = 1; i < hf_caches_.size(); ++i) caches += ", " + hf_caches_[i].string();
    throw NotFound(repo.str() + " is not installed in the kernel store " + root_.string() +
                   (caches.empty() ? "" : " nor in the Hugging Face cache " + caches.substr(2)) +
                   " (kernel-hub install PATH_OR_ARCHIVE)");
  }
  const std::string wanted = revision ? *revision : std::string(kDefaultRevision);
  for (const InstalledPackage& p : found) {
    if (p.revision == wanted) return p;
  }
  for (const InstalledPackage& p : found) {
    if (p.hf_cache && p.commit == wanted) return p;  // a snapshot asked for by its commit
  }
  if (revision) {
    throw NotFound(repo.str() + " is not installed at revision " + *revision +
                   "; installed: " + revisions_text(found));
  }
  if (found.size() == 1) return found.front();
  throw InvalidArgument(repo.str() + " has several revisions installed (" + revisions_text(found) +
                        ") and none is " + kDefaultRevision + "; name one");
}

bool Store::installed(const RepoId& repo, const std::optional<std::string>& revision) const {
  try {
    locate(repo, revision);
    return true;
  } catch (const Error&) {
    return false;
  }
}

bool Store::installed(const HubKernelId& id) const {
  try {
    const InstalledPackage p = locate(RepoId::parse(id.repo, "HubKernelId"), id.revision);
    if (!id.function) return true;
    for (const std::string& variant : p.variants) {
      try {
        if (read_metadata(p.folder / "build" / variant / "metadata.json").function(*id.function)) {
          return true;
        }
      } catch (const Error&) {  // an unreadable variant declares nothing
      }
    }
    return false;
  } catch (const Error&) {
    return false;
  }
}

size_t Store::remove(const RepoId& repo, const std::optional<std::string>& revision) const {
  detail::check_store_root(root_);
  const detail::StoreLock store_lock(root_, detail::StoreLock::Mode::kExclusive);
  size_t removed = 0;
  for (const InstalledPackage& p : find(repo)) {
    if (p.local || p.hf_cache || (revision && p.revision != *revision)) continue;
    // Rename out of sight first, so no reader sees a half-removed package.
    const detail::StagingFolder trash(root_ / ".staging", "remove-");
    std::error_code ec;
    fs::rename(p.folder, trash.path() / "package", ec);
    if (ec) throw Error("cannot remove " + p.folder.string() + ": " + ec.message());
    detail::sync_folder(p.folder.parent_path());
    ++removed;
  }
  if (removed > 0) {  // nothing removed, nothing touched
    std::error_code ec;
    fs::remove(root_ / repo.org / repo.name, ec);  // only when empty
    fs::remove(root_ / repo.org, ec);
  }
  return removed;
}

LockedRepo Store::lock_entry(const RepoId& repo, const std::optional<std::string>& revision) const {
  const detail::StoreLock store_lock(root_, detail::StoreLock::Mode::kShared);
  const InstalledPackage p = locate(repo, revision);
  LockedRepo locked;
  locked.revision = p.revision;
  locked.requested = p.revision;
  // The commit the kernels library's lock format records: a cache snapshot's, or a revision
  // that is one.
  const bool revision_is_commit =
      (p.revision.size() == 40 || p.revision.size() == 64) &&
      p.revision.find_first_not_of("0123456789abcdef") == std::string::npos;
  locked.commit = p.hf_cache ? p.commit : revision_is_commit ? p.revision : "";
  for (const std::string& variant : p.variants) {
    locked.variants[variant] = to_locked(digest_variant(p.folder / "build" / variant, p.link_root));
  }
  return locked;
}

ResolvedVariant Store::resolve(const RepoId& repo, const std::optional<std::string>& revision,
                               const SystemFacts& system) const {
  ResolvedVariant out{locate(repo, revision), {}, std::nullopt};
  out.resolution = resolve_variants(out.package.variants, system);
  if (const VariantDecision* chosen = out.resolution.chosen()) out.variant = chosen->variant;
  return out;
}

void check_lock_and_trust(const InstalledPackage& package, const std::string& variant,
                          const LoadOptions& options) {
  const std::string id = package.repo.str();
  if (package.local) return;  // the user's own folder
  const LockedRepo* locked = options.lock != nullptr ? options.lock->find(package.repo) : nullptr;
  const std::string lock_name = options.lock_source.empty() ? "kernels.lock" : options.lock_source;
  if (locked == nullptr) {
    const TrustDecision trust =
        options.trust.decide(package.repo, variant, package.folder / "build" / variant);
    if (trust.trusted) return;
    throw PackageError(
        "kernel package " + id + "@" + package.revision + " (" + variant + ") " + trust.reason +
        (options.lock != nullptr ? "; " + lock_name + " does not list it" : std::string()));
  }
  const bool same_commit = !locked->commit.empty() && locked->commit == package.commit;
  if (locked->revision != package.revision && !same_commit) {
    throw IntegrityError(lock_name + " locks " + id + " at revision " + locked->revision +
                         ", but revision " + package.revision + " was asked for");
  }
  if (locked->variants.empty() && !locked->commit.empty()) {
    // The kernels library's format pins the commit; a kernel-builder build's digest, checked
    // when it loads, vouches for its files. This project's builds have no digest of their own.
    if (is_kernel_builder_variant(package.folder / "build" / variant)) return;
    throw IntegrityError(lock_name +
                         " is in the kernels library's format, which pins only a "
                         "commit; " +
                         id + "@" + package.revision + " (" + variant +
                         ") is a backplane package, whose files only this project's lock format "
                         "records: lock it with kernel-hub lock");
  }
  auto it = locked->variants.find(variant);
  if (it == locked->variants.end()) {
    throw IntegrityError(lock_name + " locks " + id + "@" + package.revision +
                         " without the variant " + variant + " that this system needs");
  }
  const fs::path folder = package.folder / "build" / variant;
  const std::vector<std::string> differences =
      lock_differences(it->second, digest_variant(folder, package.link_root));
  if (!differences.empty()) {
    throw IntegrityError(
        "kernel package " + id + "@" + package.revision + " (" + variant + ") does not match " +
        lock_name + ": " + folder.string() + "/" + differences.front() +
        (differences.size() > 1 ? " (and " + std::to_string(differences.size() - 1) + " more)"
                                : std::string()));
  }
}

LoadedPackage Store::load(const RepoId& repo, const SystemFacts& system,
                          const LoadOptions& options) const {
  // Held until the library is open: no install or removal changes the files between the check
  // and the load (a library already open stays mapped whatever happens to its file after).
  const detail::StoreLock store_lock(root_, detail::StoreLock::Mode::kShared);
  std::optional<std::string> revision = options.revision;
  if (!revision && options.lock != nullptr && !local_.repos.count(repo.str())) {
    if (const LockedRepo* locked = options.lock->find(repo)) revision = locked->revision;
  }
  const ResolvedVariant resolved = resolve(repo, revision, system);
  if (!resolved.variant) {
    throw NotFound(no_variant_message(repo.str(), resolved.package.revision, resolved.resolution));
  }
  check_lock_and_trust(resolved.package, *resolved.variant, options);
  const PackageSource source{repo, resolved.package.revision, *resolved.variant,
                             resolved.package.folder / "build" / *resolved.variant,
                             resolved.package.link_root};
  LoadedPackage package = load_package_variant(source, options.package);
  if (options.device != nullptr) {
    if (std::string why = arch_mismatch(package.metadata(), *options.device); !why.empty()) {
      throw PackageError("kernel package " + repo.str() + "@" + source.revision + " (" +
                         source.variant + ") cannot run on " + options.device->device.str() + ": " +
                         why);
    }
  }
  return package;
}

}  // namespace backplane::hub
