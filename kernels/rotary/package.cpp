// The backplane/rotary kernel package's library: registers rotary_embedding for its variant's
// device.
#include "common/package.hpp"
#include "rotary/rotary.hpp"

namespace backplane::rotary {
namespace {

bp_status* rotary_embedding(void* context, const bp_rotary_embedding_args* args) noexcept {
  const auto* host = static_cast<const sdk::Host*>(context);
  if (std::string why =
          sdk::args_size_error("rotary_embedding", args, BP_ROTARY_EMBEDDING_ARGS_SIZE_1_4, "1.4",
                               "bp_rotary_embedding_args");
      !why.empty()) {
    return host->status(BP_INVALID_ARGUMENT, why);
  }
  const Tensors t{args->query, args->key, args->cos, args->sin};
  const auto style = static_cast<Style>(args->style);
#ifdef BACKPLANE_PACKAGE_CUDA
  return kernels::to_bp_status(host, forward_cuda(t, style, args->stream));
#else
  return kernels::to_bp_status(host, forward_cpu(t, style));
#endif
}

class Package {
 public:
  explicit Package(sdk::Host host) : host_(host) {}
  void register_all(sdk::Registrar& registrar) {
    registrar.add(kernels::package_kernel(
        "rotary_embedding", reinterpret_cast<void (*)(void)>(&rotary_embedding), &host_));
  }

 private:
  sdk::Host host_;
};

}  // namespace
}  // namespace backplane::rotary

BACKPLANE_PLUGIN(backplane::rotary::Package, "rotary", "0.1.0")
