// C++ helper for plugin authors: write a class, end the file with BACKPLANE_PLUGIN(...), and
// the helper builds the C table of plugin.h around it. Every call from the host goes through a
// trampoline that turns exceptions into bp_status, so no exception can cross the ABI.
//
//   class MyPlugin {
//    public:
//     explicit MyPlugin(backplane::sdk::Host host);        // called by init
//     void register_all(backplane::sdk::Registrar& reg);   // add device types and devices
//     // optional: std::optional<backplane::sdk::MemoryInfo> memory_info(std::string_view type,
//     //                                                                  int index);
//   };
//   BACKPLANE_PLUGIN(MyPlugin, "my_plugin", "1.0.0")
//
// Header-only, C++17, depends only on plugin.h and the standard library.
#pragma once

#include <backplane/plugin.h>

#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace backplane::sdk {

// Thrown inside a plugin to return a specific status code; any other exception becomes
// BP_INTERNAL with its what() text.
class Error : public std::runtime_error {
 public:
  Error(bp_status_code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  bp_status_code code() const { return code_; }

 private:
  bp_status_code code_;
};

// The host's services, valid from init until shutdown returns.
class Host {
 public:
  explicit Host(const bp_host_api* api) : api_(api) {}
  void log(bp_log_level level, const std::string& message) const {
    api_->log(api_->context, level, message.c_str());
  }
  void info(const std::string& message) const { log(BP_LOG_INFO, message); }
  void debug(const std::string& message) const { log(BP_LOG_DEBUG, message); }
  bp_status* status(bp_status_code code, const std::string& message) const {
    return api_->status_new(api_->context, code, message.c_str());
  }
  uint32_t abi_minor() const { return api_->abi_minor; }
  // Whether the host passes settings (ABI 1.5 and later).
  bool has_settings() const {
    return api_->struct_size >= BP_STRUCT_SIZE(bp_host_api, setting) && api_->setting != nullptr;
  }
  // The host application's setting `key` for this plugin; nullopt when it gave none or is older
  // than ABI 1.5.
  std::optional<std::string> setting(const std::string& key) const {
    if (!has_settings()) return std::nullopt;
    const char* value = api_->setting(api_->context, key.c_str());
    return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
  }

 private:
  const bp_host_api* api_;
};

// Why an op's args struct cannot be read, for the status a kernel returns: NULL, or a
// struct_size below `needed` (the BP_*_ARGS_SIZE_* of the ABI version `version` that defines the
// fields the op reads). Empty when it can be read. `type` names the struct for the fix:
//   "rms_norm: args.struct_size is 8, smaller than ABI 1.4's 56; set it to
//    sizeof(bp_rms_norm_args)"
template <class Args>
std::string args_size_error(const char* op, const Args* args, size_t needed, const char* version,
                            const char* type) {
  if (args == nullptr) return std::string(op) + ": args is NULL";
  if (args->struct_size >= needed) return {};
  return std::string(op) + ": args.struct_size is " + std::to_string(args->struct_size) +
         ", smaller than ABI " + version + "'s " + std::to_string(needed) + "; set it to sizeof(" +
         type + ")";
}

struct DeviceTypeSpec {
  std::string name;
  std::string hub_key;             // empty: same as name
  std::string collective_backend;  // empty: none
  int training_priority = 0;       // 0: never chosen automatically for training
  uint32_t flags = 0;              // bp_device_type_flag bits
  bool available = false;
  std::string unavailable_reason;  // required when !available
};

using PropertyValue = std::variant<std::string, int64_t, double, bool, std::vector<std::string>>;

struct Property {
  std::string name;
  PropertyValue value;
};

struct DeviceSpec {
  std::string type;
  int index = 0;
  int physical_index = -1;
  std::string name;
  std::string vendor;
  std::string uuid;
  std::string pci_bus_id;
  std::string arch;
  int compute_capability_major = -1;
  int compute_capability_minor = -1;
  uint64_t memory_total = 0;
  uint64_t capabilities = 0;  // bp_device_capability bits
  bool simulated = false;
  std::vector<Property> properties;
  std::string visibility_variable;  // empty: no variable mapped physical to logical
};

struct MemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// A kernel (ABI 1.3). `function` has the op's type (bp_attention_forward_fn for
// "attention_forward"; from ABI 1.4 bp_rms_norm_fn for "rms_norm", bp_gated_activation_fn for
// "silu_and_mul", "gelu_and_mul" and "gelu_tanh_and_mul", bp_rotary_embedding_fn for
// "rotary_embedding"); `context` comes back to it on every call and must outlive the plugin's
// state (the plugin object itself is a good context).
struct KernelSpec {
  std::string op;
  std::string implementation;
  std::string device_type;
  int min_compute_capability_major = -1;
  int min_compute_capability_minor = 0;
  std::vector<std::string> dtypes;  // empty: any
  int max_head_dim = 0;             // 0: no limit
  void (*function)(void) = nullptr;
  void* context = nullptr;
};

// A default layer kernel (ABI 1.4): see bp_layer_kernel_desc.
struct LayerKernelSpec {
  std::string layer;       // "RMSNorm"
  std::string device_key;  // the Hub key of a device type this plugin registered
  uint32_t mode = BP_KERNEL_MODE_FALLBACK;
  int min_capability = -1;  // cuda and rocm: major * 10 + minor; -1: no minimum
  int max_capability = -1;  // -1: no maximum
  std::string repo;         // "org/repo"
  std::string kernel_layer;
  std::string revision;  // empty: the repo's default
  int version = 0;       // 0: none
};

namespace detail {
inline const char* c_str_or_null(const std::string& s) {
  return s.empty() ? nullptr : s.c_str();
}

// Carries a status from the host through C++ code back to the trampoline unchanged.
struct HostStatus {
  bp_status* status;
};
}  // namespace detail

// The host's registrar, valid during register_all. A refused registration throws, carrying the
// host's status, which init then returns.
class Registrar {
 public:
  explicit Registrar(const bp_registrar* registrar) : registrar_(registrar) {}

