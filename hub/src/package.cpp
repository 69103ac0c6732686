#include <backplane/error.hpp>
#include <backplane/hub/errors.hpp>
#include <backplane/hub/package.hpp>
#include <backplane/internal/dynamic_library.hpp>
#include <backplane/internal/text.hpp>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "package_host.hpp"

namespace backplane::hub {

namespace {

// The open library and what its init made. Kernels own it (PackageKernel::owner), so it lives
// while any of them does; shutdown runs, then the library closes.
struct PackageLibrary {
  internal::DynamicLibrary library;  // declared first: closed last
  detail::PackageHostContext host_context;
  bp_host_api host_api{};
  bp_plugin_api api{};
  bp_plugin_state* state = nullptr;
  bool initialized = false;

  PackageLibrary() = default;
  PackageLibrary(const PackageLibrary&) = delete;
  PackageLibrary& operator=(const PackageLibrary&) = delete;
  ~PackageLibrary() {
    if (initialized && api.shutdown != nullptr) api.shutdown(state);
  }
};

}  // namespace

struct LoadedPackage::Impl {
  PackageSource source;
  PackageMetadata metadata;
  std::vector<PackageKernel> kernels;  // each holds the library
};

namespace {

std::string abi_string(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

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
                            const std::vector<detail::RegisteredPackageKernel>& kernels) {
  const std::string file = (s.folder / "metadata.json").string();
  for (const detail::RegisteredPackageKernel& k : kernels) {
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
        [&](const detail::RegisteredPackageKernel& k) { return k.info.implementation == f.name; });
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

std::string LoadedPackage::take_status(bp_status* status) {
  if (status == nullptr) return {};
  std::string message = status->message.empty() ? "out of memory" : status->message;
  detail::free_package_status(status);
  return message;
}

LoadedPackage load_package_variant(const PackageSource& s, const PackageLoadOptions& options) {
  auto impl = std::make_shared<LoadedPackage::Impl>();
  auto lib = std::make_shared<PackageLibrary>();
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
  std::string error;
  lib->library = internal::DynamicLibrary::open(library.string(), error,
                                                internal::DynamicLibrary::OnClose::kUnloads);
  if (!lib->library) fail(s, "cannot load " + library.string() + ": " + error);
  const auto get_api = lib->library.function<bp_get_api_fn>(BP_ENTRY_SYMBOL);
  if (get_api == nullptr) {
    fail(s, library.string() + " does not export " + BP_ENTRY_SYMBOL +
                ": a kernel package library exports the plugin entry symbol");
  }
  const bp_plugin_api* table = get_api(BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR);
  if (table == nullptr) {
    fail(s, std::string(BP_ENTRY_SYMBOL) +
                " returned NULL: the library cannot serve a host with ABI " +
                abi_string(BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR));
  }
  if (table->struct_size < BP_PLUGIN_API_SIZE_1_0) {
    fail(s, "its table is " + std::to_string(table->struct_size) +
                " bytes, smaller than ABI 1.0's " + std::to_string(BP_PLUGIN_API_SIZE_1_0));
  }
  std::memcpy(static_cast<void*>(&lib->api), table, std::min(table->struct_size, sizeof lib->api));
  const bp_plugin_api& api = lib->api;
  if (api.abi_major != m.abi_major || api.abi_minor != m.abi_minor) {
    fail(s, "the library is built for ABI " + abi_string(api.abi_major, api.abi_minor) + " but " +
                metadata_file.string() + " says abi_version " + m.abi_version());
  }
  if (api.init == nullptr) fail(s, "its table has no init function");

  lib->host_context.package = s.repo.str() + "@" + s.revision;
  lib->host_context.log_level = options.log_level;
  lib->host_context.log_sink = options.log_sink;
  lib->host_api = detail::make_package_host_api(&lib->host_context);
  detail::PackageRegistrarContext registrar_context;
  registrar_context.package = lib->host_context.package;
  const bp_registrar registrar = detail::make_package_registrar(&registrar_context);
  bp_status* status = api.init(&lib->host_api, &registrar, &lib->state);
  if (status != nullptr) {
    const bp_status_code code = status->code;
    const std::string message = LoadedPackage::take_status(status);
    fail(s, "init failed (code " + std::to_string(static_cast<int>(code)) + "): " + message);
  }
  lib->initialized = true;  // from here on, the destructor calls shutdown
  if (!registrar_context.first_error.empty()) {
    fail(s, "init registered something invalid: " + registrar_context.first_error);
  }
  check_against_metadata(s, m, registrar_context.kernels);

  const std::shared_ptr<const void> owner = lib;
  for (detail::RegisteredPackageKernel& k : registrar_context.kernels) {
    impl->kernels.push_back(PackageKernel{std::move(k.info), k.function, k.context, owner});
  }
  return LoadedPackage(std::move(impl));
}

}  // namespace backplane::hub
