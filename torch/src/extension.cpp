// TorchExtension: kernel-builder Torch builds loaded into a LibTorch host, their ops called by
// schema through the c10 dispatcher.
#include <backplane/error.hpp>
#include <backplane/hub/errors.hpp>
#include <backplane/torch/extension.hpp>
#include <backplane/warnings.hpp>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/version.h>

#include <dlfcn.h>

#include <map>
#include <mutex>

// What a kernel-builder extension references from Python: its PyInit_<name> (never called
// here) builds the module with PyModule_Create2. Exported from the program (backplane::torch's
// link options), so that the extension resolves it at dlopen; in a process that has Python, the
// call goes on to Python's own.
extern "C" __attribute__((visibility("default"))) void* PyModule_Create2(void* definition,
                                                                         int api_version) {
  using Create = void* (*)(void*, int);
  static const auto python = reinterpret_cast<Create>(::dlsym(RTLD_NEXT, "PyModule_Create2"));
  return python != nullptr ? python(definition, api_version) : nullptr;
}

namespace backplane::torch {
namespace fs = std::filesystem;

namespace {

// An argument as a schema declares it: "Tensor! out", "Tensor(a!) self", "float epsilon".
// (c10 prints an anonymous alias set as "Tensor($0! -> )".)
std::string argument_text(const c10::Argument& a, bool with_name) {
  std::string text = a.type()->annotation_str();
  if (const c10::AliasInfo* alias = a.alias_info()) {
    std::string sets;
    for (const c10::Symbol& set : alias->beforeSets()) {
      const std::string name = set.toUnqualString();
      if (name.rfind('$', 0) != 0) sets += (sets.empty() ? "" : "|") + name;
    }
    const std::string write = alias->isWrite() ? "!" : "";
    text += sets.empty() ? write : "(" + sets + write + ")";
  }
  if (with_name && !a.name().empty()) text += " " + a.name();
  return text;
}

std::string schema_text(const c10::FunctionSchema& schema) {
  std::string text =
      schema.name() + (schema.overload_name().empty() ? "" : "." + schema.overload_name()) + "(";
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    text += (i == 0 ? "" : ", ") + argument_text(schema.arguments()[i], true);
  }
  text += ") -> ";
  const std::vector<c10::Argument>& returns = schema.returns();
  if (returns.size() == 1) return text + argument_text(returns[0], false);
  text += "(";
  for (size_t i = 0; i < returns.size(); ++i) {
    text += (i == 0 ? "" : ", ") + argument_text(returns[i], false);
  }
  return text + ")";
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

// The variant folder's name decides, before anything opens, whether it was built for this
// LibTorch (the kernels library's rules, hub::resolve_variants). A folder whose name is not a
// variant (a LOCAL_KERNELS path to the variant itself) is not checked by name.
void check_built_for_this_torch(const fs::path& folder) {
  const std::string name = folder.filename().string();
  hub::BuildVariant variant;
  try {
    variant = hub::BuildVariant::parse(name);
  } catch (const InvalidArgument&) {
    // Never silently: nothing here can tell which LibTorch such a build links against.
    tell_warning({}, folder.string() + ": the folder's name (" + name +
                         ") is not a build variant, so the LibTorch it was built for cannot be "
                         "checked before it is loaded; name it torchXY-... as kernel-builder does");
    return;
  }
  if (variant.framework.empty()) {
    throw hub::PackageError(folder.string() +
                            ": a backplane plugin-ABI package, not a Torch extension; load it "
                            "with hub::Store::load or use_kernels");
  }
  if (variant.kind == hub::BuildVariant::Kind::kGeneric) {
    throw hub::PackageError(folder.string() + ": " + name +
                            " is a Python-only build: only a Python process can use it");
  }
  hub::SystemFacts facts = system_facts();
  facts.cpu = variant.cpu;  // only the framework is checked here; the device's backend is the
  facts.os = variant.os;    // caller's choice (resolve_variants picked the folder)
  facts.backend = variant.backend;
  facts.backend_version = variant.backend_version;
  const hub::VariantResolution r = hub::resolve_variants({name}, facts);
  if (r.chosen() == nullptr) {
    const std::string why = r.decisions.front().reason;
    throw hub::PackageError(folder.string() + ": built for another LibTorch than this program's " +
                            std::to_string(TORCH_VERSION_MAJOR) + "." +
                            std::to_string(TORCH_VERSION_MINOR) + ": " + why);
  }
}

void* open_library(const fs::path& library) {
  if (::dlsym(RTLD_DEFAULT, "PyModule_Create2") == nullptr) {
    throw hub::PackageError(
        library.string() +
        ": this program does not export PyModule_Create2, which a kernel-builder extension needs "
        "to load; link it with backplane::torch (whose link options export it), or pass "
        "-Wl,--export-dynamic-symbol=PyModule_Create2");
  }
  ::dlerror();
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    throw hub::PackageError(library.string() + ": cannot be loaded: " +
                            (error != nullptr ? error : "unknown dlopen error"));
  }
  return handle;
}

std::vector<std::string> ops_in(const std::string& ns) {
  std::vector<std::string> out;
  const std::string prefix = ns + "::";
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind(prefix, 0) != 0) continue;
    const auto handle = c10::Dispatcher::singleton().findSchema(name);
    if (handle) out.push_back(schema_text(handle->schema()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string type_of(const c10::IValue& value) {
  if (value.isTensor()) return value.toTensor().defined() ? "Tensor" : "an undefined Tensor";
  if (value.isNone()) return "None";
  return value.type()->str();
}

// `value` for a parameter of type `type`; what is wrong with it, or empty.
std::string mismatch(const c10::TypePtr& type, c10::IValue& value) {
  switch (type->kind()) {
    case c10::TypeKind::TensorType:
      if (value.isTensor() && value.toTensor().defined()) return {};
      return "expected Tensor, got " + type_of(value);
    case c10::TypeKind::FloatType:
      if (value.isDouble()) return {};
      if (value.isInt()) {
        value = static_cast<double>(value.toInt());
        return {};
      }
      return "expected float, got " + type_of(value);
    case c10::TypeKind::IntType:
      return value.isInt() ? "" : "expected int, got " + type_of(value);
    case c10::TypeKind::BoolType:
      return value.isBool() ? "" : "expected bool, got " + type_of(value);
    case c10::TypeKind::OptionalType:
      if (value.isNone()) return {};
      return mismatch(type->castRaw<c10::OptionalType>()->getElementType(), value);
    default:
      if (value.type()->isSubtypeOf(*type)) return {};
      return "expected " + type->str() + ", got " + type_of(value);
  }
}

std::mutex loaded_mutex;
std::map<fs::path, std::shared_ptr<const TorchExtension>>& loaded() {
  static auto* extensions = new std::map<fs::path, std::shared_ptr<const TorchExtension>>();
  return *extensions;  // never destroyed: the libraries stay loaded to the end
}

}  // namespace

hub::SystemFacts system_facts(const c10::Device& device) {
  hub::SystemFacts facts = hub::SystemFacts::host();
  facts.torch_version = hub::BackendVersion{TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR};
#if defined(_GLIBCXX_USE_CXX11_ABI) && _GLIBCXX_USE_CXX11_ABI == 0
  const char* abi = "cxx98";
#else
  const char* abi = "cxx11";
#endif
  if (facts.os == "linux") facts.torch_cxx_abi = abi;
  if (device.is_cuda()) {
    facts.backend = "cuda";
    try {
      const long version = at::detail::getCUDAHooks().versionCUDART();  // 13020: 13.2
      facts.backend_version = hub::BackendVersion{static_cast<int>(version / 1000),
                                                  static_cast<int>(version % 1000) / 10};
      facts.backend_version_note = "LibTorch's CUDA runtime " + facts.backend_version->str();
    } catch (const c10::Error&) {
      facts.backend_version_note =
          "this LibTorch's CUDA library is not loaded, so its CUDA version is unknown";
    }
  } else if (!device.is_cpu()) {
    facts.backend = c10::DeviceTypeName(device.type(), true);
  }
  return facts;
}

TorchExtension::TorchExtension(fs::path folder, fs::path library,
                               hub::KernelBuilderMetadata metadata,
                               std::vector<std::string> schemas)
    : folder_(std::move(folder)),
      library_(std::move(library)),
      metadata_(std::move(metadata)),
      schemas_(std::move(schemas)) {}

std::shared_ptr<const TorchExtension> TorchExtension::load(const fs::path& variant_folder,
                                                           const ExtensionLoadOptions& options) {
  std::error_code ec;
  const fs::path folder = fs::weakly_canonical(variant_folder, ec);
  if (ec || !fs::is_directory(folder, ec)) {
    throw InvalidArgument(variant_folder.string() + ": no such variant folder");
  }
  const std::lock_guard<std::mutex> lock(loaded_mutex);
  if (auto it = loaded().find(folder); it != loaded().end()) return it->second;

  check_built_for_this_torch(folder);
  hub::KernelBuilderMetadata metadata = hub::read_kernel_builder_metadata(folder);
  if (options.verify_digest) {
    hub::verify_kernel_builder_variant(folder, metadata,
                                       options.link_root.empty() ? folder : options.link_root);
  }
  const fs::path library = hub::kernel_builder_extension(folder);
  hub::check_loadable_elf(library);
  // A second library registering the same namespace would throw from its static initializers,
  // inside dlopen, which no caller can catch: a copy of a loaded package is refused here.
  if (const std::vector<std::string> taken = ops_in(metadata.id); !taken.empty()) {
    std::string by;
    for (const auto& [path, ext] : loaded()) {
      if (ext->metadata().id == metadata.id) by = " by " + ext->library().string();
    }
    throw hub::PackageError(library.string() + ": its op namespace " + metadata.id +
                            " is already registered in this process" + by +
                            "; one copy of a kernel build can be loaded");
  }
  open_library(library);  // kept open: see loaded()
  std::vector<std::string> schemas = ops_in(metadata.id);
  if (schemas.empty()) {
    throw hub::PackageError(library.string() + ": registers no operator under its namespace " +
                            metadata.id + " (metadata.json id); a kernel-builder extension " +
                            "defines its ops with TORCH_LIBRARY(" + metadata.id + ", m)");
  }
  auto extension = std::make_shared<const TorchExtension>(folder, library, std::move(metadata),
                                                          std::move(schemas));
  loaded().emplace(folder, extension);
  return extension;
}

bool TorchExtension::has_op(std::string_view op) const {
  const size_t dot = op.find('.');
  const c10::OperatorName name{
      metadata_.id + "::" + std::string(op.substr(0, dot)),
      dot == std::string_view::npos ? "" : std::string(op.substr(dot + 1))};
  return c10::Dispatcher::singleton().findSchema(name).has_value();
}

c10::OperatorHandle TorchExtension::handle(std::string_view op) const {
  const size_t dot = op.find('.');
  const std::string qualified = metadata_.id + "::" + std::string(op.substr(0, dot));
  const std::string overload = dot == std::string_view::npos ? "" : std::string(op.substr(dot + 1));
  const auto found = c10::Dispatcher::singleton().findSchema({qualified, overload});
  if (!found) {
    std::string have;
    for (const std::string& s : schemas_) have += "\n  " + s;
    throw InvalidArgument(qualified + (overload.empty() ? "" : "." + overload) +
                          ": no such op in " + folder_.string() + "; it has:" + have);
  }
  return *found;
}

std::vector<c10::IValue> TorchExtension::call(std::string_view op,
                                              std::vector<c10::IValue> arguments) const {
  const c10::OperatorHandle handle = this->handle(op);
  const std::string shown = metadata_.id + "::" + std::string(op);
  const c10::FunctionSchema& schema = handle.schema();
  const std::vector<c10::Argument>& parameters = schema.arguments();
  if (arguments.size() > parameters.size()) {
    throw InvalidArgument(shown + ": takes " + std::to_string(parameters.size()) +
                          " arguments, got " + std::to_string(arguments.size()) + " (" +
                          schema_text(schema) + ")");
  }
  for (size_t i = 0; i < parameters.size(); ++i) {
    const c10::Argument& parameter = parameters[i];
    const std::string which = "argument " + std::to_string(i + 1) + " (" + parameter.name() + ")";
    if (i >= arguments.size()) {
      if (!parameter.default_value()) {
        throw InvalidArgument(shown + ": " + which + " is missing (" + schema_text(schema) + ")");
      }
      arguments.push_back(*parameter.default_value());
      continue;
    }
    if (std::string why = mismatch(parameter.type(), arguments[i]); !why.empty()) {
      throw InvalidArgument(shown + ": " + which + ": " + why + " (" + schema_text(schema) + ")");
    }
  }
  ::torch::jit::Stack stack(std::make_move_iterator(arguments.begin()),
                            std::make_move_iterator(arguments.end()));
  try {
    handle.callBoxed(stack);
  } catch (const c10::Error& e) {
    throw InvalidArgument(shown + ": " + first_line(e.what_without_backtrace()));
  }
  return std::vector<c10::IValue>(std::make_move_iterator(stack.begin()),
                                  std::make_move_iterator(stack.end()));
}

std::shared_ptr<const TorchExtension> load_hub_extension(const hub::Store& store,
                                                         const hub::RepoId& repo,
                                                         const hub::LoadOptions& options,
                                                         const c10::Device& device) {
  const hub::LoadedPackage checked = store.load(repo, system_facts(device), options);
  if (checked.kernel_builder() == nullptr) {
    throw InvalidArgument(repo.str() + " (" + checked.source().variant +
                          ") is a backplane plugin-ABI package, not a Torch extension: load it "
                          "with hub::Store::load or use_kernels");
  }
  ExtensionLoadOptions load;
  load.link_root = checked.source().link_root;
  return TorchExtension::load(checked.source().folder, load);
}

}  // namespace backplane::torch
