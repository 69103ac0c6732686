// kernel-builder packages: metadata.json, the digest of a variant folder, and the checks before
// an extension library is opened.
#include <backplane/error.hpp>
#include <backplane/hub/errors.hpp>
#include <backplane/hub/kernel_builder.hpp>
#include <backplane/internal/checked_json.hpp>
#include <backplane/internal/files.hpp>

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "hashing.hpp"
#include "json_fields.hpp"

namespace backplane::hub {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMetadataLimit = 1 << 20;
constexpr int kMaxDepth = 32;  // folders inside a variant, links followed

bool is_kernel_name(const std::string& s) {  // the `kernels` library's KernelName
  if (s.size() < 2 || !(s.front() >= 'a' && s.front() <= 'z')) return false;
  if (!((s.back() >= 'a' && s.back() <= 'z') || (s.back() >= '0' && s.back() <= '9'))) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// TORCH_LIBRARY's namespace: a C identifier.
bool is_namespace(const std::string& s) {
  return !s.empty() && s.size() <= 128 && !std::isdigit(static_cast<unsigned char>(s[0])) &&
         std::all_of(s.begin(), s.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
         });
}

constexpr const char* kBackends[] = {"cann",   "cpu",  "cuda", "metal",
                                     "neuron", "rocm", "tpu",  "xpu"};

std::string hash_file(const fs::path& file, std::string_view algorithm) {
  detail::Digester digester(algorithm);
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw InvalidArgument(file.string() + ": " +
                          std::error_code(errno, std::generic_category()).message());
  }
  try {
    detail::stream_file(fd, file.string(),
                        [&](const char* data, size_t size) { digester.update(data, size); });
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return detail::base64(digester.finish());
}

bool inside(const fs::path& path, const fs::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

class VariantHasher {
 public:
  VariantHasher(const fs::path& variant, std::string_view algorithm, const fs::path& link_root)
      : variant_(variant), algorithm_(algorithm) {
    std::error_code ec;
    link_root_ = fs::canonical(link_root, ec);
    if (ec) throw InvalidArgument(link_root.string() + ": " + ec.message());
  }

  void walk(const fs::path& folder, const std::string& prefix, int depth,
            std::map<std::string, std::string>& files) const {
    if (depth > kMaxDepth) {
      throw InvalidArgument(folder.string() + ": folders nest deeper than " +
                            std::to_string(kMaxDepth) + " levels (a link loop?)");
    }
    std::vector<fs::path> entries;
    std::error_code ec;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
      entries.push_back(it->path());
    }
    if (ec) throw InvalidArgument(folder.string() + ": " + ec.message());
    std::sort(entries.begin(), entries.end());
    for (const fs::path& entry : entries) {
      const std::string name = entry.filename().string();
      const std::string relative = prefix + name;
      const fs::file_status link = fs::symlink_status(entry, ec);
      if (fs::is_symlink(link)) {
        const fs::path target = fs::canonical(entry, ec);
        if (ec) {
          throw InvalidArgument((variant_ / relative).string() + ": a link to nothing (" +
                                ec.message() + ")");
        }
        if (!inside(target, link_root_)) {
          throw InvalidArgument((variant_ / relative).string() + ": a link out of " +
                                link_root_.string() + " (to " + target.string() +
                                "); a variant's files stay inside its package");
        }
      }
      // Not hashed, but read: a link there stays inside too.
      if (depth == 0 && (name == "metadata.json" || name == "metadata.json.sigstore")) continue;
      const fs::file_status status = fs::status(entry, ec);
      if (fs::is_directory(status)) {
        // The `kernels` library follows links to files but not to folders.
        if (name == "__pycache__" || fs::is_symlink(link)) continue;
        walk(entry, relative + "/", depth + 1, files);
      } else if (fs::is_regular_file(status)) {
        files[relative] = hash_file(entry, algorithm_);
      }
      // Fifos, sockets and devices are not files of a package; the `kernels` library skips
      // them too.
    }
  }

 private:
  fs::path variant_;
  std::string algorithm_;
  fs::path link_root_;
};

}  // namespace

bool is_kernel_builder_metadata(std::string_view text) {
  const json root = parse_checked_json(text, "metadata.json");
  return root.is_object() && !root.contains("format");
}

bool is_kernel_builder_variant(const fs::path& variant_folder) {
  const fs::path file = variant_folder / "metadata.json";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return false;
  try {
    return is_kernel_builder_metadata(
        internal::read_bounded_file(file, kMetadataLimit, file.string()));
  } catch (const InvalidArgument&) {
    return false;  // neither format; the reader of the project's format says why
  }
}

