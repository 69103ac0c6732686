// Which attention implementation runs: transformers' attn_implementation rules
// (docs/device-rules.md §6; transformers modeling_utils.py _check_and_adjust_attn_implementation,
// get_correct_attn_implementation, _flash_attn_import_error) applied to the kernels that plugins
// registered and to the Hub kernels in the local kernel store.
//
// resolve_attention is a pure function over plain data so that tables can test every rule; the
// Runtime overload fills its inputs from the registry snapshot.
//
// How our kernels stand in for transformers' packages:
//   - A kernel `flash_attention_N` registered by any loaded plugin, for any device type, means
//     "the package for FlashAttentionN is installed" (transformers' check is machine-wide too).
//     The device and compute-capability checks then decide, as they do after a package import.
//   - No such kernel means "not installed": the Hub kernel that replaces the package is used when
//     the local kernel store has it (the warning of transformers), otherwise the
//     FlashAttention error chain ends in "... doesn't seem to be installed."
//   - sdpa and eager are kernels too: an explicit "sdpa" with no runnable sdpa kernel is an
//     error; the default falls back to eager (a note says why); eager with no runnable kernel is
//     an error (transformers always has its Python eager).
//
// Where backplane deliberately differs from transformers 5.24 (tests/attention/cases.json
// asserts each one against transformers itself):
//   - Compute capability: transformers checks it only when the package is installed but
//     unusable, which cannot happen on a CUDA machine, and loads Hub kernels whatever the
//     capability (they fail at the first call). Here the native kernel and the Hub replacement
//     must meet docs/device-rules.md §6 (FA2 and FA3 8.0, FA4 9.0, or the kernel's own higher
//     minimum), reported in transformers' capability message.
//   - Per device: transformers asks whether the machine has a supported device; a flash kernel
//     resolved for the CPU of a CUDA machine is an error here ("... is not available on cpu:0").
//   - dtype and head dim: a kernel that lists its dtypes or a maximum head dim refuses others
//     (transformers only warns about dtypes). The "without specifying a dtype" warning is left
//     out: an unknown dtype here means the caller did not say, not that the model has none.
//   - flex_attention needs a registered kernel; Hub kernels come from the local kernel store,
//     and a missing one is named with how to install it, not fetched.
//   - The ROCm Hub repos are chosen per device (rocm), not per process; the NPU and XPU
//     FlashAttention2 paths of transformers keep only their visible effects (no Hub fallback
//     while NPUs are present; no warning for the XPU Hub kernel).
#pragma once

#include <backplane/export.hpp>
#include <backplane/runtime/device_info.hpp>
#include <backplane/runtime/kernels.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

// A Hub kernel id: org/repo[@revision][:function] ("kernels-community/flash-attn2",
// "kernels-community/flash-attn3@v1:flash_attn_func"). transformers' is_kernel() pattern: no part
// may contain '/' or ':', and each given part is non-empty.
struct HubKernelId {
  std::string repo;  // "org/repo"
  std::optional<std::string> revision;
  std::optional<std::string> function;

  // Throws InvalidArgument naming the text and the accepted form org/repo[@revision][:function].
  BACKPLANE_API static HubKernelId parse(std::string_view text);
  // Whether `text` has the form of a Hub kernel id (transformers' is_kernel()).
  BACKPLANE_API static bool matches(std::string_view text);
  BACKPLANE_API std::string str() const;
  friend bool operator==(const HubKernelId& a, const HubKernelId& b) {
    return a.repo == b.repo && a.revision == b.revision && a.function == b.function;
  }
};

// What the rules need beyond the device itself.
struct AttentionEnvironment {
  // Device types with a usable device on this machine ("cuda", "xpu", ...): transformers'
  // "supported devices" checks (is_torch_cuda_available, ...) are machine-wide, not per device.
  std::vector<std::string> available_device_types;
  // The model's dtype ("float16", "bfloat16", "float32") when known: flash attention warns on
  // other dtypes, and a kernel that lists its dtypes must list it.
  std::optional<std::string> dtype;
  // The head dimension when known: a kernel with a max_head_dim must allow it.
  std::optional<int> head_dim;
  // The model's class name for transformers' messages ("LlamaForCausalLM"); empty: "the model".
  std::string model_class;
  // Whether the local kernel store holds this Hub kernel. Empty: nothing is installed.
  std::function<bool(const HubKernelId&)> hub_installed;
};

struct AttentionResolution {
  enum class Source { kNative, kHub };

  Device device{"cpu", 0};     // the device it was resolved for
  std::string requested;       // as asked; "" when nothing was asked (the default)
  std::string implementation;  // what runs: "sdpa", "eager", "flash_attention_2", ... or a Hub id
  Source source = Source::kNative;
  std::optional<KernelInfo> kernel;   // kNative: the plugin's kernel
  std::optional<HubKernelId> hub;     // kHub: the repo that serves it
  std::vector<std::string> warnings;  // transformers' warnings, word for word
  std::vector<std::string> notes;     // why ("the default sdpa fell back to eager: ...")
};

BACKPLANE_API const char* to_string(AttentionResolution::Source source);  // "native" | "hub"

// Every value transformers accepts for attn_implementation by name, in the order hwprobe shows
// them: eager, sdpa, flash_attention_2/3/4, flex_attention, then the "paged|" variants.
BACKPLANE_API const std::vector<std::string>& attention_implementation_names();

// The Hub kernel that replaces a missing flash-attention package on `device_type`
// (transformers' FLASH_ATTN_KERNEL_FALLBACK; "rocm" picks the ROCm builds); nullopt for names
// with no Hub replacement.
BACKPLANE_API std::optional<HubKernelId> flash_attention_hub_fallback(
    std::string_view implementation, std::string_view device_type);

// Resolves `requested` (nullopt: the default) for `device` among `kernels` (every kernel that
// loaded plugins registered, as Runtime::kernels() returns them). Throws InvalidArgument for a
// value transformers rejects (its exact message), Unavailable with transformers' messages when
// the implementation cannot run here (FlashAttention error chain, a Hub kernel missing from the
// local store, no runnable sdpa/eager kernel).
BACKPLANE_API AttentionResolution resolve_attention(const DeviceInfo& device,
                                                    const std::vector<KernelInfo>& kernels,
                                                    std::optional<std::string_view> requested,
                                                    const AttentionEnvironment& env);

// What a Runtime caller may add to the environment it builds from its snapshot.
struct AttentionQuery {
  std::optional<std::string> dtype;
  std::optional<int> head_dim;
  std::string model_class;
  std::function<bool(const HubKernelId&)> hub_installed;  // empty: nothing installed
};

}  // namespace backplane
