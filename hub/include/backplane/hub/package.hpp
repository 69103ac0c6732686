// Loading one build variant of a kernel package: its library registers kernels through the
// plugin ABI (plugin.h) exactly as a backend plugin's do, and they come back as KernelInfo and
// function pointers, like Runtime::kernels(). hub/README.md, "The library", says what the
// library must export.
#pragma once

#include <backplane/plugin.h>
#include <backplane/export.hpp>
#include <backplane/hub/kernel_builder.hpp>
#include <backplane/hub/metadata.hpp>
#include <backplane/hub/repo_id.hpp>
#include <backplane/runtime/kernels.hpp>
#include <backplane/runtime/runtime.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::hub {

// A kernel a package registered. Cast `function` to the op's function type (as for plugin
// kernels) and pass `context` back to it. A status the function returns is the package's:
// read and free it with LoadedPackage::take_status (it has the core's layout, so the core's
// kernel handles such as AttentionKernel may free it too).
struct PackageKernel {
  KernelInfo info;  // info.plugin is "org/repo@revision"
  void (*function)(void) = nullptr;
  void* context = nullptr;
  std::shared_ptr<const void> owner;  // keeps the library loaded while the kernel is in use
};

// Where a variant is: which package it belongs to and its folder.
struct PackageSource {
  RepoId repo;
  std::string revision;
  std::string variant;           // the build/<variant> folder name
  std::filesystem::path folder;  // .../build/<variant>
  // Where the variant's links may lead (kernel-builder digests follow links): empty for the
  // folder itself; a Hugging Face cache's repository folder, whose snapshots link into blobs/.
  std::filesystem::path link_root = {};
};

struct PackageLoadOptions {
  LogLevel log_level = LogLevel::kWarn;  // what the library's log lines get through
  LogSink log_sink;  // empty: "backplane: <level>: kernel package 'org/repo': ..." on stderr
};

class BACKPLANE_API LoadedPackage {
 public:
  const PackageSource& source() const;
  const PackageMetadata& metadata() const;
  // In registration order. Each holds the library; the package may be dropped before them.
  const std::vector<PackageKernel>& kernels() const;
  // The kernel with that op and implementation (function name), or nullptr.
  const PackageKernel* find(std::string_view op, std::string_view implementation) const;
  // For a kernel-builder Torch build: its metadata; the build was checked (metadata, digest,
  // an ELF extension library for this machine) but not opened, since that needs LibTorch:
  // backplane::torch::TorchExtension opens it. kernels() is empty, and metadata() holds what the
  // store needs (repo, version, license, backend, archs as sm_XY, library). nullptr otherwise.
  const KernelBuilderMetadata* kernel_builder() const;
  // The message of a status a package kernel returned, freeing it. Empty for NULL (success).
  static std::string take_status(bp_status* status);

  struct Impl;
  explicit LoadedPackage(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const Impl> impl_;
};

// A kernel-builder variant (is_kernel_builder_variant): reads its metadata.json, checks the
// digest (IntegrityError naming each file), finds its extension library (a Python-only build
// is refused: PackageError) and checks it is an ELF library for this machine; opens nothing.
// Otherwise, this project's format: reads and checks the variant's metadata.json (it must fit the
// folder's name), opens its library (dlopen, RTLD_LOCAL | RTLD_NOW), negotiates the ABI, runs its
// init with a registrar that takes only kernels, and checks the kernels against the metadata's
// functions (each declared function registered, nothing undeclared, the same op, device type,
// dtypes and compute capability). Throws PackageError (or InvalidArgument for bad metadata) naming
// the package, the file and the reason; the process goes on. Trust and locks are the store's
// business (Store::load), not this function's.
BACKPLANE_API LoadedPackage load_package_variant(const PackageSource& source,
                                                 const PackageLoadOptions& options = {});

}  // namespace backplane::hub
