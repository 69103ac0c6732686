// Kernel Hub packages in a LibTorch host: a kernel-builder Torch build (a TORCH_LIBRARY
// extension, hub/kernel_builder.hpp) loaded into this process and its ops called through the
// c10 dispatcher by schema, without Python.
//
//   auto ext = backplane::torch::TorchExtension::load(
//       "/models/kernels--org--activation/snapshots/<commit>/build/torch215-cxx11-cpu-x86_64-linux");
//   at::Tensor out = at::empty({4, 8});
//   ext->call("silu_and_mul", {out, x});          // checked against "silu_and_mul(Tensor! out,
//   ...)"
//
// Such a library is a Python extension module too: it defines PyInit_<name> and references
// PyModule_Create2, which it never calls outside Python. This library defines PyModule_Create2
// (it forwards to Python's when Python is in the process, and otherwise returns NULL; backplane
// never calls a module's init) and exports it from the program through backplane::torch's link
// options, so that an extension linked with -z now can be opened.
#pragma once

#include <backplane/hub/kernel_builder.hpp>
#include <backplane/hub/store.hpp>
#include <backplane/hub/variant.hpp>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::torch {

// This process's LibTorch as the hub's facts for `device`: its version and C++ ABI (from the
// headers this bridge is built with; the library itself must be the same), this machine's CPU
// and OS, and the backend of the device: cpu, or cuda with the CUDA version LibTorch was built
// with when its CUDA library is loaded (the kernels library takes torch.version.cuda).
hub::SystemFacts system_facts(const c10::Device& device = c10::Device(c10::kCPU));

struct ExtensionLoadOptions {
  // The folder links may lead into: the variant folder (empty), or the repository's folder in a
  // Hugging Face cache (snapshots link into blobs/).
  std::filesystem::path link_root;
  // Checks metadata.json's digest before the library opens (IntegrityError on a mismatch). Off
  // only for a folder the caller has just checked itself.
  bool verify_digest = true;
};

class TorchExtension {
 public:
  // Checks the variant folder and loads its extension: a Torch build for this LibTorch (the
  // folder's torchXY and C++ ABI tag, or stable-ABI version, refused before anything opens,
  // naming both versions; a folder whose name is not a variant is loaded with a warning that
  // this cannot be checked), its metadata.json, the digest, an ELF shared library for this
  // machine; then dlopen (RTLD_NOW | RTLD_LOCAL) and the ops it registered under metadata.id,
  // at least one. Throws hub::PackageError, hub::IntegrityError or InvalidArgument naming the
  // folder and why; the process goes on. The library stays loaded for the life of the process
  // (its registrations live in LibTorch's dispatcher); loading a folder again returns the same
  // extension.
  static std::shared_ptr<const TorchExtension> load(const std::filesystem::path& variant_folder,
                                                    const ExtensionLoadOptions& options = {});

  const hub::KernelBuilderMetadata& metadata() const { return metadata_; }
  const std::filesystem::path& folder() const { return folder_; }
  const std::filesystem::path& library() const { return library_; }

  // The schemas of the ops it registered, sorted, with the namespace:
  // "_activation_0a1b2c3::silu_and_mul(Tensor! out, Tensor input) -> ()", as declared.
  const std::vector<std::string>& schemas() const { return schemas_; }
  // Whether it registered `op` ("silu_and_mul", or "name.overload").
  bool has_op(std::string_view op) const;

  // Calls `op` with `arguments` through the dispatcher, checked against its schema first: the
  // count (missing trailing arguments take their defaults), and each argument's type (a Tensor
  // where the schema has Tensor, a number for float or int, ...). Returns the op's outputs.
  // Errors are InvalidArgument naming the op and the argument ("_activation_0a1b2c3::
  // silu_and_mul: argument 2 (input): expected Tensor, got double"), and for a failure inside
  // the op, its message.
  std::vector<c10::IValue> call(std::string_view op, std::vector<c10::IValue> arguments) const;

  // The dispatcher's handle of `op`, for a caller that calls it often with a signature it knows:
  //   ext->handle("rms_norm").typed<void(at::Tensor&, const at::Tensor&, const at::Tensor&,
  //                                      double)>().call(out, x, weight, 1e-6);
  // (no argument checks; a wrong signature is LibTorch's error). Throws InvalidArgument as call.
  c10::OperatorHandle handle(std::string_view op) const;

  TorchExtension(std::filesystem::path folder, std::filesystem::path library,
                 hub::KernelBuilderMetadata metadata, std::vector<std::string> schemas);

 private:
  std::filesystem::path folder_;
  std::filesystem::path library_;
  hub::KernelBuilderMetadata metadata_;
  std::vector<std::string> schemas_;
};

// A repository's kernel-builder Torch build from the store (or a Hugging Face cache beside it)
// for this LibTorch on `device`: Store::load chooses the variant (system_facts(device)) and
// checks it (the lock or trust rules of `options`, the digest), then TorchExtension::load opens
// it. Throws as both; InvalidArgument when the variant is one of this project's plugin-ABI
// packages, which hub::LayerKernels and Store::load take instead.
std::shared_ptr<const TorchExtension> load_hub_extension(
    const hub::Store& store, const hub::RepoId& repo, const hub::LoadOptions& options = {},
    const c10::Device& device = c10::Device(c10::kCPU));

}  // namespace backplane::torch
