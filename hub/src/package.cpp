#include <backplane/error.hpp>
#include <backplane/hub/errors.hpp>
#include <backplane/hub/package.hpp>
#include <backplane/internal/text.hpp>

#include <algorithm>
#include <system_error>

#include "plugin_host/plugin_library.hpp"

namespace backplane::hub {

namespace {

// A kernel package registers kernels only: device types and devices come from backend plugins,
// and its layer kernels from the store's mappings.
class PackageRegistration : public detail::RegistrationHandler {
 public:
  std::string add_device_type(const bp_device_type_desc&) override {
    return "add_device_type: a kernel package registers kernels only (add_kernel); device types "
           "come from backend plugins";
  }
  std::string add_device(const bp_device_desc&) override {
    return "add_device: a kernel package registers kernels only (add_kernel); devices come from "
           "backend plugins";
  }
  std::string check_kernel(const KernelInfo& kernel) override {
    if (!kernel.device_type.empty()) return {};
    return "kernel " + kernel.op + "/" + kernel.implementation + ": device_type is empty";
  }
  std::string add_layer_kernel(const bp_layer_kernel_desc&) override {
    return "add_layer_kernel: a kernel package registers kernels only (add_kernel); which layer "
           "a package's kernel replaces is the mapping's";
  }
};

}  // namespace

struct LoadedPackage::Impl {
  PackageSource source;
  PackageMetadata metadata;
  std::vector<PackageKernel> kernels;  // each holds the library
  std::optional<KernelBuilderMetadata> kernel_builder;
};

namespace {

std::string label(const PackageSource& s) {
  return "kernel package " + s.repo.str() + "@" + s.revision + " (" + s.variant + ")";
}

[[noreturn]] void fail(const PackageSource& s, const std::string& why) {
  throw PackageError(label(s) + ": " + why);
}

std::string dtypes_text(const std::vector<std::string>& dtypes) {
  return dtypes.empty() ? "(any)" : internal::join(dtypes, " ");
}

std::string cc_text(const std::optional<ComputeCapability>& cc) {
  return cc ? cc->str() : "(none)";
}

// Each registered kernel must be a declared function with the same requirements, and each
// declared function must be registered.
void check_against_metadata(const PackageSource& s, const PackageMetadata& m,
                            const std::vector<detail::RegisteredKernel>& kernels) {
  const std::string file = (s.folder / "metadata.json").string();
  for (const detail::RegisteredKernel& k : kernels) {
    const KernelInfo& i = k.info;
    const PackageFunction* f = m.function(i.implementation);
    const std::string what =
        "the library registers " + i.op + "/" + i.implementation + " for " + i.device_type + ", ";
    if (f == nullptr) fail(s, what + "which " + file + " does not declare in functions");
    if (f->op != i.op || f->device_type != i.device_type) {
      fail(s, what + "but " + file + " declares " + f->name + " as " + f->op + " for " +
                  f->device_type);
    }
    std::vector<std::string> registered = i.dtypes, declared = f->dtypes;
    std::sort(registered.begin(), registered.end());
    std::sort(declared.begin(), declared.end());
    if (registered != declared) {
      fail(s, what + "with dtypes " + dtypes_text(registered) + ", but " + file + " declares " +
                  dtypes_text(declared));
    }
    if (!(i.min_compute_capability == f->min_compute_capability) ||
        i.max_head_dim != f->max_head_dim) {
      fail(s, what + "with minimum compute capability " + cc_text(i.min_compute_capability) +
                  " and max_head_dim " + std::to_string(i.max_head_dim) + ", but " + file +
                  " declares " + cc_text(f->min_compute_capability) + " and " +
                  std::to_string(f->max_head_dim));
    }
  }
  for (const PackageFunction& f : m.functions) {
    const bool registered = std::any_of(
        kernels.begin(), kernels.end(),
        [&](const detail::RegisteredKernel& k) { return k.info.implementation == f.name; });
    if (!registered) {
      fail(s, file + " declares function " + f.name + " (" + f.op +
                  "), but the library did not register it");
    }
  }
}

}  // namespace

const PackageSource& LoadedPackage::source() const {
  return impl_->source;
}
const PackageMetadata& LoadedPackage::metadata() const {
  return impl_->metadata;
}
const std::vector<PackageKernel>& LoadedPackage::kernels() const {
  return impl_->kernels;
}

const PackageKernel* LoadedPackage::find(std::string_view op,
                                         std::string_view implementation) const {
  for (const PackageKernel& k : impl_->kernels) {
    if (k.info.op == op && k.info.implementation == implementation) return &k;
  }
  return nullptr;
}

const KernelBuilderMetadata* LoadedPackage::kernel_builder() const {
  return impl_->kernel_builder ? &*impl_->kernel_builder : nullptr;
}

std::string LoadedPackage::take_status(bp_status* status) {
  return detail::take_status_message(status);
}

namespace {

// kernel-builder's CUDA archs are capabilities ("8.0", "9.0a"); arch_mismatch reads sm_XY.
std::string as_sm(const std::string& arch) {
  const size_t dot = arch.find('.');
  if (dot == std::string::npos) return arch;
  return "sm_" + arch.substr(0, dot) + arch.substr(dot + 1);
}

LoadedPackage check_kernel_builder_variant(const PackageSource& s) {
  auto impl = std::make_shared<LoadedPackage::Impl>();
  impl->source = s;
  const BuildVariant variant = BuildVariant::parse(s.variant);
  KernelBuilderMetadata kb = read_kernel_builder_metadata(s.folder);
  verify_kernel_builder_variant(s.folder, kb, s.link_root.empty() ? s.folder : s.link_root);
  const std::filesystem::path library = kernel_builder_extension(s.folder);
  check_loadable_elf(library);
  PackageMetadata& m = impl->metadata;
  m.repo_id = s.repo.str();
  m.version = std::to_string(kb.version);
  m.license = kb.license;
  m.backend = kb.backend;
  m.backend_version = variant.backend_version;
  for (const std::string& arch : kb.archs)
    m.archs.push_back(kb.backend == "cuda" ? as_sm(arch) : arch);
  m.library = library.filename().string();
  impl->kernel_builder = std::move(kb);
  return LoadedPackage(std::move(impl));
}

}  // namespace

LoadedPackage load_package_variant(const PackageSource& s, const PackageLoadOptions& options) {
  if (is_kernel_builder_variant(s.folder)) return check_kernel_builder_variant(s);
  auto impl = std::make_shared<LoadedPackage::Impl>();
  impl->source = s;
  const BuildVariant variant = BuildVariant::parse(s.variant);
  const std::filesystem::path metadata_file = s.folder / "metadata.json";
  impl->metadata = read_metadata(metadata_file);
  const PackageMetadata& m = impl->metadata;
  check_metadata_fits(m, variant, metadata_file);
  if (m.repo_id != s.repo.str()) {
    throw InvalidArgument(metadata_file.string() + ": repo_id: '" + m.repo_id +
                          "' but the package is installed as " + s.repo.str());
  }

  const std::filesystem::path library = s.folder / m.library;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(library, ec)) {
    fail(s, "the library " + library.string() + " named by metadata.json is missing");
  }
  std::shared_ptr<detail::PluginLibrary> lib;
  std::vector<detail::RegisteredKernel> kernels;
  try {
    lib = detail::PluginLibrary::open(library);
    const bp_plugin_api& api = lib->api();
    if (api.abi_major != m.abi_major || api.abi_minor != m.abi_minor) {
      fail(s, "the library is built for ABI " + lib->abi_version() + " but " +
                  metadata_file.string() + " says abi_version " + m.abi_version());
    }
    const std::string package = s.repo.str() + "@" + s.revision;
    PackageRegistration registration;
    kernels = lib->init(bp_host_context{"kernel package '" + package + "'",
                                        detail::Logger(options.log_level, options.log_sink),
                                        {}},
                        package, registration);
  } catch (const detail::LoadError& e) {
    fail(s, e.what());
  }
  check_against_metadata(s, m, kernels);

  const std::shared_ptr<const void> owner = lib;  // kernels hold the library
  for (detail::RegisteredKernel& k : kernels) {
    impl->kernels.push_back(PackageKernel{std::move(k.info), k.function, k.context, owner});
  }
  return LoadedPackage(std::move(impl));
}

}  // namespace backplane::hub
