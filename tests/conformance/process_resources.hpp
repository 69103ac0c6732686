// What a process holds, read from /proc/self: for the suite's check that opening and closing a
// plugin many times leaks nothing.
#pragma once

#include <cstddef>
#include <filesystem>

namespace backplane::conformance {

struct ProcessResources {
  size_t open_files = 0;        // entries of /proc/self/fd
  size_t library_mappings = 0;  // lines of /proc/self/maps that map one file
};

ProcessResources process_resources(const std::filesystem::path& library);

}  // namespace backplane::conformance
