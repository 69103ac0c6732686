#include "layer_kernels.hpp"

#include <algorithm>
#include <string_view>

namespace backplane::backends {

bool register_default_layer_kernels(const sdk::Registrar& registrar, const std::string& device_key,
                                    int min_capability,
                                    std::initializer_list<const char*> no_backward) {
  // Model layer -> the package and the layer name in its metadata.json (kernels/*/CMakeLists.txt).
  static const struct {
    const char* layer;
    const char* repo;
  } kDefaults[] = {
      {"RMSNorm", "backplane/rmsnorm"},        {"SiluAndMul", "backplane/activation"},
      {"GeluAndMul", "backplane/activation"},  {"GeluTanhAndMul", "backplane/activation"},
      {"RotaryEmbedding", "backplane/rotary"},
  };
  if (!registrar.accepts_layer_kernels()) return false;
  for (const auto& d : kDefaults) {
    const bool trains =
        std::none_of(no_backward.begin(), no_backward.end(),
                     [&](const char* layer) { return std::string_view(layer) == d.layer; });
    for (const uint32_t mode :
         {uint32_t{BP_KERNEL_MODE_INFERENCE}, uint32_t{BP_KERNEL_MODE_TRAINING}}) {
      if (mode == BP_KERNEL_MODE_TRAINING && !trains) continue;
      sdk::LayerKernelSpec spec;
      spec.layer = d.layer;
      spec.device_key = device_key;
      spec.mode = mode;
      spec.min_capability = min_capability;
      spec.repo = d.repo;
      spec.kernel_layer = d.layer;
      registrar.add(spec);
    }
  }
  return true;
}

}  // namespace backplane::backends
