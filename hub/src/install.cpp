// Store::install: check a package, stage it inside the store, rename it into place.
#include <backplane/error.hpp>
#include <backplane/hub/archive.hpp>
#include <backplane/hub/errors.hpp>
#include <backplane/hub/kernel_builder.hpp>
#include <backplane/hub/metadata.hpp>
#include <backplane/hub/store.hpp>
#include <backplane/internal/files.hpp>

#include <fcntl.h>
#include <stdio.h>

#include <system_error>

#include "files.hpp"

namespace backplane::hub {
namespace fs = std::filesystem;

namespace {

// The folder holding build/ in an unpacked archive: its top, or its one top-level folder.
fs::path package_root(const fs::path& unpacked, const fs::path& archive) {
  std::error_code ec;
  if (fs::is_directory(unpacked / "build", ec)) return unpacked;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(unpacked, ec), end; !ec && it != end; it.increment(ec)) {
    entries.push_back(it->path());
  }
  if (entries.size() == 1 && fs::is_directory(entries.front() / "build", ec)) {
    return entries.front();
  }
  throw InvalidArgument(archive.string() +
                        ": no build/ folder at the top of the archive or in its one top-level "
                        "folder; a kernel package holds build/<variant>/");
}

// A kernel-builder variant: its metadata parses, its digest covers exactly its files, and it
// names the kernel the others do. Returns the kernel's name.
std::string check_kernel_builder_variant(const fs::path& folder, const fs::path& shown) {
  KernelBuilderMetadata m;
  try {
    m = read_kernel_builder_metadata(folder);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(shown.string() + ": " + e.what());
  }
  try {
    verify_kernel_builder_variant(folder, m, folder);
  } catch (const IntegrityError& e) {
    throw InvalidArgument(std::string(e.what()) + " (" + shown.string() + ")");
  }
  return m.name;
}

// Checks every variant under `package`/build; returns the repo id they all name (`given` for a
// kernel-builder package, whose metadata does not name one).
RepoId check_package(const fs::path& package, const fs::path& shown_as,
                     const std::optional<RepoId>& given) {
  const fs::path build = package / "build";
  std::error_code ec;
  if (!fs::is_directory(build, ec)) {
    throw InvalidArgument(shown_as.string() + ": no build/ folder; a kernel package holds " +
                          "build/<variant>/ folders");
  }
  std::optional<RepoId> repo;
  std::string first_variant, kernel_name;
  size_t variants = 0;
  for (fs::directory_iterator it(build, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename();
    const fs::path shown = shown_as / "build" / name;
    if (it->is_symlink(ec) || !it->is_directory(ec)) {
      throw InvalidArgument(shown.string() + ": build/ holds only variant folders");
    }
    const BuildVariant variant = [&] {
      try {
        return BuildVariant::parse(name);
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(shown.string() + ": " + e.what());
      }
    }();
    detail::package_files(it->path());  // only regular files and folders
    if (is_kernel_builder_variant(it->path())) {
      const std::string kernel = check_kernel_builder_variant(it->path(), shown);
      if (!given) {
        throw InvalidArgument(shown.string() + ": a kernel-builder build names its kernel (" +
                              kernel +
                              "), not its repository; give the repository to install it as "
                              "(InstallOptions::repo, kernel-hub install --repo org/name)");
      }
      if (!kernel_name.empty() && kernel != kernel_name) {
        throw InvalidArgument((shown / "metadata.json").string() + ": name: " + kernel +
                              ", but build/" + first_variant + "/metadata.json says " +
                              kernel_name + "; one package is one kernel");
      }
      if (kernel_name.empty()) first_variant = name;
      kernel_name = kernel;
      repo = *given;
      ++variants;
      continue;
    }
    const PackageMetadata metadata =
        parse_metadata(internal::read_bounded_file(it->path() / "metadata.json", 1 << 20,
                                                   (it->path() / "metadata.json").string()),
                       shown / "metadata.json");
    check_metadata_fits(metadata, variant, shown / "metadata.json");
    if (!fs::is_regular_file(it->path() / metadata.library, ec)) {
      throw InvalidArgument((shown / "metadata.json").string() + ": library: " + metadata.library +
                            " is not in " + shown.string());
    }
    const RepoId id = RepoId::parse(metadata.repo_id, (shown / "metadata.json").string());
    if (given && *given != id) {
      throw InvalidArgument((shown / "metadata.json").string() + ": repo_id: " + id.str() +
                            ", but it is being installed as " + given->str());
    }
    if (repo && *repo != id) {
      throw InvalidArgument((shown / "metadata.json").string() + ": repo_id: " + id.str() +
                            ", but build/" + first_variant + "/metadata.json says " + repo->str() +
                            "; one package is one repo");
    }
    if (!repo) first_variant = name;
    repo = id;
    ++variants;
  }
  if (ec) throw InvalidArgument(build.string() + ": " + ec.message());
  if (variants == 0) throw InvalidArgument(shown_as.string() + ": build/ has no variant folders");
  return *repo;
}

}  // namespace

InstalledPackage Store::install(const fs::path& source, const InstallOptions& options) const {
  const std::string revision = options.revision.value_or(kDefaultRevision);
  check_revision(revision, "--revision");
  detail::check_store_root(root_);
  std::error_code ec;
  const bool is_folder = fs::is_directory(source, ec);
  if (!is_folder && !is_archive(source)) {
    throw InvalidArgument(source.string() + ": " +
                          (fs::exists(source, ec) ? "neither a folder nor an archive libarchive "
                                                    "reads (tar, tar.gz, zip, ...)"
                                                  : "no such file or folder"));
  }

  // Everything happens in a staging folder on the store's file system; only the final rename
  // makes the package visible, and the staging folder goes whatever happens.
  detail::sweep_stale_staging(root_ / ".staging");  // leftovers of installs that died
  const detail::StagingFolder staging_folder(root_ / ".staging", "install-");
  const fs::path& staging = staging_folder.path();
  const fs::path package = staging / "package";
  fs::create_directory(package);
  if (is_folder) {
    check_package(source, source, options.repo);  // clear errors before copying anything large
    fs::create_directory(package / "build");
    detail::copy_package_tree(source / "build", package / "build");
  } else {
    const fs::path unpacked = staging / "unpacked";
    fs::create_directory(unpacked);
    extract_archive(source, unpacked);
    fs::rename(package_root(unpacked, source) / "build", package / "build");
  }
  // What is checked is what will be installed, and it is on disk before it is renamed into
  // place: after a power loss the package is there whole or not at all.
  const RepoId repo = check_package(package, source, options.repo);
  detail::sync_tree(package);

  const fs::path target = folder(repo, revision);
  const detail::StoreLock store_lock(root_, detail::StoreLock::Mode::kExclusive);
  fs::create_directories(target.parent_path(), ec);
  if (ec) throw Error("cannot create " + target.parent_path().string() + ": " + ec.message());
  if (fs::exists(target, ec)) {
    if (!options.replace) {
      throw PackageError(repo.str() + "@" + revision + " is already installed at " +
                         target.string() + "; remove it first or replace it (--replace)");
    }
    // Swap in one step (renameat2 RENAME_EXCHANGE): readers see the old or the new package.
    if (::renameat2(AT_FDCWD, package.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
      throw Error("cannot replace " + target.string() + ": " +
                  std::error_code(errno, std::generic_category()).message());
    }
  } else if (::rename(package.c_str(), target.c_str()) != 0) {
    const int error = errno;
    if (error == EEXIST || error == ENOTEMPTY) {
      throw PackageError(repo.str() + "@" + revision + " was installed meanwhile at " +
                         target.string());
    }
    throw Error("cannot install into " + target.string() + ": " +
                std::error_code(error, std::generic_category()).message());
  }
  detail::sync_folder(target.parent_path());
  return InstalledPackage{repo, revision, target, detail::subfolders(target / "build"), false};
}

}  // namespace backplane::hub
