// Helpers for the hub tests: package folders built around the test package library.
#pragma once

#include <backplane/hub.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "loader/temp_folder.hpp"

namespace backplane::hub::testing {

using backplane::testing::TempFolder;

// The cpu variant of this machine: cxx11-cpu-x86_64-linux on x86-64 Linux.
std::string host_cpu_variant();

// metadata.json for the test package (one function scale_f32, layer Scale) as a JSON object a
// test may change before writing.
nlohmann::json test_metadata(const std::string& repo = "backplane/scale",
                             const std::string& library = "libscale.so");

// Writes <package>/build/<variant>/ with a copy of `library` named as the metadata says and
// the metadata. Returns the variant folder.
std::filesystem::path write_variant(const std::filesystem::path& package,
                                    const std::string& variant,
                                    const std::filesystem::path& library,
                                    const nlohmann::json& metadata);

void write_file(const std::filesystem::path& file, const std::string& text);
std::string read_file(const std::filesystem::path& file);

// One entry of an archive a test writes (write_archive).
struct Entry {
  enum Type { kFile, kFolder, kSymlink, kHardlink, kCharDevice, kFifo };
  std::string name;
  Type type = kFile;
  std::string content;  // a file's content, or a link's target
  int mode = 0644;
};

enum class Format { kTarGz, kZip, kTar };

// Writes the entries as given (libarchive), with no check: tests make bad archives with it.
void write_archive(const std::filesystem::path& file, Format format,
                   const std::vector<Entry>& entries);

// Every file and folder under `root`, as sorted relative paths.
std::vector<std::string> tree(const std::filesystem::path& root);

}  // namespace backplane::hub::testing
