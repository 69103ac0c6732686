#include <backplane/error.hpp>
#include <backplane/hub/errors.hpp>
#include <backplane/hub/kernel_builder.hpp>
#include <backplane/hub/metadata.hpp>
#include <backplane/hub/use_kernels.hpp>

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace backplane::hub {
namespace {

void warn_once(std::vector<std::string>& warnings, const std::string& text) {
  if (std::find(warnings.begin(), warnings.end(), text) == warnings.end()) {
    warnings.push_back(text);
  }
}

// The repo id a local package folder's variants declare (they must agree).
RepoId local_repo_id(const std::filesystem::path& folder) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder / "build", ec)) {
    const std::filesystem::path metadata = entry.path() / "metadata.json";
    if (!std::filesystem::is_regular_file(metadata, ec)) continue;
    if (is_kernel_builder_variant(entry.path())) {
      // kernel-builder metadata names the kernel, not its repository.
      return RepoId::parse("local/" + read_kernel_builder_metadata(entry.path()).name,
                           metadata.string());
    }
    return RepoId::parse(read_metadata(metadata).repo_id, metadata.string());
  }
  throw NotFound("local kernel package " + folder.string() +
                 " has no build/<variant>/metadata.json");
}

std::string known_kernel_builder_layers() {
  std::string out;
  for (const KernelBuilderLayer& l : kernel_builder_layers())
    out += (out.empty() ? "" : ", ") + std::string(l.layer);
  return out;
}

}  // namespace

std::optional<BoundLayerKernel> LayerKernels::bind_kernel_builder_layer(
    const std::string& layer, const KernelMappingEntry& entry, KernelMode matched_mode,
    const LoadedPackage& package, std::map<std::string, std::string>& reasons,
    std::vector<std::string>& warnings) const {
  const LayerKernelRef& ref = entry.kernel;
  const KernelBuilderLayer* row = find_kernel_builder_layer(ref.layer);
  if (row == nullptr) {
    throw PackageError("kernel package " + package.metadata().repo_id + " (" +
                       package.source().variant + ", a kernel-builder build): layer `" + ref.layer +
                       "` (the mapping entry from " + entry.source +
                       " names it) is a Python layer whose op a C++ host does not know; the "
                       "layers it can call: " +
                       known_kernel_builder_layers());
  }
  if (options_.mode.is_training() && row->backward_op == nullptr) {
    const std::string why = "kernel " + ref.str() + " for layer `" + layer +
                            "` has no backward; using the original forward in mode " +
                            options_.mode.str();
    if (!options_.fallback.no_compatible_mode) throw InvalidArgument(why);
    reasons[layer] = why;
    warn_once(warnings, why);
    return std::nullopt;
  }
  BoundLayerKernel b;
  b.layer = layer;
  b.entry = entry;
  b.matched_mode = matched_mode;
  b.kernel.info.op = row->op;
  b.kernel.info.plugin = package.source().repo.str() + "@" + package.source().revision;
  b.variant = package.source().variant;
  b.torch_extension = package.source().folder;
  b.torch_link_root = package.source().link_root;
  b.torch_layer = row;
  return b;
}

LayerKernels::LayerKernels(Device device, HubDevice hub, KernelMapping mapping, Store store,
                           UseKernelsOptions options)
    : device_(std::move(device)),
      hub_(std::move(hub)),
      mapping_(std::move(mapping)),
      store_(std::move(store)),
      options_(std::move(options)) {}

LayerKernels LayerKernels::use_kernels(const Runtime& runtime, const Device& device,
                                       const Store& store, UseKernelsOptions options) {
  const DeviceInfo& info = runtime.device(device);
  const HubDevice hub = runtime.hub_device(device);
  KernelMapping mapping = runtime.default_kernel_mapping();
  if (options.user_mapping) mapping.merge(*options.user_mapping, options.inherit_mapping);
  const SystemFacts system = options.system ? *options.system : system_facts(info, hub.key);
  LayerKernels out(info.device, hub, std::move(mapping), store, std::move(options));
  out.system_ = system;
  // The arch check needs the device for the loads made here; the snapshot outlives this call,
  // not the object, so it is not kept.
  out.options_.load.device = &info;
  out.bind();
  out.options_.load.device = nullptr;
  return out;
}

void LayerKernels::set_mode(KernelMode mode) {
  mode.lookup_order();  // throws InvalidArgument for fallback, before anything changes
  const KernelMode previous = options_.mode;
  options_.mode = mode;
  try {
    bind();
  } catch (...) {
    options_.mode = previous;
    bind();
    throw;
  }
}

const BoundLayerKernel* LayerKernels::find(std::string_view layer) const {
  const auto it = bound_.find(std::string(layer));
  return it == bound_.end() ? nullptr : &it->second;
}

std::string LayerKernels::reason(std::string_view layer) const {
  if (bound_.count(std::string(layer)) != 0) return {};
  const auto it = reasons_.find(std::string(layer));
  if (it != reasons_.end()) return it->second;
  // The kernels library's text for a layer no entry names.
  return mapping_.lookup(layer, hub_, options_.mode).reason;
}

