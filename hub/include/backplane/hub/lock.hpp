// kernels.lock: the revision of each kernel repository a project uses and, per build variant,
// a SHA-256 over its files, so that loading a package can prove it is the one that was locked.
// The digest's canonical form and the file's format are in hub/README.md ("kernels.lock").
#pragma once

#include <backplane/export.hpp>
#include <backplane/hub/repo_id.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::hub {

inline constexpr int kLockFormat = 1;

struct FileDigest {
  std::string path;  // relative to the variant folder, '/' separators
  uint64_t size = 0;
  std::string sha256;  // "sha256:" + 64 lowercase hex digits, of the content
};

struct VariantDigest {
  std::string sha256;             // "sha256:<hex>" over the canonical form of all files
  std::vector<FileDigest> files;  // sorted by path
};

// Hashes every regular file under `variant_folder` (OpenSSL EVP SHA-256). A symbolic link or a
// special file throws InvalidArgument naming it; with `link_root` (a Hugging Face cache's
// repository folder, InstalledPackage::link_root), links to files inside it are hashed as those
// files.
BACKPLANE_API VariantDigest digest_variant(const std::filesystem::path& variant_folder,
                                           const std::filesystem::path& link_root = {});

struct LockedVariant {
  std::string sha256;                        // the variant digest
  std::map<std::string, std::string> files;  // path -> "sha256:<hex>"
};

struct LockedRepo {
  std::string revision;
  std::map<std::string, LockedVariant> variants;  // by variant name
  // From a lock in the `kernels` library's format: the locked commit (then `revision` is the
  // same and `variants` is empty: such a lock pins a commit, and a kernel-builder build's own
  // digest vouches for its files) and what was asked for ("v1" for version 1, or a revision).
  std::string commit = {};
  std::string requested = {};
};

// Two formats, read alike: this project's ({"format": 1, "kernels": {...}}, with every file's
// hash) and the `kernels` library 0.17's kernels.lock ([{"dependency": {"repo-id", "version" |
// "revision"}, "lock": {"commit"}}]).
struct BACKPLANE_API LockFile {
  enum class Format { kBackplane, kKernels };
  Format format = Format::kBackplane;
  std::map<std::string, LockedRepo> repos;  // by "org/repo"

  const LockedRepo* find(const RepoId& repo) const;
  // Either format. Throws InvalidArgument naming `source` (the file) and the field; a repo the
  // `kernels` format locks twice (two versions) is refused, since one process loads one.
  static LockFile parse(std::string_view text, const std::string& source);
  static LockFile read(const std::filesystem::path& file);
  std::string dump() const;  // this project's format: JSON, keys sorted, one field per line
  // The `kernels` library's format, as its KernelLocks.to_json writes it. Every repo needs a
  // commit (LockedRepo::commit); throws InvalidArgument naming the one without.
  std::string dump_kernels() const;
};

// The differences between a locked variant and the files there now, one line each, naming the
// file: "lib/libfoo.so: content differs (locked sha256:..., found sha256:...)", "x: not in the
// lock", "y: missing". Empty when they match.
BACKPLANE_API std::vector<std::string> lock_differences(const LockedVariant& locked,
                                                        const VariantDigest& found);

// The same for a set of expected file hashes alone (path -> "sha256:<hex>"): every file there
// and no other. Equal files make an equal variant digest, so this proves as much. The lines
// say "(<expected_as> sha256:..., found ...)" and "not in <list>".
BACKPLANE_API std::vector<std::string> file_differences(
    const std::map<std::string, std::string>& expected, const VariantDigest& found,
    std::string_view expected_as = "locked", std::string_view list = "the lock");

// A LockedVariant from a digest.
BACKPLANE_API LockedVariant to_locked(const VariantDigest& digest);

}  // namespace backplane::hub