  // Whether the host takes kernels (ABI 1.3 and later).
  bool accepts_kernels() const {
    return registrar_->struct_size >= BP_STRUCT_SIZE(bp_registrar, add_kernel) &&
           registrar_->add_kernel != nullptr;
  }

  // Registers a kernel; false (and nothing registered) when the host is older than ABI 1.3.
  bool add(const KernelSpec& spec) const {
    if (!accepts_kernels()) return false;
    std::vector<const char*> dtypes;
    for (const std::string& d : spec.dtypes) dtypes.push_back(d.c_str());
    bp_kernel_desc desc{};
    desc.struct_size = sizeof desc;
    desc.op = spec.op.c_str();
    desc.implementation = spec.implementation.c_str();
    desc.device_type = spec.device_type.c_str();
    desc.min_compute_capability_major = spec.min_compute_capability_major;
    desc.min_compute_capability_minor = spec.min_compute_capability_minor;
    desc.dtypes = dtypes.data();
    desc.dtype_count = dtypes.size();
    desc.max_head_dim = spec.max_head_dim;
    desc.function = spec.function;
    desc.context = spec.context;
    check(registrar_->add_kernel(registrar_->context, &desc));
    return true;
  }

  // Whether the host takes default layer kernels (ABI 1.4 and later).
  bool accepts_layer_kernels() const {
    return registrar_->struct_size >= BP_STRUCT_SIZE(bp_registrar, add_layer_kernel) &&
           registrar_->add_layer_kernel != nullptr;
  }

  // Registers a default layer kernel; false (and nothing registered) when the host is older
  // than ABI 1.4.
  bool add(const LayerKernelSpec& spec) const {
    if (!accepts_layer_kernels()) return false;
    bp_layer_kernel_desc desc{};
    desc.struct_size = sizeof desc;
    desc.layer = spec.layer.c_str();
    desc.device_key = spec.device_key.c_str();
    desc.mode = spec.mode;
    desc.min_capability = spec.min_capability;
    desc.max_capability = spec.max_capability;
    desc.repo = spec.repo.c_str();
    desc.kernel_layer = spec.kernel_layer.c_str();
    desc.revision = detail::c_str_or_null(spec.revision);
    desc.version = spec.version;
    check(registrar_->add_layer_kernel(registrar_->context, &desc));
    return true;
  }

  void add(const DeviceTypeSpec& spec) const {
    bp_device_type_desc desc{};
    desc.struct_size = sizeof desc;
    desc.name = spec.name.c_str();
    desc.hub_key = detail::c_str_or_null(spec.hub_key);
    desc.collective_backend = detail::c_str_or_null(spec.collective_backend);
    desc.training_priority = spec.training_priority;
    desc.flags = spec.flags;
    desc.available = spec.available ? 1 : 0;
    desc.unavailable_reason = detail::c_str_or_null(spec.unavailable_reason);
    check(registrar_->add_device_type(registrar_->context, &desc));
  }

  void add(const DeviceSpec& spec) const {
    std::vector<std::vector<const char*>> lists;  // keeps string-list pointers alive
    lists.reserve(spec.properties.size());
    std::vector<bp_property> properties;
    properties.reserve(spec.properties.size());
    for (const Property& p : spec.properties) properties.push_back(to_c(p, lists));

    bp_device_desc desc{};
    desc.struct_size = sizeof desc;
    desc.type = spec.type.c_str();
    desc.index = spec.index;
    desc.physical_index = spec.physical_index;
    desc.name = spec.name.c_str();
    desc.vendor = detail::c_str_or_null(spec.vendor);
    desc.uuid = detail::c_str_or_null(spec.uuid);
    desc.pci_bus_id = detail::c_str_or_null(spec.pci_bus_id);
    desc.arch = detail::c_str_or_null(spec.arch);
    desc.compute_capability_major = spec.compute_capability_major;
    desc.compute_capability_minor = spec.compute_capability_minor;
    desc.memory_total = spec.memory_total;
    desc.capabilities = spec.capabilities;
    desc.simulated = spec.simulated ? 1 : 0;
    desc.properties = properties.data();
    desc.property_count = properties.size();
    desc.visibility_variable = detail::c_str_or_null(spec.visibility_variable);
    check(registrar_->add_device(registrar_->context, &desc));
  }

