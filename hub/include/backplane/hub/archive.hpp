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
  // Decompression bombs: unpacked bytes over compressed bytes read, checked once more than
  // ratio_floor_bytes are unpacked (gzip reaches about 1000 on zeros; packages stay far below).
  uint64_t max_expansion_ratio = 200;
  uint64_t ratio_floor_bytes = uint64_t{64} << 20;
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
