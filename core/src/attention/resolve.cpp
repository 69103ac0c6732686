// attn_implementation resolution (docs/device-rules.md §6): transformers 5.24 modeling_utils.py
// _check_and_adjust_attn_implementation and get_correct_attn_implementation, over the kernels
// plugins registered and the Hub kernels of the local store. attention.hpp says how kernels stand
// in for transformers' packages; the comments here mark where backplane decides per device.
#include <backplane/error.hpp>
#include <backplane/internal/text.hpp>
#include <backplane/rules/attention.hpp>

#include "flash_attention.hpp"

#include <algorithm>

namespace backplane {
namespace {

constexpr std::string_view kPaged = "paged|";
constexpr const char* kPagedWarning =
    "The `paged|` prefix is no longer needed, except for `paged|eager`. Support for paged|sdpa "
    "and paged|*flash* implementations will be removed in v5.23. Please remove the `paged|` "
    "prefix.";

bool contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// get_correct_attn_implementation's message for a model that supports flash attention, sdpa and
// flex attention (its quoting included).
std::string unsupported_message(const std::string& value) {
  std::string message = "Specified `attn_implementation=\"" + value +
                        "\"` is not supported. The only possible arguments are "
                        "`attn_implementation=\"eager\"`, `\"paged|eager\"`";
  for (int version : {2, 3, 4}) {
    message += ", `\"attn_implementation=flash_attention_" + std::to_string(version) + "\"`";
  }
  return message + ", `\"attn_implementation=sdpa\"`, `\"attn_implementation=flex_attention\"`.";
}

bool is_valid_name(std::string_view name) {
  // ["eager"] + ALL_ATTENTION_FUNCTIONS.valid_keys() in transformers 5.24.
  for (const char* valid : {"eager", "sdpa", "flash_attention_2", "flash_attention_3",
                            "flash_attention_4", "flex_attention", "paged|eager"}) {
    if (name == valid) return true;
  }
  return false;
}

// Why `kernel` cannot serve `device` for this environment; empty when it can.
std::string kernel_refusal(const KernelInfo& kernel, const DeviceInfo& device,
                           const AttentionEnvironment& env) {
  if (kernel.plugin != device.plugin) {
    return kernel.op + "/" + kernel.implementation + " of plugin " + kernel.plugin +
           " does not serve " + device.device.str() + ", whose devices come from plugin " +
           device.plugin;
  }
  if (std::string why = kernel_mismatch(kernel, device); !why.empty()) return why;
  if (env.dtype && !kernel.dtypes.empty() && !contains(kernel.dtypes, *env.dtype)) {
    return kernel.op + "/" + kernel.implementation + " on " + kernel.device_type + " takes " +
           internal::join(kernel.dtypes) + ", not " + *env.dtype;
  }
  if (env.head_dim && kernel.max_head_dim > 0 && *env.head_dim > kernel.max_head_dim) {
    return kernel.op + "/" + kernel.implementation + " on " + kernel.device_type +
           " takes head dims up to " + std::to_string(kernel.max_head_dim) + ", not " +
           std::to_string(*env.head_dim);
  }
  return {};
}

struct NativeLookup {
  const KernelInfo* runnable = nullptr;
  const KernelInfo* for_device_type = nullptr;  // a kernel of this name for the device's type
  std::string why_not;                          // when nothing is runnable
};

NativeLookup find_native(std::string_view implementation, const DeviceInfo& device,
                         const std::vector<KernelInfo>& kernels, const AttentionEnvironment& env) {
  NativeLookup lookup;
  std::vector<std::string> refusals;
  std::vector<std::string> elsewhere;
  for (const KernelInfo& kernel : kernels) {
    if (kernel.op != kAttentionForward || kernel.implementation != implementation) continue;
    if (kernel.device_type != device.device.type()) {
      elsewhere.push_back(kernel.device_type + " (plugin " + kernel.plugin + ")");
      continue;
    }
    if (lookup.for_device_type == nullptr || kernel.plugin == device.plugin) {
      lookup.for_device_type = &kernel;
    }
    std::string why = kernel_refusal(kernel, device, env);
    if (why.empty()) {
      lookup.runnable = &kernel;
      return lookup;
    }
    refusals.push_back(std::move(why));
  }
  if (!refusals.empty()) {
    lookup.why_not = internal::join(refusals, "; ");
  } else {
    lookup.why_not = "no plugin registers an attention_forward kernel '" +
                     std::string(implementation) + "' for " + device.device.type();
    if (!elsewhere.empty()) lookup.why_not += " (it runs on " + internal::join(elsewhere) + ")";
  }
  return lookup;
}

bool any_kernel_named(std::string_view implementation, const std::vector<KernelInfo>& kernels) {
  return std::any_of(kernels.begin(), kernels.end(), [&](const KernelInfo& k) {
    return k.op == kAttentionForward && k.implementation == implementation;
  });
}

bool hub_installed(const AttentionEnvironment& env, const HubKernelId& id) {
  return env.hub_installed && env.hub_installed(id);
}

std::string not_in_store(const HubKernelId& id) {
  return "the Hub kernel " + id.str() +
         " is not in the local kernel store; install it with `kernel-hub install " + id.str() + "`";
}

// The Hub repo serves `device` unless transformers' table lists the builds it ships without it.
bool hub_builds_for(const HubKernelId& id, const DeviceInfo& device) {
  const std::vector<std::string>* types = detail::hub_kernel_device_types(id.repo);
  return types == nullptr || contains(*types, device.device.type());
}

AttentionResolution native(AttentionResolution resolution, std::string implementation,
                           const KernelInfo& kernel) {
  resolution.implementation = std::move(implementation);
  resolution.source = AttentionResolution::Source::kNative;
  resolution.kernel = kernel;
  return resolution;
}

AttentionResolution hub(AttentionResolution resolution, const HubKernelId& id) {
  resolution.implementation = id.str();
  resolution.source = AttentionResolution::Source::kHub;
  resolution.hub = id;
  return resolution;
}

// _flash_attn_import_error: why flash_attention_N cannot run, in transformers' order (package,
// supported devices on this machine, compute capability), then backplane's per-device checks.
[[noreturn]] void throw_flash_error(const detail::FlashAttentionVersion& flash,
                                    const DeviceInfo& device,
                                    const std::vector<KernelInfo>& kernels,
                                    const AttentionEnvironment& env, const NativeLookup& lookup) {
  const std::string preface = detail::flash_preface(flash.version) + " ";
  const std::string name = "FlashAttention" + std::to_string(flash.version);
  if (!any_kernel_named(flash.implementation, kernels)) {
    throw Unavailable(preface + "the package for " + name + " doesn't seem to be installed.");
  }
  const bool machine_has_device =
      std::any_of(env.available_device_types.begin(), env.available_device_types.end(),
                  [&](const std::string& type) {
                    return detail::among_torch_devices(type, flash.supported_devices);
                  });
  const std::string supported = detail::python_tuple(flash.supported_devices);
  // transformers' words when it runs on the CPU; a device of another type is named instead (a
  // plugin's zpu:0 is not "CPU").
  if (!machine_has_device && device.device.type() == "cpu") {
    throw Unavailable(preface + name +
                      " is not available on CPU. Please make sure you are on any of the "
                      "supported devices: " +
                      supported + ".");
  }
  // transformers asks the machine; backplane asks the device it resolves for.
  if (!detail::among_torch_devices(device.device.type(), flash.supported_devices)) {
    throw Unavailable(preface + name + " is not available on " + device.device.str() +
                      ". Please make sure you are on any of the supported devices: " + supported +
                      ".");
  }
  if (device.device.type() == "cuda" && device.compute_capability) {
    ComputeCapability min = flash.cuda_min;
    if (lookup.for_device_type && lookup.for_device_type->min_compute_capability &&
        min < *lookup.for_device_type->min_compute_capability) {
      min = *lookup.for_device_type->min_compute_capability;
    }
    if (*device.compute_capability < min) {
      throw Unavailable(preface +
                        detail::capability_message(flash.version, min, *device.compute_capability));
    }
  }
  throw Unavailable(preface + lookup.why_not);
}

AttentionResolution resolve_flash(AttentionResolution resolution,
                                  const detail::FlashAttentionVersion& flash,
                                  const DeviceInfo& device, const std::vector<KernelInfo>& kernels,
                                  const AttentionEnvironment& env) {
  const NativeLookup lookup = find_native(flash.implementation, device, kernels, env);
  if (lookup.runnable) {
    if (env.dtype && *env.dtype != "float16" && *env.dtype != "bfloat16") {
      resolution.warnings.push_back(
          detail::flash_dtype_warning(flash.version, env.model_class, *env.dtype));
    }
    return native(std::move(resolution), flash.implementation, *lookup.runnable);
  }
  // No usable "package": the Hub kernel that replaces it, unless NPUs are about (transformers
  // keeps its own NPU path there).
  const std::optional<HubKernelId> fallback =
      flash_attention_hub_fallback(flash.implementation, device.device.type());
  const bool npu_here = contains(env.available_device_types, "npu");
  if (fallback && !npu_here && hub_installed(env, *fallback) && hub_builds_for(*fallback, device)) {
    // transformers loads the Hub kernel whatever the capability and fails at the first call;
    // backplane holds it to the same requirement as the package.
    if (device.device.type() == "cuda" && device.compute_capability &&
        *device.compute_capability < flash.cuda_min) {
      throw Unavailable(
          detail::flash_preface(flash.version) + " " +
          detail::capability_message(flash.version, flash.cuda_min, *device.compute_capability));
    }
    // On XPU the Hub kernel is the native FlashAttention2 for transformers: no warning.
    if (!(flash.version == 2 && contains(env.available_device_types, "xpu"))) {
      resolution.warnings.push_back("You do not have `flash_attn` installed, using `" +
                                    fallback->str() + "` from the `kernels` library instead!");
    }
    resolution.notes.push_back("no native " + flash.implementation + " kernel can run on " +
                               device.device.str() + " (" + lookup.why_not + "); the Hub kernel " +
                               fallback->str() + " replaces it");
    return hub(std::move(resolution), *fallback);
  }
  throw_flash_error(flash, device, kernels, env, lookup);
}

AttentionResolution resolve_hub_id(AttentionResolution resolution, std::string_view text,
                                   const DeviceInfo& device, const AttentionEnvironment& env) {
  const HubKernelId id = HubKernelId::parse(text);
  if (!hub_installed(env, id)) throw Unavailable(not_in_store(id));
  if (!hub_builds_for(id, device)) {
    throw Unavailable("the Hub kernel " + id.repo + " ships builds for " +
                      internal::join(*detail::hub_kernel_device_types(id.repo)) +
                      " only, not for " + device.device.str());
  }
  return hub(std::move(resolution), id);
}

AttentionResolution resolve_native_name(AttentionResolution resolution,
                                        const std::string& implementation,
                                        std::string_view kernel_name, const DeviceInfo& device,
                                        const std::vector<KernelInfo>& kernels,
                                        const AttentionEnvironment& env) {
  const NativeLookup lookup = find_native(kernel_name, device, kernels, env);
  if (!lookup.runnable) {
    throw Unavailable("attn_implementation \"" + implementation + "\" cannot run on " +
                      device.device.str() + ": " + lookup.why_not);
  }
  return native(std::move(resolution), implementation, *lookup.runnable);
}

}  // namespace

const char* to_string(AttentionResolution::Source source) {
  return source == AttentionResolution::Source::kHub ? "hub" : "native";
}

const std::vector<std::string>& attention_implementation_names() {
  static const std::vector<std::string> names = {"eager",
                                                 "sdpa",
                                                 "flash_attention_2",
                                                 "flash_attention_3",
                                                 "flash_attention_4",
                                                 "flex_attention",
                                                 "paged|eager",
                                                 "paged|sdpa",
                                                 "paged|flash_attention_2",
                                                 "paged|flash_attention_3",
                                                 "paged|flash_attention_4"};
  return names;
}

AttentionResolution resolve_attention(const DeviceInfo& device,
                                      const std::vector<KernelInfo>& kernels,
                                      std::optional<std::string_view> requested,
                                      const AttentionEnvironment& env) {
  AttentionResolution resolution;
  resolution.device = device.device;
  resolution.requested = requested ? std::string(*requested) : std::string();
  std::string name = resolution.requested;
  if (requested && name.rfind(kPaged, 0) == 0 && name != "paged|eager") {
    resolution.warnings.emplace_back(kPagedWarning);
    name.erase(0, kPaged.size());
  }
  if (const detail::FlashAttentionVersion* flash = detail::find_flash_attention(name)) {
    return resolve_flash(std::move(resolution), *flash, device, kernels, env);
  }
  if (HubKernelId::matches(name)) return resolve_hub_id(std::move(resolution), name, device, env);

  const std::string applicable = requested ? name : std::string("sdpa");
  if (!is_valid_name(applicable)) throw InvalidArgument(unsupported_message(applicable));
  if (applicable == "paged|eager") {
    return resolve_native_name(std::move(resolution), applicable, "eager", device, kernels, env);
  }
  if (applicable == "sdpa" && !requested) {
    // The default: sdpa when it can run, else eager (get_correct_attn_implementation).
    const NativeLookup sdpa = find_native("sdpa", device, kernels, env);
    if (sdpa.runnable) return native(std::move(resolution), "sdpa", *sdpa.runnable);
    const NativeLookup eager = find_native("eager", device, kernels, env);
    if (!eager.runnable) {
      throw Unavailable("neither the default sdpa nor its fallback eager can run on " +
                        device.device.str() + ": " + sdpa.why_not + "; " + eager.why_not);
    }
    resolution.notes.push_back("the default sdpa fell back to eager: " + sdpa.why_not);
    return native(std::move(resolution), "eager", *eager.runnable);
  }
  // eager, sdpa and flex_attention: an explicit request runs its own kernel or fails.
  return resolve_native_name(std::move(resolution), applicable, applicable, device, kernels, env);
}

}  // namespace backplane
