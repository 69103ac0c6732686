// The backplane/rmsnorm kernel package's library: registers rms_norm and rms_norm_backward for
// its variant's device.
#include "common/package.hpp"
#include "rmsnorm/rmsnorm.hpp"

namespace backplane::rmsnorm {
namespace {

bp_status* rms_norm(void* context, const bp_rms_norm_args* args) noexcept {
  const auto* host = static_cast<const sdk::Host*>(context);
  if (std::string why = sdk::args_size_error("rms_norm", args, BP_RMS_NORM_ARGS_SIZE_1_4, "1.4",
                                             "bp_rms_norm_args");
      !why.empty()) {
    return host->status(BP_INVALID_ARGUMENT, why);
  }
  const Tensors t{args->input, args->weight, args->residual, args->output};
#ifdef BACKPLANE_PACKAGE_CUDA
  return kernels::to_bp_status(host, forward_cuda(t, args->epsilon, args->stream));
#else
  return kernels::to_bp_status(host, forward_cpu(t, args->epsilon));
#endif
}

bp_status* rms_norm_backward(void* context, const bp_rms_norm_backward_args* args) noexcept {
  const auto* host = static_cast<const sdk::Host*>(context);
  if (std::string why =
          sdk::args_size_error("rms_norm_backward", args, BP_RMS_NORM_BACKWARD_ARGS_SIZE_1_6, "1.6",
                               "bp_rms_norm_backward_args");
      !why.empty()) {
    return host->status(BP_INVALID_ARGUMENT, why);
  }
  const BackwardTensors t{args->grad_output,   args->input,      args->weight,
                          args->grad_residual, args->grad_input, args->grad_weight};
#ifdef BACKPLANE_PACKAGE_CUDA
  return kernels::to_bp_status(host, backward_cuda(t, args->epsilon, args->stream));
#else
  return kernels::to_bp_status(host, backward_cpu(t, args->epsilon));
#endif
}

class Package {
 public:
  explicit Package(sdk::Host host) : host_(host) {}
  void register_all(sdk::Registrar& registrar) {
    registrar.add(
        kernels::package_kernel("rms_norm", reinterpret_cast<void (*)(void)>(&rms_norm), &host_));
    registrar.add(kernels::package_kernel(
        "rms_norm_backward", reinterpret_cast<void (*)(void)>(&rms_norm_backward), &host_));
  }

 private:
  sdk::Host host_;
};

}  // namespace
}  // namespace backplane::rmsnorm

BACKPLANE_PLUGIN(backplane::rmsnorm::Package, "rmsnorm", "0.1.0")
