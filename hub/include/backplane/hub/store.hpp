// The local kernel store: installed kernel packages by repository and revision, plus the
// repositories BACKPLANE_LOCAL_KERNELS points at folders for development. Offline by design:
// packages come from a folder or an archive the user already has. Layout (hub/README.md,
// "The store"):
//   <root>/<org>/<repo>/<revision>/build/<variant>/{metadata.json, <library>, ...}
//   <root>/.staging/   where installs unpack before the rename that makes them visible
#pragma once

#include <backplane/export.hpp>
#include <backplane/hub/lock.hpp>
#include <backplane/hub/package.hpp>
#include <backplane/hub/repo_id.hpp>
#include <backplane/hub/trust.hpp>
#include <backplane/hub/variant.hpp>
#include <backplane/rules/attention.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::hub {

// BACKPLANE_HUB_CACHE, else $XDG_CACHE_HOME/backplane/hub, else ~/.cache/backplane/hub
// (secure_getenv; a relative BACKPLANE_HUB_CACHE or XDG_CACHE_HOME is refused/ignored as the
// XDG rules say). Throws InvalidArgument naming the variable for a relative
// BACKPLANE_HUB_CACHE, and when no home is known.
BACKPLANE_API std::filesystem::path default_store_root();

// BACKPLANE_LOCAL_KERNELS="org/repo=/path:org2/repo2=/path2": repositories served from a local
// folder (holding build/<variant>/) instead of the store, like the `kernels` library's
// LOCAL_KERNELS. Paths must be absolute and cannot contain ':'.
struct BACKPLANE_API LocalKernels {
  std::map<std::string, std::filesystem::path> repos;  // by "org/repo"

  // Throws InvalidArgument naming `source` (the variable), the item and the accepted form.
  static LocalKernels parse(std::string_view value, std::string_view source);
  static LocalKernels from_environment();  // empty when the variable is unset
};

// The revision a local folder is reported at.
inline constexpr const char* kLocalRevision = "local";

struct InstalledPackage {
  RepoId repo;
  std::string revision;               // kLocalRevision for a local folder
  std::filesystem::path folder;       // holds build/
  std::vector<std::string> variants;  // folder names under build/, sorted
  bool local = false;                 // from BACKPLANE_LOCAL_KERNELS
  // From a Hugging Face cache (read-only: never installed into, removed or pruned): revision is
  // the ref naming the snapshot ("main", "v1"), else its commit; commit is the snapshot's.
  bool hf_cache = false;
  std::string commit = {};
  // Where the variants' links may lead: empty (none may leave their folder), or the
  // repository's folder of a Hugging Face cache, whose snapshots link into its blobs/.
  std::filesystem::path link_root = {};
};

struct InstallOptions {
  std::optional<std::string> revision;  // default: kDefaultRevision
  bool replace = false;                 // replace an installed revision of the same repo
  // The repository a kernel-builder package is installed as (its metadata names the kernel,
  // not the repo); for this project's packages it must equal their repo_id when given.
  std::optional<RepoId> repo = {};
};

struct LoadOptions {
  std::optional<std::string> revision;  // default: Store::default_revision
  const LockFile* lock = nullptr;       // the project's kernels.lock; nullptr: none
  std::string lock_source;              // its file name, for messages
  TrustPolicy trust;                    // for repos the lock does not list
  // The device the kernels are for; when set, the variant's metadata archs must cover it
  // (arch_mismatch), else PackageError.
  const DeviceInfo* device = nullptr;
  PackageLoadOptions package;
};

// A variant resolved for a system, before loading.
struct ResolvedVariant {
  InstalledPackage package;
  VariantResolution resolution;
  std::optional<std::string> variant;  // the chosen one; none: nothing fits
};

// The Hugging Face cache the `kernels` library downloads into: KERNELS_CACHE, else
// HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub (relative values ignored). Empty when none can be named.
BACKPLANE_API std::filesystem::path default_hf_cache();

