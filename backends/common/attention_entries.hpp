// What the plugins' attention_forward and attention_backward entries share (backends/cpu,
// backends/cuda): the ABI's check of the call's arguments, the library's tensors taken from
// them, the library's status (or an allocation failure) turned into the host's, and registering
// each entry. Header-only: it needs the attention library (kernels/attention) that each of
// those plugins links.
#pragma once

#include <attention/attention.hpp>
#include <backplane/plugin_sdk.hpp>
#include <common/abi_status.hpp>

#include <exception>
#include <new>
#include <string>

namespace backplane::backends {

// The library's status of `run()`, or the host's for what `run` threw (the library does not
// throw; the frame around it might allocate).
template <class Run>
bp_status* guarded_entry(const sdk::Host* host, const char* op, Run run) noexcept {
  try {
    return kernels::to_bp_status(host, run());
  } catch (const std::bad_alloc&) {
    return host->status(BP_OUT_OF_MEMORY, std::string(op) + ": out of memory");
  } catch (const std::exception& e) {
    return host->status(BP_INTERNAL, std::string(op) + ": " + e.what());
  } catch (...) {
    return host->status(BP_INTERNAL, std::string(op) + ": an unknown exception");
  }
}

// One call of an attention_forward entry: checks `args`, then `run(tensors, *args)`, which
// returns the library's Status. `context` is the sdk::Host the entry was registered with. The
// logsumexp output is read from args of ABI 1.6 on.
template <class Run>
bp_status* run_attention_forward(void* context, const bp_attention_args* args, Run run) noexcept {
  const auto* host = static_cast<const sdk::Host*>(context);
  if (std::string why = sdk::args_size_error("attention_forward", args, BP_ATTENTION_ARGS_SIZE_1_3,
                                             "1.3", "bp_attention_args");
      !why.empty()) {
    return host->status(BP_INVALID_ARGUMENT, why);
  }
  return guarded_entry(host, "attention_forward", [&] {
    attention::Tensors tensors;
    tensors.query = args->query;
    tensors.key = args->key;
    tensors.value = args->value;
    tensors.mask = args->mask;
    tensors.output = args->output;
    if (args->struct_size >= BP_ATTENTION_ARGS_SIZE_1_6) tensors.logsumexp = args->logsumexp;
    return run(tensors, *args);
  });
}

// One call of an attention_backward entry, as run_attention_forward.
template <class Run>
bp_status* run_attention_backward(void* context, const bp_attention_backward_args* args,
                                  Run run) noexcept {
  const auto* host = static_cast<const sdk::Host*>(context);
  if (std::string why =
          sdk::args_size_error("attention_backward", args, BP_ATTENTION_BACKWARD_ARGS_SIZE_1_6,
                               "1.6", "bp_attention_backward_args");
      !why.empty()) {
    return host->status(BP_INVALID_ARGUMENT, why);
  }
  return guarded_entry(host, "attention_backward", [&] {
    attention::BackwardTensors tensors;
    tensors.query = args->query;
    tensors.key = args->key;
    tensors.value = args->value;
    tensors.mask = args->mask;
    tensors.output = args->output;
    tensors.logsumexp = args->logsumexp;
    tensors.grad_output = args->grad_output;
    tensors.grad_query = args->grad_query;
    tensors.grad_key = args->grad_key;
    tensors.grad_value = args->grad_value;
    return run(tensors, *args);
  });
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

// The same for an attention_backward entry of `kernel`'s implementation.
inline bool add_attention_backward_kernel(sdk::Registrar& registrar, const sdk::Host* host,
                                          sdk::KernelSpec kernel,
                                          bp_attention_backward_fn function) {
  kernel.op = "attention_backward";
  kernel.function = reinterpret_cast<void (*)(void)>(function);
  kernel.context = const_cast<sdk::Host*>(host);
  return registrar.add(kernel);
}

}  // namespace backplane::backends
