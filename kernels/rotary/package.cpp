// The backplane/rotary kernel package's library: registers rotary_embedding and
// rotary_embedding_backward for its variant's device.
#include "common/package.hpp"
#include "rotary/rotary.hpp"

namespace backplane::rotary {
namespace {

// The forward rotates; the backward rotates the gradients back (same args).
template <bool kBackward>
bp_status* rotary(void* context, const bp_rotary_embedding_args* args) noexcept {
  const auto* host = static_cast<const sdk::Host*>(context);
  const char* op = kBackward ? "rotary_embedding_backward" : "rotary_embedding";
  if (std::string why = sdk::args_size_error(op, args, BP_ROTARY_EMBEDDING_ARGS_SIZE_1_4, "1.4",
                                             "bp_rotary_embedding_args");
      !why.empty()) {
    return host->status(BP_INVALID_ARGUMENT, why);
  }
  const Tensors t{args->query, args->key, args->cos, args->sin};
  const auto style = static_cast<Style>(args->style);
#ifdef BACKPLANE_PACKAGE_CUDA
  return kernels::to_bp_status(host, kBackward ? backward_cuda(t, style, args->stream)
                                               : forward_cuda(t, style, args->stream));
#else
  return kernels::to_bp_status(host, kBackward ? backward_cpu(t, style) : forward_cpu(t, style));
#endif
}

class Package {
 public:
  explicit Package(sdk::Host host) : host_(host) {}
  void register_all(sdk::Registrar& registrar) {
    bp_rotary_embedding_fn forward = &rotary<false>, backward = &rotary<true>;
    registrar.add(kernels::package_kernel("rotary_embedding",
                                          reinterpret_cast<void (*)(void)>(forward), &host_));
    registrar.add(kernels::package_kernel("rotary_embedding_backward",
                                          reinterpret_cast<void (*)(void)>(backward), &host_));
  }

 private:
  sdk::Host host_;
};

}  // namespace
}  // namespace backplane::rotary

BACKPLANE_PLUGIN(backplane::rotary::Package, "rotary", "0.1.0")