class BACKPLANE_API Store {
 public:
  // `hf_caches`: Hugging Face caches read beside the store (kernels--org--name/snapshots/...);
  // the store's root is read in that layout too, so BACKPLANE_HUB_CACHE may be one.
  explicit Store(std::filesystem::path root, LocalKernels local = {},
                 std::vector<std::filesystem::path> hf_caches = {});
  // default_store_root(), LocalKernels::from_environment() and default_hf_cache().
  static Store from_environment();

  const std::filesystem::path& root() const { return root_; }
  const LocalKernels& local() const { return local_; }
  const std::vector<std::filesystem::path>& hf_caches() const { return hf_caches_; }
  std::filesystem::path folder(const RepoId& repo, const std::string& revision) const;

  // Installs a package from a folder or an archive holding build/<variant>/ (at the top, or in
  // one top-level folder). Every variant is checked first (name, metadata.json, library
  // present, one repo_id for all; a kernel-builder variant: its metadata, its digest over its
  // files, one name for all, and options.repo given); the package is unpacked or copied into a
  // staging folder in
  // the store and renamed into place, so a failed install leaves nothing behind. Throws
  // InvalidArgument for a bad package (naming the file), PackageError when the revision is
  // already installed and `replace` is not set.
  InstalledPackage install(const std::filesystem::path& folder_or_archive,
                           const InstallOptions& options = {}) const;

  // Every installed revision, every revision in a Hugging Face cache, and every local folder,
  // sorted by repo then revision.
  std::vector<InstalledPackage> list() const;
  // The installed revisions of one repo, then its revisions in the Hugging Face caches (its
  // local folder only, when it has one).
  std::vector<InstalledPackage> find(const RepoId& repo) const;
  // The revision used when none is asked: a local folder's; else "main" when installed; else
  // the only one installed. Throws NotFound (nothing installed, naming the store) or
  // InvalidArgument (several, none "main": naming them).
  InstalledPackage locate(const RepoId& repo, const std::optional<std::string>& revision) const;
  bool installed(const RepoId& repo, const std::optional<std::string>& revision) const;
  // For the attention rules (AttentionEnvironment::hub_installed): the repo is installed at the
  // id's revision (or the default one) and, when the id names a function, the metadata of one
  // of its variants declares it. False for a malformed repo id.
  bool installed(const HubKernelId& id) const;

  // Removes one revision, or every revision, of a repo; returns how many went. A local folder
  // is never touched; when nothing matches, nothing changes.
  size_t remove(const RepoId& repo, const std::optional<std::string>& revision) const;

  // What kernels.lock records for the installed revision (locate's choice): every variant's
  // hashes, all read from one installed tree (an install --replace meanwhile waits).
  LockedRepo lock_entry(const RepoId& repo, const std::optional<std::string>& revision) const;

  ResolvedVariant resolve(const RepoId& repo, const std::optional<std::string>& revision,
                          const SystemFacts& system) const;

  // Resolves the variant for `system` and loads it, if the lock or the trust policy allows:
  //   - the repo is in the lock: the revision must be the locked one and the variant's files
  //     must match its hashes (IntegrityError naming the lock, the package and the file);
  //   - not in the lock: options.trust.decide must trust it (a package this build produced, by
  //     its files' hashes; a publisher the user trusts by name): else PackageError saying why
  //     and how to lock or trust it;
  //   - a local folder (BACKPLANE_LOCAL_KERNELS) is the user's own and loads unchecked.
  // No fitting variant: NotFound with no_variant_message. With options.device, a variant
  // built for other archs (metadata "archs") is refused with PackageError. Installs and
  // removals wait while a load checks and opens: what is loaded is what was checked.
  LoadedPackage load(const RepoId& repo, const SystemFacts& system,
                     const LoadOptions& options = {}) const;

 private:
  std::filesystem::path root_;
  LocalKernels local_;
  std::vector<std::filesystem::path> hf_caches_;  // the root first, then the others
};

// Checks the lock and trust rules for a package that is about to load; throws as Store::load.
BACKPLANE_API void check_lock_and_trust(const InstalledPackage& package, const std::string& variant,
                                        const LoadOptions& options);

}  // namespace backplane::hub
