// What the process holds, read from /proc/self: open file descriptors and memory mappings.
#pragma once

#include <dirent.h>

#include <fstream>
#include <string>

namespace backplane::testing {

inline int open_descriptor_count() {
  int count = 0;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (const dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] != '.') ++count;
    }
    ::closedir(dir);
    --count;  // the one opendir holds
  }
  return count;
}

// Lines of /proc/self/maps, all of them or those that contain `text`.
inline int mapping_count(const std::string& text = "") {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find(text) != std::string::npos) ++count;
  }
  return count;
}

}  // namespace backplane::testing