KernelBuilderMetadata parse_kernel_builder_metadata(std::string_view text, const fs::path& file) {
  const json root = parse_checked_json(text, file.string());
  detail::Fields f(root, "", file);
  KernelBuilderMetadata m;
  if (f.find("name") == nullptr) {
    f.fail("name",
           "is missing: this metadata.json was written by a kernel-builder from before "
           "2026, which the `kernels` library 0.17 no longer reads either; rebuild the "
           "kernel with a current kernel-builder");
  }
  m.name = f.string("name");
  if (!is_kernel_name(m.name)) {
    f.fail("name", "'" + m.name +
                       "' is not a kernel name (a-z first, then a-z 0-9 -, a letter or digit "
                       "last, at least 2 characters)");
  }
  m.id = f.string("id");
  if (!is_namespace(m.id)) {
    f.fail("id", "'" + m.id + "' is not an op namespace (a C identifier: A-Z a-z 0-9 _)");
  }
  const json& version = f.required("version");
  if (!version.is_number_unsigned()) f.fail("version", "must be a non-negative integer");
  m.version = version.get<int64_t>();
  m.license = f.string("license");
  {
    detail::Fields backend(f.required("backend"), "backend", file);
    m.backend = backend.string("type");
    if (std::find(std::begin(kBackends), std::end(kBackends), m.backend) == std::end(kBackends)) {
      backend.fail("backend.type", "'" + m.backend +
                                       "' is not one of cann, cpu, cuda, metal, neuron, rocm, "
                                       "tpu, xpu");
    }
    m.archs = backend.strings("archs", false);
  }
  m.python_depends = f.strings("python-depends", true);
  for (size_t i = 0; i < f.array("kernel-depends", false).size(); ++i) {
    const std::string path = "kernel-depends[" + std::to_string(i) + "]";
    detail::Fields dep(f.array("kernel-depends", false)[i], path, file);
    KernelBuilderDependency d;
    d.repo_id = dep.string("repo-id");
    if (const json* v = dep.find("version")) {
      if (!v->is_number_unsigned()) dep.fail(dep.field("version"), "must be an integer");
      d.version = std::to_string(v->get<uint64_t>());
    } else {
      d.version = dep.string("revision");
    }
    m.kernel_depends.push_back(std::move(d));
  }
  if (const std::string minver = f.string("kernels-minver", false); !minver.empty()) {
    m.kernels_minver = minver;
  }
  if (const std::string upstream = f.string("upstream", false); !upstream.empty()) {
    m.upstream = upstream;
  }
  if (const std::string source = f.string("source", false); !source.empty()) m.source = source;
  m.has_provenance = f.find("provenance") != nullptr;
  if (const json* digest = f.find("digest")) {
    detail::Fields d(*digest, "digest", file);
    KernelBuilderDigest out;
    out.algorithm = d.string("algorithm");
    if (out.algorithm != "sha256" && out.algorithm != "sha512") {
      d.fail("digest.algorithm", "'" + out.algorithm + "' is not sha256 or sha512");
    }
    const json& files = d.required("files");
    if (!files.is_object()) d.fail("digest.files", "must be an object of path: base64 hash");
    for (const auto& [path, hash] : files.items()) {
      if (!hash.is_string()) d.fail("digest.files." + path, "must be a base64 string");
      out.files[path] = hash.get<std::string>();
    }
    m.digest = std::move(out);
  }
  return m;
}

KernelBuilderMetadata read_kernel_builder_metadata(const fs::path& variant_folder) {
  const fs::path file = variant_folder / "metadata.json";
  return parse_kernel_builder_metadata(
      internal::read_bounded_file(file, kMetadataLimit, file.string()), file);
}

KernelBuilderDigest hash_kernel_builder_variant(const fs::path& variant_folder,
                                                std::string_view algorithm,
                                                const fs::path& link_root) {
  KernelBuilderDigest out;
  out.algorithm = std::string(algorithm);
  detail::Digester check(algorithm);  // refuses an unknown algorithm before any reading
  VariantHasher(variant_folder, algorithm, link_root).walk(variant_folder, "", 0, out.files);
  return out;
}

std::vector<std::string> digest_violations(const KernelBuilderDigest& expected,
                                           const KernelBuilderDigest& actual) {
  if (expected.algorithm != actual.algorithm) {
    return {"algorithm " + actual.algorithm + " cannot be checked against " + expected.algorithm};
  }
  std::vector<std::string> out;
  for (const auto& [path, hash] : expected.files) {
    auto it = actual.files.find(path);
    if (it == actual.files.end()) {
      out.push_back("missing file " + path);
    } else if (it->second != hash) {
      out.push_back("hash mismatch " + path);
    }
  }
  for (const auto& [path, hash] : actual.files) {
    if (expected.files.count(path) == 0) out.push_back("unknown file " + path);
  }
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return a.substr(a.rfind(' ') + 1) < b.substr(b.rfind(' ') + 1);
  });
  return out;
}

