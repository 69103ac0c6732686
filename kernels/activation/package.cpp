// The backplane/activation kernel package's library: registers silu_and_mul, gelu_and_mul and
// gelu_tanh_and_mul, and their backward ops, for its variant's device.
#include "common/package.hpp"
#include "activation/activation.hpp"

namespace backplane::activation {
namespace {

template <Activation A>
bp_status* gated(void* context, const bp_gated_activation_args* args) noexcept {
  const auto* host = static_cast<const sdk::Host*>(context);
  if (std::string why = sdk::args_size_error(op_name(A), args, BP_GATED_ACTIVATION_ARGS_SIZE_1_4,
                                             "1.4", "bp_gated_activation_args");
      !why.empty()) {
    return host->status(BP_INVALID_ARGUMENT, why);
  }
#ifdef BACKPLANE_PACKAGE_CUDA
  return kernels::to_bp_status(host, forward_cuda(A, args->input, args->output, args->stream));
#else
  return kernels::to_bp_status(host, forward_cpu(A, args->input, args->output));
#endif
}

template <Activation A>
bp_status* gated_backward(void* context, const bp_gated_activation_backward_args* args) noexcept {
  const auto* host = static_cast<const sdk::Host*>(context);
  if (std::string why = sdk::args_size_error(backward_op_name(A), args,
                                             BP_GATED_ACTIVATION_BACKWARD_ARGS_SIZE_1_6, "1.6",
                                             "bp_gated_activation_backward_args");
      !why.empty()) {
    return host->status(BP_INVALID_ARGUMENT, why);
  }
#ifdef BACKPLANE_PACKAGE_CUDA
  return kernels::to_bp_status(
      host, backward_cuda(A, args->grad_output, args->input, args->grad_input, args->stream));
#else
  return kernels::to_bp_status(host,
                               backward_cpu(A, args->grad_output, args->input, args->grad_input));
#endif
}

class Package {
 public:
  explicit Package(sdk::Host host) : host_(host) {}
  void register_all(sdk::Registrar& registrar) {
    add<Activation::kSilu>(registrar);
    add<Activation::kGelu>(registrar);
    add<Activation::kGeluTanh>(registrar);
  }

 private:
  template <Activation A>
  void add(sdk::Registrar& registrar) {
    bp_gated_activation_fn fn = &gated<A>;
    registrar.add(
        kernels::package_kernel(op_name(A), reinterpret_cast<void (*)(void)>(fn), &host_));
    bp_gated_activation_backward_fn backward = &gated_backward<A>;
    registrar.add(kernels::package_kernel(backward_op_name(A),
                                          reinterpret_cast<void (*)(void)>(backward), &host_));
  }
  sdk::Host host_;
};

}  // namespace
}  // namespace backplane::activation

BACKPLANE_PLUGIN(backplane::activation::Package, "activation", "0.1.0")
