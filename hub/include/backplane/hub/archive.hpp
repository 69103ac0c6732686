// Unpacking a kernel package archive (tar, tar.gz, tar.xz, tar.bz2, tar.zst, zip; libarchive).
// Only regular files and folders are written, and only inside the target folder: an entry
// with an absolute path or a ".." part, a link of any kind (symbolic or hard), a device, FIFO
// or socket, or one past the limits is refused, and the error names it. Links are refused
// outright rather than checked, because a package never needs one.
#pragma once

#include <backplane/export.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace backplane::hub {

struct ArchiveLimits {
  uint64_t max_entry_bytes = uint64_t{8} << 30;   // one file
  uint64_t max_total_bytes = uint64_t{32} << 30;  // all files
  size_t max_entries = 100000;
};

// Whether libarchive recognizes `file` as an archive of a format above.
BACKPLANE_API bool is_archive(const std::filesystem::path& file);

// Unpacks `archive` into `target`, an existing empty folder. Throws InvalidArgument naming the
// archive and the entry for anything refused; what was written before stays in `target` for
// the caller to remove (the store unpacks into a staging folder it removes on failure).
BACKPLANE_API void extract_archive(const std::filesystem::path& archive,
                                   const std::filesystem::path& target,
                                   const ArchiveLimits& limits = {});

}  // namespace backplane::hub