std::vector<std::string> kernel_builder_digest_problems(const fs::path& variant_folder,
                                                        const KernelBuilderDigest& digest,
                                                        const fs::path& link_root) {
  try {
    return digest_violations(
        digest, hash_kernel_builder_variant(variant_folder, digest.algorithm, link_root));
  } catch (const Error& e) {
    return {e.what()};
  }
}

void verify_kernel_builder_variant(const fs::path& variant_folder,
                                   const KernelBuilderMetadata& metadata,
                                   const fs::path& link_root) {
  if (!metadata.digest) {
    throw IntegrityError(variant_folder.string() +
                         ": metadata.json has no digest, so its files cannot be checked; a "
                         "kernel-builder build carries one (digest.algorithm, digest.files)");
  }
  const KernelBuilderDigest actual =
      hash_kernel_builder_variant(variant_folder, metadata.digest->algorithm, link_root);
  const std::vector<std::string> violations = digest_violations(*metadata.digest, actual);
  if (violations.empty()) return;
  std::string message = variant_folder.string() + ": the files do not match metadata.json's " +
                        metadata.digest->algorithm + " digest:";
  for (const std::string& v : violations) message += "\n  - " + v;
  throw IntegrityError(message);
}

fs::path kernel_builder_extension(const fs::path& variant_folder) {
  std::vector<fs::path> libraries;
  std::error_code ec;
  for (fs::directory_iterator it(variant_folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".so" && it->is_regular_file(ec)) {
      libraries.push_back(it->path());
    }
  }
  if (ec) throw PackageError(variant_folder.string() + ": " + ec.message());
  std::sort(libraries.begin(), libraries.end());
  if (libraries.empty()) {
    throw PackageError(variant_folder.string() +
                       ": no extension library (*.so): a Python-only build, which only a Python "
                       "process can use; a C++ host needs a Torch build (torchXY-...)");
  }
  if (libraries.size() > 1) {
    std::string names;
    for (const fs::path& l : libraries) names += " " + l.filename().string();
    throw PackageError(variant_folder.string() + ": several extension libraries (" +
                       names.substr(1) + "); a kernel-builder build has one");
  }
  return libraries.front();
}

void check_loadable_elf(const fs::path& library) {
  auto fail = [&](const std::string& why) { throw PackageError(library.string() + ": " + why); };
  std::error_code ec;
  const uintmax_t size = fs::file_size(library, ec);
  if (ec) fail(ec.message());
  std::string head;
  {
    const int fd = ::open(library.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(std::error_code(errno, std::generic_category()).message());
    head.resize(sizeof(Elf64_Ehdr));
    const ssize_t n = ::pread(fd, head.data(), head.size(), 0);
    ::close(fd);
    if (n < 0) fail("cannot be read");
    head.resize(static_cast<size_t>(n));
  }
  if (head.size() < EI_NIDENT || std::memcmp(head.data(), ELFMAG, SELFMAG) != 0) {
    fail("not an ELF file, so not a shared library this system can load");
  }
  const auto* ident = reinterpret_cast<const unsigned char*>(head.data());
  if (ident[EI_CLASS] != (sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32)) {
    fail(std::string("an ELF file of another word size (") +
         (ident[EI_CLASS] == ELFCLASS32 ? "32" : "64") + "-bit) than this process's");
  }
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  constexpr unsigned char kData = ELFDATA2LSB;
#else
  constexpr unsigned char kData = ELFDATA2MSB;
#endif
  if (ident[EI_DATA] != kData) fail("an ELF file of the other byte order");
  if (head.size() < sizeof(Elf64_Ehdr)) fail("truncated: shorter than an ELF header");
  Elf64_Ehdr header;
  std::memcpy(&header, head.data(), sizeof header);
#if defined(__x86_64__)
  constexpr uint16_t kMachine = EM_X86_64;
  const char* machine_name = "x86_64";
#elif defined(__aarch64__)
  constexpr uint16_t kMachine = EM_AARCH64;
  const char* machine_name = "aarch64";
#else
  const uint16_t kMachine = header.e_machine;
  const char* machine_name = "this machine";
#endif
  if (header.e_machine != kMachine) {
    fail("an ELF file for another machine (e_machine " + std::to_string(header.e_machine) +
         ") than " + machine_name);
  }
  if (header.e_type != ET_DYN) fail("an ELF file that is not a shared library (e_type != ET_DYN)");
  const auto end_of = [](uint64_t offset, uint64_t count, uint64_t entry) {
    return count == 0 ? 0 : offset + count * entry;
  };
  const uint64_t programs = end_of(header.e_phoff, header.e_phnum, header.e_phentsize);
  const uint64_t sections = end_of(header.e_shoff, header.e_shnum, header.e_shentsize);
  if (header.e_phnum == 0) fail("an ELF file without program headers cannot be loaded");
  if (programs > size || sections > size) {
    fail("truncated: its headers reach byte " + std::to_string(std::max(programs, sections)) +
         ", but the file has " + std::to_string(size));
  }
}

}  // namespace backplane::hub
