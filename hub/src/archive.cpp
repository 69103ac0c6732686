#include <backplane/error.hpp>
#include <backplane/hub/archive.hpp>

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

namespace backplane::hub {
namespace {
namespace fs = std::filesystem;

struct ArchiveDeleter {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<struct archive, ArchiveDeleter>;

ArchivePtr open_archive(const fs::path& file) {
  ArchivePtr a(archive_read_new());
  if (!a) throw Error("libarchive: out of memory");
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  archive_read_support_format_zip(a.get());
  if (archive_read_open_filename(a.get(), file.c_str(), 1 << 16) != ARCHIVE_OK) {
    throw InvalidArgument(file.string() + ": not a readable archive (tar, tar.gz, zip, ...): " +
                          archive_error_string(a.get()));
  }
  return a;
}

// The entry's path as folder parts, refusing anything that could leave the target.
std::vector<std::string> safe_parts(const std::string& name, std::string& why) {
  std::vector<std::string> parts;
  if (name.empty()) {
    why = "has an empty path";
    return parts;
  }
  if (name.front() == '/') {
    why = "has an absolute path";
    return parts;
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    const std::string part = name.substr(start, end - start);
    if (part == "..") {
      why = "has a '..' part, which would leave the target folder";
      return {};
    }
    if (part.find('\\') != std::string::npos || part.find('\0') != std::string::npos) {
      why = "has a '\\' in its path";
      return {};
    }
    if (!part.empty() && part != ".") parts.push_back(part);
    start = end + 1;
  }
  return parts;
}

std::string errno_text() {
  return std::error_code(errno, std::generic_category()).message();
}

// Writes the entry's data into a new file `out`. `declared_size`, when the archive gives one
// (else -1), is the file's size: a sparse entry's holes read as nothing from libarchive (all of an
// all-hole file), so a shorter file is extended to it, sparsely, as tar -x does.
void write_entry_data(struct archive* a, const fs::path& archive_path, const std::string& name,
                      const fs::path& out, mode_t mode, int64_t declared_size, uint64_t& total,
                      uint64_t& holes, const ArchiveLimits& limits) {
  // O_EXCL and O_NOFOLLOW: never write through something already there.
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    throw InvalidArgument(archive_path.string() + ": entry '" + name + "': cannot create " +
                          out.string() + ": " + errno_text() +
                          (errno == EEXIST ? " (the archive names it twice)" : ""));
  }
  uint64_t written = 0;
  std::vector<char> buffer(1 << 16);
  while (true) {
    const la_ssize_t n = archive_read_data(a, buffer.data(), buffer.size());
    if (n < 0) {
      ::close(fd);
      throw InvalidArgument(archive_path.string() + ": entry '" + name +
                            "': " + archive_error_string(a));
    }
    if (n == 0) break;
    written += static_cast<uint64_t>(n);
    total += static_cast<uint64_t>(n);
    if (written > limits.max_entry_bytes || total + holes > limits.max_total_bytes) {
      ::close(fd);
      throw InvalidArgument(archive_path.string() + ": entry '" + name + "' is over the limit (" +
                            std::to_string(limits.max_entry_bytes) + " bytes a file, " +
                            std::to_string(limits.max_total_bytes) + " in all)");
    }
    // A zip bomb declares small sizes (or none) and inflates past them: bound the expansion
    // over the compressed bytes read so far, once past a floor that honest text reaches.
    const auto compressed =
        static_cast<uint64_t>(std::max<la_int64_t>(archive_filter_bytes(a, -1), 1));
    if (total > limits.ratio_floor_bytes && total / compressed >= limits.max_expansion_ratio) {
      ::close(fd);
      throw InvalidArgument(archive_path.string() + ": entry '" + name + "' expands to " +
                            std::to_string(total) + " bytes from " + std::to_string(compressed) +
                            " compressed, more than " + std::to_string(limits.max_expansion_ratio) +
                            " times; refused as a decompression bomb");
    }
    size_t done = 0;
    while (done < static_cast<size_t>(n)) {
      const ssize_t w = ::write(fd, buffer.data() + done, static_cast<size_t>(n) - done);
      if (w <= 0) {
        const std::string reason = errno_text();
        ::close(fd);
        throw Error("cannot write " + out.string() + ": " + reason);
      }
      done += static_cast<size_t>(w);
    }
  }
  if (declared_size >= 0 && written < static_cast<uint64_t>(declared_size)) {
    // Holes take no disk and inflate nothing: counted against the size limit, not the ratio.
    holes += static_cast<uint64_t>(declared_size) - written;
    if (total + holes > limits.max_total_bytes) {
      ::close(fd);
      throw InvalidArgument(archive_path.string() + ": entry '" + name + "' is over the limit (" +
                            std::to_string(limits.max_total_bytes) + " bytes in all)");
    }
    if (::ftruncate(fd, static_cast<off_t>(declared_size)) != 0) {
      const std::string reason = errno_text();
      ::close(fd);
      throw Error("cannot write " + out.string() + ": " + reason);
    }
  }
  if (::close(fd) != 0) throw Error("cannot write " + out.string() + ": " + errno_text());
}

}  // namespace

bool is_archive(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return false;
  try {
    ArchivePtr a = open_archive(file);
    struct archive_entry* entry = nullptr;
    return archive_read_next_header(a.get(), &entry) == ARCHIVE_OK;
  } catch (const Error&) {
    return false;
  }
}

void extract_archive(const fs::path& archive_path, const fs::path& target,
                     const ArchiveLimits& limits) {
  ArchivePtr a = open_archive(archive_path);
  uint64_t total = 0;  // data written
  uint64_t holes = 0;  // sparse entries' holes, restored as holes
  size_t count = 0;
  struct archive_entry* entry = nullptr;
  while (true) {
    const int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      throw InvalidArgument(archive_path.string() + ": " + archive_error_string(a.get()));
    }
    const char* raw = archive_entry_pathname(entry);
    const std::string name = raw != nullptr ? raw : "";
    auto refuse = [&](const std::string& why) {
      throw InvalidArgument(archive_path.string() + ": entry '" + name + "' " + why);
    };
    if (++count > limits.max_entries) {
      refuse("is past the limit of " + std::to_string(limits.max_entries) + " entries");
    }
    if (archive_entry_hardlink(entry) != nullptr) refuse("is a hard link; links are refused");
    const mode_t type = archive_entry_filetype(entry);
    if (type == AE_IFLNK) refuse("is a symbolic link; links are refused");
    if (type != AE_IFREG && type != AE_IFDIR) {
      refuse("is a device, FIFO or socket; only files and folders are accepted");
    }
    std::string why;
    const std::vector<std::string> parts = safe_parts(name, why);
    if (!why.empty()) refuse(why);
    if (parts.empty()) {
      if (type == AE_IFDIR) continue;  // "./", as `tar -C folder -cf x.tar .` writes
      refuse("names the top folder itself");
    }
    if (archive_entry_size_is_set(entry) &&
        static_cast<uint64_t>(archive_entry_size(entry)) > limits.max_entry_bytes) {
      refuse("is " + std::to_string(archive_entry_size(entry)) + " bytes; the limit is " +
             std::to_string(limits.max_entry_bytes));
    }
    // Create each folder on the way, refusing to pass through anything that is not a plain
    // folder this extraction made (no entry can be a link, so none is).
    fs::path out = target;
    const size_t folders = type == AE_IFDIR ? parts.size() : parts.size() - 1;
    for (size_t i = 0; i < folders; ++i) {
      out /= parts[i];
      struct stat status {};
      if (::lstat(out.c_str(), &status) == 0) {
        if (!S_ISDIR(status.st_mode)) refuse("passes through a file, not a folder");
        continue;
      }
      if (::mkdir(out.c_str(), 0755) != 0) {
        throw Error("cannot create " + out.string() + ": " + errno_text());
      }
    }
    if (type == AE_IFDIR) continue;
    out /= parts.back();
    const mode_t mode = (archive_entry_perm(entry) & 0111) != 0 ? 0755 : 0644;
    const int64_t declared_size =
        archive_entry_size_is_set(entry) ? archive_entry_size(entry) : int64_t{-1};
    write_entry_data(a.get(), archive_path, name, out, mode, declared_size, total, holes, limits);
  }
}

}  // namespace backplane::hub