const LoadedPackage* LayerKernels::package_for(const LayerKernelRef& ref, std::string& missing) {
  const std::string key = ref.str().substr(0, ref.str().rfind(':'));
  if (auto it = packages_.find(key); it != packages_.end()) return &it->second;
  if (auto it = missing_.find(key); it != missing_.end()) {
    missing = it->second;
    return nullptr;
  }
  try {
    LoadOptions load = options_.load;
    if (ref.is_local_path()) {
      const RepoId repo = local_repo_id(ref.repo);
      LocalKernels local;
      local.repos[repo.str()] = ref.repo;
      const Store local_store(store_.root(), local);
      return &packages_.emplace(key, local_store.load(repo, system_, load)).first->second;
    }
    const RepoId repo = RepoId::parse(ref.repo, "kernel mapping");
    if (ref.revision) {
      load.revision = *ref.revision;
    } else if (ref.version && store_.installed(repo, "v" + std::to_string(*ref.version))) {
      load.revision = "v" + std::to_string(*ref.version);  // the kernels library's version branch
    }
    return &packages_.emplace(key, store_.load(repo, system_, load)).first->second;
  } catch (const NotFound& e) {  // not installed, or no variant for this system
    missing_[key] = e.what();
    missing = e.what();
    return nullptr;
  }
}

void LayerKernels::bind() {
  std::map<std::string, BoundLayerKernel> bound;
  std::map<std::string, std::string> reasons;
  std::vector<std::string> warnings;
  const KernelMode mode = options_.mode;
  for (const std::string& layer : mapping_.layers()) {
    const LayerKernelChoice choice = mapping_.lookup(layer, hub_, mode, options_.fallback);
    if (!choice.entry) {
      // Every layer that keeps its own forward says so (the kernels library only logs some).
      reasons[layer] = choice.reason;
      warn_once(warnings, "layer `" + layer + "` keeps its own forward: " + choice.reason);
      continue;
    }
    const LayerKernelRef& ref = choice.entry->kernel;
    std::string missing;
    const LoadedPackage* package = package_for(ref, missing);
    if (package == nullptr) {
      const std::string why = "Kernel for layer `" + layer + "` on " + device_.str() + " (" +
                              ref.str() +
                              ") could not be loaded; using the original forward: " + missing;
      if (!options_.fallback_cannot_load) throw NotFound(why);
      reasons[layer] = why;
      warn_once(warnings, why);
      continue;
    }
    if (package->kernel_builder() != nullptr) {
      if (std::optional<BoundLayerKernel> b = bind_kernel_builder_layer(
              layer, *choice.entry, *choice.matched_mode, *package, reasons, warnings)) {
        bound.emplace(layer, std::move(*b));
      }
      continue;
    }
    const PackageMetadata& metadata = package->metadata();
    const auto in_package =
        std::find_if(metadata.layers.begin(), metadata.layers.end(),
                     [&](const PackageLayer& l) { return l.name == ref.layer; });
    if (in_package == metadata.layers.end()) {
      std::string have;
      for (const PackageLayer& l : metadata.layers) have += (have.empty() ? "" : ", ") + l.name;
      throw PackageError("kernel package " + metadata.repo_id + " has no layer `" + ref.layer +
                         "` (the mapping entry from " + choice.entry->source +
                         " names it); it has: " + (have.empty() ? "none" : have));
    }
    // Training needs a backward; without one the layer keeps its forward, as the kernels
    // library does, unless the policy forbids that fallback.
    if (mode.is_training() && !in_package->has_backward) {
      const std::string why = "kernel " + ref.str() + " for layer `" + layer +
                              "` has no backward; using the original forward in mode " + mode.str();
      if (!options_.fallback.no_compatible_mode) throw InvalidArgument(why);
      reasons[layer] = why;
      warn_once(warnings, why);
      continue;
    }
    const PackageFunction* function = metadata.function(in_package->function);
    const PackageKernel* kernel =
        function != nullptr ? package->find(function->op, function->name) : nullptr;
    if (kernel == nullptr) {
      throw PackageError("kernel package " + metadata.repo_id + ": layer `" + ref.layer +
                         "` names function `" + in_package->function +
                         "`, which its library did not register");
    }
    BoundLayerKernel b;
    b.layer = layer;
    b.entry = *choice.entry;
    b.matched_mode = *choice.matched_mode;
    b.kernel = *kernel;
    b.variant = package->source().variant;
    if (mode.is_training()) {
      const PackageFunction* backward = metadata.function(in_package->backward_function);
      const PackageKernel* found =
          backward != nullptr ? package->find(backward->op, backward->name) : nullptr;
      if (found == nullptr) {
        throw PackageError("kernel package " + metadata.repo_id + ": layer `" + ref.layer +
                           "` names backward function `" + in_package->backward_function +
                           "`, which its library did not register");
      }
      b.backward = *found;
    }
    bound.emplace(layer, std::move(b));
  }
  bound_ = std::move(bound);
  reasons_ = std::move(reasons);
  warnings_ = std::move(warnings);
  for (const std::string& w : warnings_) tell_warning(options_.on_warning, w);
}

}  // namespace backplane::hub
