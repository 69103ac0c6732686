// Packages in the Hugging Face kernel-builder format (the Kernel Hub's own): what a
// `build/<variant>/` folder of such a package holds, its metadata.json, the digest that covers
// its files, and the checks made before its extension library may be opened. hub/README.md,
// "kernel-builder packages", has the layout and every rule; the `kernels` library 0.17 is the
// reference (its Rust Metadata and Digest, checked by tests/python/kernel_builder_check.py).
//
//   build/torch215-cxx11-cpu-x86_64-linux/
//     __init__.py  _ops.py  layers.py | layers/  metadata.json  [metadata.json.sigstore]
//     _rmsnorm_cpu_0a1b2c3.abi3.so      the TORCH_LIBRARY extension (Torch builds only)
#pragma once

#include <backplane/export.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::hub {

struct KernelBuilderDigest {
  std::string algorithm;                     // "sha256" or "sha512"
  std::map<std::string, std::string> files;  // '/'-separated relative path -> base64 digest
};

struct KernelBuilderDependency {
  std::string repo_id;
  std::string version;  // as written: a number or a revision
};

struct KernelBuilderMetadata {
  std::string name;     // the kernel's name, ^[a-z][-a-z0-9]*[a-z0-9]$
  std::string id;       // the op namespace its extension registers (TORCH_LIBRARY(id, ...))
  int64_t version = 0;  // the kernel's major version (branch v<N>)
  std::string license;
  std::string backend;             // "cpu", "cuda", "rocm", "xpu", "metal", "cann", "neuron", "tpu"
  std::vector<std::string> archs;  // backend.archs: CUDA capabilities ("8.0"), ROCm gfx...
  std::optional<KernelBuilderDigest> digest;
  std::vector<std::string> python_depends;
  std::vector<KernelBuilderDependency> kernel_depends;
  std::optional<std::string> kernels_minver;  // "0.17.0"
  std::optional<std::string> upstream, source;
  bool has_provenance = false;
};

// Whether a metadata.json text is kernel-builder's (no "format" field, which this project's
// packages always carry). Does not validate; the text must be a JSON object.
BACKPLANE_API bool is_kernel_builder_metadata(std::string_view text);
// Whether `variant_folder` holds a kernel-builder build (its metadata.json is one).
BACKPLANE_API bool is_kernel_builder_variant(const std::filesystem::path& variant_folder);

// Parses kernel-builder's metadata.json as the `kernels` library 0.17 reads it. Errors are
// InvalidArgument naming `file` and the field; a file without `name` is one a kernel-builder
// before 2026 wrote, which the library no longer reads, and the message says so.
BACKPLANE_API KernelBuilderMetadata
parse_kernel_builder_metadata(std::string_view text, const std::filesystem::path& file);
BACKPLANE_API KernelBuilderMetadata
read_kernel_builder_metadata(const std::filesystem::path& variant_folder);

// Hashes every file of a variant folder as the `kernels` library does (Digest.hash_variant):
// every file under the folder, links to files followed, except metadata.json and
// metadata.json.sigstore at its top and any __pycache__ folder; links to folders and special
// files (fifos, sockets) are skipped. A link,
// or a `..` through one, that leads out of `link_root` is refused (InvalidArgument naming it):
// `link_root` is the variant folder itself, or the repository's cache folder in a Hugging
// Face cache, whose snapshots link every file into ../../blobs.
BACKPLANE_API KernelBuilderDigest
hash_kernel_builder_variant(const std::filesystem::path& variant_folder, std::string_view algorithm,
                            const std::filesystem::path& link_root);

// What differs between the digest metadata.json records and the folder's, one line per file,
// sorted: "missing file x", "unknown file y" (not in the digest), "hash mismatch z"; an
// algorithm mismatch is one line. Empty when they agree.
BACKPLANE_API std::vector<std::string> digest_violations(const KernelBuilderDigest& expected,
                                                         const KernelBuilderDigest& actual);

// What differs between the folder and `digest` (digest_violations of a fresh hash), or, when it
// cannot be hashed (a link out of `link_root`, an unreadable file), why: one line each, empty
// when every file matches. For reports that list problems rather than stop at the first.
BACKPLANE_API std::vector<std::string> kernel_builder_digest_problems(
    const std::filesystem::path& variant_folder, const KernelBuilderDigest& digest,
    const std::filesystem::path& link_root);

// Checks the folder against its metadata's digest; throws IntegrityError naming the variant
// and every violation, or when the metadata has no digest.
BACKPLANE_API void verify_kernel_builder_variant(const std::filesystem::path& variant_folder,
                                                 const KernelBuilderMetadata& metadata,
                                                 const std::filesystem::path& link_root);

// The extension library of a Torch build: the one `*.so` at the top of the folder (kernel-builder
// names it _<name>_<backend>_<rev>.abi3.so). Throws PackageError when there is none (a
// Python-only build: nothing a C++ host can load) or several.
BACKPLANE_API std::filesystem::path kernel_builder_extension(
    const std::filesystem::path& variant_folder);

// How a C++ host calls a kernel-builder layer: the layers of kernels-community packages (and
// this project's published ones) whose ops the LibTorch bridge knows, by the layer class name a
// kernel mapping names. The signatures are the ops' schemas; kernels-community's Python layers
// call the same ops. A layer not in the table cannot be bound from C++ (its forward is Python).
struct KernelBuilderLayer {
  enum class Call {
    kOutInput,       // op(Tensor! out, Tensor input): out = f(input), out [..., d] or [..., 2d]
    kOutInputFloat,  // op(Tensor! out, Tensor input, float threshold)
    kRmsNorm,        // op(Tensor! out, Tensor input, Tensor weight, float epsilon)
    kRotaryInPlace,  // op(Tensor! query, Tensor! key, Tensor cos, Tensor sin, bool interleaved)
  };
  const char* layer;        // "SiluAndMul"
  const char* op;           // "silu_and_mul"
  const char* backward_op;  // the op that makes it usable in training; nullptr: none
  Call call;
  const char* computes;  // what it computes, for docs and messages
};

// The table (hub/src/kernel_builder_layers.cpp), in name order.
BACKPLANE_API const std::vector<KernelBuilderLayer>& kernel_builder_layers();
BACKPLANE_API const KernelBuilderLayer* find_kernel_builder_layer(std::string_view layer);

// Checks, without loading it, that `library` is a shared library this process could load: an
// ELF file, not truncated (its section and program headers inside the file), of this
// process's class, byte order and machine, ET_DYN. Throws PackageError naming the file and why.
BACKPLANE_API void check_loadable_elf(const std::filesystem::path& library);

}  // namespace backplane::hub
