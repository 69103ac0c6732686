// What the plugins' attention_forward entries share (backends/cpu, backends/cuda): the ABI's
// check of the call's arguments, the library's tensors taken from them, the library's status
// (or an allocation failure) turned into the host's, and registering each entry. Header-only:
// it needs the attention library (kernels/attention) that each of those plugins links.
#pragma once

#include <attention/attention.hpp>
#include <backplane/plugin_sdk.hpp>
#include <common/abi_status.hpp>

#include <exception>
#include <new>
#include <string>

namespace backplane::backends {

// One call of an attention_forward entry: checks `args`, then `run(tensors, *args)`, which
// returns the library's Status. `context` is the sdk::Host the entry was registered with.
template <class Run>
bp_status* run_attention_forward(void* context, const bp_attention_args* args, Run run) noexcept {
  const auto* host = static_cast<const sdk::Host*>(context);
  if (std::string why = sdk::args_size_error("attention_forward", args, BP_ATTENTION_ARGS_SIZE_1_3,
                                             "1.3", "bp_attention_args");
      !why.empty()) {
    return host->status(BP_INVALID_ARGUMENT, why);
  }
  try {
    attention::Tensors tensors;
    tensors.query = args->query;
    tensors.key = args->key;
    tensors.value = args->value;
    tensors.mask = args->mask;
    tensors.output = args->output;
    return kernels::to_bp_status(host, run(tensors, *args));
  } catch (const std::bad_alloc&) {  // the library does not throw; this frame might allocate
    return host->status(BP_OUT_OF_MEMORY, "attention_forward: out of memory");
  } catch (const std::exception& e) {
    return host->status(BP_INTERNAL, std::string("attention_forward: ") + e.what());
  } catch (...) {
    return host->status(BP_INTERNAL, "attention_forward: an unknown exception");
  }
}

// Registers `kernel` (implementation, device type, requirements filled in by the plugin) as an
// attention_forward entry running `function` with `host` as its context. Returns false, having
// said so in the debug log, when the host takes no kernels: the plugin then registers no more.
inline bool add_attention_kernel(sdk::Registrar& registrar, const sdk::Host* host,
                                 sdk::KernelSpec kernel, bp_attention_forward_fn function) {
  kernel.op = "attention_forward";
  kernel.function = reinterpret_cast<void (*)(void)>(function);
  kernel.context = const_cast<sdk::Host*>(host);
  if (registrar.add(kernel)) return true;
  host->debug("the host takes no kernels (ABI older than 1.3): attention not registered");
  return false;
}

}  // namespace backplane::backends
