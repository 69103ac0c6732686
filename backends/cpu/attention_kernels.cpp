#include "attention_kernels.hpp"

#include <attention/attention.hpp>

namespace backplane::cpu {
namespace {

template <attention::Implementation kImplementation>
bp_status* attention_forward(void* context, const bp_attention_args* args) noexcept {
  const auto* host = static_cast<const sdk::Host*>(context);
  if (args == nullptr || args->struct_size < BP_STRUCT_SIZE(bp_attention_args, stream)) {
    return host->status(BP_INVALID_ARGUMENT, "attention_forward: args is NULL or too small");
  }
  try {
    attention::Tensors tensors;
    tensors.query = args->query;
    tensors.key = args->key;
    tensors.value = args->value;
    tensors.mask = args->mask;
    tensors.output = args->output;
    attention::Options options;
    options.causal = args->causal != 0;
    if (args->scale > 0) options.scale = args->scale;
    options.implementation = kImplementation;
    const attention::Status status = attention::forward(tensors, options);
    if (status.ok()) return nullptr;
    // The library's codes are the ABI's (kernels/attention/attention.hpp).
    return host->status(static_cast<bp_status_code>(status.code), status.message);
  } catch (...) {  // the library does not throw; an allocation failure in this frame might
    return host->status(BP_OUT_OF_MEMORY, "attention_forward: out of memory");
  }
}

}  // namespace

void register_attention_kernels(sdk::Registrar& registrar, const sdk::Host* host) {
  for (const auto& [name, function] :
       {std::pair{"sdpa", &attention_forward<attention::Implementation::kSdpa>},
        std::pair{"eager", &attention_forward<attention::Implementation::kEager>}}) {
    sdk::KernelSpec kernel;
    kernel.op = "attention_forward";
    kernel.implementation = name;
    kernel.device_type = "cpu";
    kernel.dtypes = {"float32", "bfloat16", "float16"};
    kernel.function = reinterpret_cast<void (*)(void)>(function);
    kernel.context = const_cast<sdk::Host*>(host);
    if (!registrar.add(kernel)) {
      host->debug("the host takes no kernels (ABI older than 1.3): attention not registered");
      return;
    }
  }
}

}  // namespace backplane::cpu
