// use_kernels: the layers of a model on one device bound to the Hub kernels that replace them
// (transformers' use_kernels=True with an optional KernelConfig, the kernels library's
// kernelize). The mapping is the plugins' defaults (Runtime::default_kernel_mapping) extended or
// replaced by the user's; each mapped layer is looked up for the mode (kernel_mapping.hpp), its
// package is loaded from the store (lock and trust rules of Store::load) and the function behind
// the layer (metadata.json "layers") is bound. Switching the mode (model.train() /
// model.eval()) binds the kernels of the new mode.
#pragma once

#include <backplane/export.hpp>
#include <backplane/hub/package.hpp>
#include <backplane/hub/store.hpp>
#include <backplane/rules/device.hpp>
#include <backplane/rules/kernel_mapping.hpp>
#include <backplane/runtime/runtime.hpp>
#include <backplane/warnings.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::hub {

struct UseKernelsOptions {
  KernelMode mode = KernelMode::inference();
  std::optional<KernelMapping> user_mapping;  // KernelConfig (parse_kernel_config)
  bool inherit_mapping = true;  // the user's entries extend the defaults; false: only the user's
  KernelFallbackPolicy fallback;
  // A mapped kernel that is not in the store (or has no variant for this system) keeps the
  // layer's own forward with a warning; false makes it an error (KernelizeFallback.CANNOT_LOAD).
  // A package that is there but refused (lock mismatch, untrusted) is always an error.
  bool fallback_cannot_load = true;
  LoadOptions load;  // kernels.lock and trust
  // The system the variants are chosen for; default system_facts(device, its Hub key).
  std::optional<SystemFacts> system;
  // Each warning of a binding (a layer that keeps its own forward, and why), as it is made;
  // unset: once per process to stderr (warnings.hpp), as the kernels library logs them.
  WarningHandler on_warning;
};

// A layer bound to its kernel. `kernel.function` has the op's function type from plugin.h
// (bp_rms_norm_fn for op "rms_norm", ...); kernel.owner keeps its library loaded.
struct BoundLayerKernel {
  std::string layer;         // "RMSNorm"
  KernelMappingEntry entry;  // the mapping entry that chose it (kernel ref, mode, source)
  KernelMode matched_mode = KernelMode::inference();
  PackageKernel kernel;  // this project's packages; empty for a kernel-builder one
  // The layer's backward op (this project's packages, training mode); function NULL otherwise.
  PackageKernel backward;
  std::string variant;  // the build variant that was loaded
  // A kernel-builder Torch build (checked, not opened: the LibTorch bridge opens it and calls
  // `torch_layer->op`): its variant folder and where its links may lead. Empty otherwise.
  std::filesystem::path torch_extension;
  std::filesystem::path torch_link_root;
  const KernelBuilderLayer* torch_layer = nullptr;
};

class BACKPLANE_API LayerKernels {
 public:
  // Resolves and loads the kernels of every mapped layer for `device` in options.mode. Throws
  // InvalidArgument when a fallback the policy forbids would be taken, PackageError /
  // IntegrityError for a package the store refuses, NotFound for an unknown device (and for a
  // missing package when fallback_cannot_load is false).
  static LayerKernels use_kernels(const Runtime& runtime, const Device& device, const Store& store,
                                  UseKernelsOptions options = {});

  // The kernel for `layer` in the current mode; nullptr when the layer keeps its own forward
  // (reason() says why).
  const BoundLayerKernel* find(std::string_view layer) const;
  // Why `layer` has no kernel in the current mode; empty when it has one.
  std::string reason(std::string_view layer) const;

  KernelMode mode() const { return options_.mode; }
  // Binds the kernels of `mode` (packages already loaded are reused). Throws as use_kernels.
  void set_mode(KernelMode mode);

  const Device& device() const { return device_; }
  const KernelMapping& mapping() const { return mapping_; }
  // The warnings of the last binding, word for word (the kernels library's for an unmapped
  // layer; "kernel ... could not be loaded" for a missing package; a training layer without a
  // backward), each once. Each was also told to options.on_warning (or stderr) when made.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  LayerKernels(Device device, HubDevice hub, KernelMapping mapping, Store store,
               UseKernelsOptions options);
  void bind();
  const LoadedPackage* package_for(const LayerKernelRef& ref, std::string& missing);
  std::optional<BoundLayerKernel> bind_kernel_builder_layer(
      const std::string& layer, const KernelMappingEntry& entry, KernelMode matched_mode,
      const LoadedPackage& package, std::map<std::string, std::string>& reasons,
      std::vector<std::string>& warnings) const;

  Device device_;
  HubDevice hub_;
  KernelMapping mapping_;
  Store store_;
  UseKernelsOptions options_;
  SystemFacts system_;
  std::map<std::string, BoundLayerKernel> bound_;  // by layer
  std::map<std::string, std::string> reasons_;     // by layer, when not bound
  std::map<std::string, LoadedPackage> packages_;  // by "repo@revision" or local path
  std::map<std::string, std::string> missing_;     // packages that could not be found, why
  std::vector<std::string> warnings_;
};

}  // namespace backplane::hub