 private:
  static void check(bp_status* status) {
    if (status != nullptr) throw detail::HostStatus{status};
  }

  static bp_property to_c(const Property& p, std::vector<std::vector<const char*>>& lists) {
    bp_property out{};
    out.name = p.name.c_str();
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            out.kind = BP_VALUE_STRING;
            out.value.string = v.c_str();
          } else if constexpr (std::is_same_v<T, int64_t>) {
            out.kind = BP_VALUE_INT64;
            out.value.int64 = v;
          } else if constexpr (std::is_same_v<T, double>) {
            out.kind = BP_VALUE_FLOAT64;
            out.value.float64 = v;
          } else if constexpr (std::is_same_v<T, bool>) {
            out.kind = BP_VALUE_BOOL;
            out.value.boolean = v ? 1 : 0;
          } else {
            std::vector<const char*>& items = lists.emplace_back();
            for (const std::string& s : v) items.push_back(s.c_str());
            out.kind = BP_VALUE_STRING_LIST;
            out.value.string_list.items = items.data();
            out.value.string_list.count = items.size();
          }
        },
        p.value);
    return out;
  }

  const bp_registrar* registrar_;
};

namespace detail {

template <class P, class = void>
struct HasMemoryInfo : std::false_type {};
template <class P>
struct HasMemoryInfo<
    P, std::void_t<decltype(std::declval<P&>().memory_info(std::string_view{}, int{}))>>
    : std::true_type {};

// Runs fn, turning every exception into a status made by the host. Never throws.
template <class Fn>
bp_status* guarded(const bp_host_api* host, Fn&& fn) noexcept {
  try {
    fn();
    return nullptr;
  } catch (const HostStatus& s) {
    return s.status;
  } catch (const Error& e) {
    return host->status_new(host->context, e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return host->status_new(host->context, BP_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return host->status_new(host->context, BP_INTERNAL, e.what());
  } catch (...) {
    return host->status_new(host->context, BP_INTERNAL, "unknown exception in plugin");
  }
}

template <class P>
struct State {
  const bp_host_api* host;
  P plugin;
};

template <class P>
struct Adapter {
  static bp_status* init(const bp_host_api* host, const bp_registrar* registrar,
                         bp_plugin_state** out) noexcept {
    State<P>* state = nullptr;
    bp_status* status = guarded(host, [&] {
      state = new State<P>{host, P(Host(host))};
      Registrar reg(registrar);
      state->plugin.register_all(reg);
    });
    if (status != nullptr) {
      delete state;
      return status;
    }
    *out = reinterpret_cast<bp_plugin_state*>(state);
    return nullptr;
  }

  static void shutdown(bp_plugin_state* opaque) noexcept {
    auto* state = reinterpret_cast<State<P>*>(opaque);
    try {
      delete state;
    } catch (...) {  // a destructor that throws must not cross the ABI
    }
  }

  static bp_status* memory_info(bp_plugin_state* opaque, const char* type, int32_t index,
                                uint64_t* free_bytes, uint64_t* total_bytes) noexcept {
    auto* state = reinterpret_cast<State<P>*>(opaque);
    return guarded(state->host, [&] {
      if constexpr (HasMemoryInfo<P>::value) {
        std::optional<MemoryInfo> info = state->plugin.memory_info(type, index);
        if (!info) {
          throw Error(BP_NOT_FOUND, std::string("no device ") + type + ":" + std::to_string(index) +
                                        " in this plugin");
        }
        *free_bytes = info->free_bytes;
        *total_bytes = info->total_bytes;
      }
    });
  }

  static const bp_plugin_api* table(const char* name, const char* version) {
    static const bp_plugin_api api = [&] {
      bp_plugin_api a{};
      a.struct_size = sizeof a;
      a.abi_major = BP_ABI_VERSION_MAJOR;
      a.abi_minor = BP_ABI_VERSION_MINOR;
      a.name = name;
      a.version = version;
      a.init = &Adapter::init;
      a.shutdown = &Adapter::shutdown;
      a.memory_info = HasMemoryInfo<P>::value ? &Adapter::memory_info : nullptr;
      return a;
    }();
    return &api;
  }
};

}  // namespace detail
}  // namespace backplane::sdk

// Defines the plugin's one exported symbol for class PLUGIN. NAME and VERSION are string
// literals; NAME must equal the manifest's plugin name.
#define BACKPLANE_PLUGIN(PLUGIN, NAME, VERSION)                              \
  extern "C" BP_PLUGIN_EXPORT const bp_plugin_api* backplane_plugin_get_api( \
      uint32_t host_abi_major, uint32_t /*host_abi_minor*/) {                \
    if (host_abi_major != BP_ABI_VERSION_MAJOR) return nullptr;              \
    return ::backplane::sdk::detail::Adapter<PLUGIN>::table(NAME, VERSION);  \
  }
