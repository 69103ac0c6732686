#include "hub_testing.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace backplane::hub::testing {

std::string host_cpu_variant() {
  const SystemFacts host = SystemFacts::host();
  return host.cxx_abi + "-cpu-" + host.cpu + "-" + host.os;
}

nlohmann::json test_metadata(const std::string& repo, const std::string& library) {
  return {
      {"format", 1},
      {"abi_version",
       std::to_string(BP_ABI_VERSION_MAJOR) + "." + std::to_string(BP_ABI_VERSION_MINOR)},
      {"repo_id", repo},
      {"version", "1.0.0"},
      {"license", "Apache-2.0"},
      {"backend", {{"name", "cpu"}}},
      {"archs", {SystemFacts::host().cpu}},
      {"library", library},
      {"functions",
       {{{"name", "scale_f32"}, {"op", "scale"}, {"device_type", "cpu"}, {"dtypes", {"float32"}}}}},
      {"layers", {{{"name", "Scale"}, {"function", "scale_f32"}}}}};
}

std::filesystem::path write_variant(const std::filesystem::path& package,
                                    const std::string& variant,
                                    const std::filesystem::path& library,
                                    const nlohmann::json& metadata) {
  const std::filesystem::path folder = package / "build" / variant;
  std::filesystem::create_directories(folder);
  std::filesystem::copy_file(library, folder / metadata["library"].get<std::string>(),
                             std::filesystem::copy_options::overwrite_existing);
  write_file(folder / "metadata.json", metadata.dump(2));
  return folder;
}

void write_file(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_archive(const std::filesystem::path& file, Format format,
                   const std::vector<Entry>& entries) {
  struct archive* a = archive_write_new();
  if (format == Format::kZip) {
    archive_write_set_format_zip(a);
  } else {
    archive_write_set_format_pax_restricted(a);
    if (format == Format::kTarGz) archive_write_add_filter_gzip(a);
  }
  if (archive_write_open_filename(a, file.c_str()) != ARCHIVE_OK) {
    throw std::runtime_error("cannot write " + file.string());
  }
  for (const Entry& e : entries) {
    struct archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.name.c_str());
    archive_entry_set_perm(entry, static_cast<mode_t>(e.mode));
    switch (e.type) {
      case Entry::kFile:
        archive_entry_set_filetype(entry, AE_IFREG);
        archive_entry_set_size(entry, static_cast<la_int64_t>(e.content.size()));
        break;
      case Entry::kFolder:
        archive_entry_set_filetype(entry, AE_IFDIR);
        break;
      case Entry::kSymlink:
        archive_entry_set_filetype(entry, AE_IFLNK);
        archive_entry_set_symlink(entry, e.content.c_str());
        break;
      case Entry::kHardlink:
        archive_entry_set_filetype(entry, AE_IFREG);
        archive_entry_set_hardlink(entry, e.content.c_str());
        break;
      case Entry::kCharDevice:
        archive_entry_set_filetype(entry, AE_IFCHR);
        archive_entry_set_rdevmajor(entry, 1);
        archive_entry_set_rdevminor(entry, 3);
        break;
      case Entry::kFifo:
        archive_entry_set_filetype(entry, AE_IFIFO);
        break;
    }
    if (archive_write_header(a, entry) != ARCHIVE_OK) {
      throw std::runtime_error(std::string("archive entry ") + e.name + ": " +
                               archive_error_string(a));
    }
    if (e.type == Entry::kFile && !e.content.empty()) {
      archive_write_data(a, e.content.data(), e.content.size());
    }
    archive_entry_free(entry);
  }
  archive_write_close(a);
  archive_write_free(a);
}

std::vector<std::string> tree(const std::filesystem::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    out.push_back(it->path().lexically_relative(root).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace backplane::hub::testing
