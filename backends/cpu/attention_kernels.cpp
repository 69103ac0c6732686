#include "attention_kernels.hpp"

#include <attention/attention.hpp>

#include "attention_entries.hpp"

namespace backplane::cpu {
namespace {

template <attention::Implementation kImplementation>
bp_status* attention_forward(void* context, const bp_attention_args* args) noexcept {
  return backends::run_attention_forward(
      context, args, [](const attention::Tensors& tensors, const bp_attention_args& call) {
        attention::Options options;
        options.causal = call.causal != 0;
        if (call.scale > 0) options.scale = call.scale;
        options.implementation = kImplementation;
        return attention::forward(tensors, options);
      });
}

// One backward serves both implementations: the probabilities come from the saved logsumexp.
bp_status* attention_backward(void* context, const bp_attention_backward_args* args) noexcept {
  return backends::run_attention_backward(
      context, args,
      [](const attention::BackwardTensors& tensors, const bp_attention_backward_args& call) {
        attention::Options options;
        options.causal = call.causal != 0;
        if (call.scale > 0) options.scale = call.scale;
        return attention::backward(tensors, options);
      });
}

}  // namespace

void register_attention_kernels(sdk::Registrar& registrar, const sdk::Host* host) {
  for (const auto& [name, function] :
       {std::pair{"sdpa", &attention_forward<attention::Implementation::kSdpa>},
        std::pair{"eager", &attention_forward<attention::Implementation::kEager>}}) {
    sdk::KernelSpec kernel;
    kernel.implementation = name;
    kernel.device_type = "cpu";
    kernel.dtypes = {"float32", "bfloat16", "float16"};
    if (!backends::add_attention_kernel(registrar, host, kernel, function)) return;
    backends::add_attention_backward_kernel(registrar, host, kernel, &attention_backward);
  }
}

}  // namespace backplane::cpu
