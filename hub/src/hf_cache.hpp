// Kernel packages in a Hugging Face cache, read-only (the `kernels` library's download layout,
// huggingface_hub's cache):
//   <cache>/kernels--<org>--<name>/   (older caches: models--<org>--<name>/)
//     refs/<ref>                       the commit a branch or tag points at ("main", "v1")
//     snapshots/<commit>/build/<variant>/...   links into ../../blobs/
//     blobs/<hash>
// Internal to libbackplane-hub; Store lists and loads them as InstalledPackage (origin
// "hf-cache").
#pragma once

#include <backplane/hub/repo_id.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace backplane::hub::detail {

struct HfCachedRevision {
  std::string revision;               // the ref naming it ("main", "v2"), else the commit itself
  std::string commit;                 // the snapshot's folder name
  std::filesystem::path snapshot;     // .../snapshots/<commit>
  std::filesystem::path repo_folder;  // .../kernels--org--name: where its links may lead
};

// The repositories a cache holds (either prefix), sorted; folders whose name is not a valid
// repo id are skipped.
std::vector<RepoId> hf_cache_repos(const std::filesystem::path& cache);

// Every ref of `repo` (one entry each, sorted by name), then every snapshot no ref names (by
// commit). A ref whose snapshot is missing is skipped. Both prefixes are read; a repo in both
// lists the kernels-- folder's first.
std::vector<HfCachedRevision> hf_cache_revisions(const std::filesystem::path& cache,
                                                 const RepoId& repo);

}  // namespace backplane::hub::detail
