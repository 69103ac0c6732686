// Reading files a user did not write, bounded, and writing files so that a reader never sees a
// part: shared by the core, the hub, the plugins and the tools. Internal: not installed, no
// compatibility promise.
#pragma once

#include <backplane/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

namespace backplane::internal {

// The whole of `path`, which must be a regular file of at most `max_bytes`; anything else
// throws InvalidArgument naming it by `what` ("config.json '/x/config.json'"):
//   "<what> does not exist" / "<what> is not a regular file" / "<what> cannot be read: <why>"
//   "<what> is N bytes; at most M are accepted" / "<what> could not be read completely"
// The size is checked before a byte is read, so a huge or sparse file costs nothing.
inline std::string read_bounded_file(const std::filesystem::path& path, uint64_t max_bytes,
                                     const std::string& what) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    if (ec && ec != std::errc::no_such_file_or_directory) {
      throw InvalidArgument(what + " cannot be read: " + ec.message());
    }
    throw InvalidArgument(what + " does not exist");
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw InvalidArgument(what + " is not a regular file");
  }
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw InvalidArgument(what + " cannot be read: " + ec.message());
  if (size > max_bytes) {
    throw InvalidArgument(what + " is " + std::to_string(size) + " bytes; at most " +
                          std::to_string(max_bytes) + " are accepted");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument(what + " cannot be read: it cannot be opened");
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (static_cast<uintmax_t>(in.gcount()) != size || in.peek() != std::char_traits<char>::eof()) {
    throw InvalidArgument(what + " could not be read completely (it changed while read)");
  }
  return text;
}

// Writes `text` to `file` through a temporary file in the same folder, synced, then renamed
// over it: a reader sees the old content or the new, never a part. Throws Error naming the
// file and the system's reason.
inline void write_file_atomically(const std::filesystem::path& file, std::string_view text) {
  const std::filesystem::path folder =
      file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  std::string temp = (folder / ("." + file.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) {
    throw Error("cannot write " + file.string() + ": " +
                std::error_code(errno, std::generic_category()).message());
  }
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const bool ok = written == text.size() && ::fchmod(fd, 0644) == 0 && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok || ::rename(temp.c_str(), file.c_str()) != 0) {
    const std::string reason =
        std::error_code(ok ? errno : (saved != 0 ? saved : EIO), std::generic_category()).message();
    ::unlink(temp.c_str());
    throw Error("cannot write " + file.string() + ": " + reason);
  }
}

}  // namespace backplane::internal
