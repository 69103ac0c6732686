#include "attention_kernels.hpp"

#include <attention_gpu.hpp>

#include <string>
#include <vector>

#include "attention_entries.hpp"

namespace backplane::cuda {
namespace {

namespace gpu = attention::gpu;

enum class Route { kFlash, kEager, kSdpa };

// sdpa takes the flash kernel when it can (bfloat16, float16), else the eager one, as
// PyTorch's SDPA falls back to its math path for float32.
template <Route kRoute>
bp_status* attention_forward(void* context, const bp_attention_args* args) noexcept {
  return backends::run_attention_forward(
      context, args, [](const attention::Tensors& tensors, const bp_attention_args& from) {
        gpu::Call call;
        call.causal = from.causal != 0;
        if (from.scale > 0) call.scale = from.scale;
        call.stream = from.stream;
        call.kernel =
            kRoute == Route::kFlash || (kRoute == Route::kSdpa && gpu::flash_supports(tensors))
                ? gpu::Kernel::kFlash
                : gpu::Kernel::kEager;
        return gpu::forward(tensors, call);
      });
}

// Every implementation's backward: the eager backward kernels, from the saved logsumexp.
bp_status* attention_backward(void* context, const bp_attention_backward_args* args) noexcept {
  return backends::run_attention_backward(
      context, args,
      [](const attention::BackwardTensors& tensors, const bp_attention_backward_args& from) {
        gpu::Call call;
        call.causal = from.causal != 0;
        if (from.scale > 0) call.scale = from.scale;
        call.stream = from.stream;
        return gpu::backward(tensors, call);
      });
}

struct Entry {
  const char* name;
  bp_attention_forward_fn function;
  std::vector<std::string> dtypes;
};

}  // namespace

void register_attention_kernels(sdk::Registrar& registrar, const sdk::Host* host) {
  const std::vector<Entry> entries = {
      {"flash_attention_2", &attention_forward<Route::kFlash>, {"bfloat16", "float16"}},
      {"sdpa", &attention_forward<Route::kSdpa>, {"float32", "bfloat16", "float16"}},
      {"eager", &attention_forward<Route::kEager>, {"float32", "bfloat16", "float16"}},
  };
  for (const Entry& entry : entries) {
    sdk::KernelSpec kernel;
    kernel.implementation = entry.name;
    kernel.device_type = "cuda";
    // Built for sm_80 and sm_90 (plus PTX for newer GPUs): nothing older can run them.
    kernel.min_compute_capability_major = 8;
    kernel.min_compute_capability_minor = 0;
    kernel.dtypes = entry.dtypes;
    kernel.max_head_dim = gpu::kMaxHeadDim;
    if (!backends::add_attention_kernel(registrar, host, kernel, entry.function)) return;
    backends::add_attention_backward_kernel(registrar, host, kernel, &attention_backward);
  }
  host->debug(std::string("CUDA attention kernels built for ") + gpu::compiled_targets());
}

}  // namespace backplane::cuda
