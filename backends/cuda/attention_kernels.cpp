#include "attention_kernels.hpp"

#include <attention_gpu.hpp>

#include <string>
#include <vector>

namespace backplane::cuda {
namespace {

namespace gpu = attention::gpu;

enum class Route { kFlash, kEager, kSdpa };

// sdpa takes the flash kernel when it can (bfloat16, float16), else the eager one, as
// PyTorch's SDPA falls back to its math path for float32.
template <Route kRoute>
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
    gpu::Call call;
    call.causal = args->causal != 0;
    if (args->scale > 0) call.scale = args->scale;
    call.stream = args->stream;
    call.kernel =
        kRoute == Route::kFlash || (kRoute == Route::kSdpa && gpu::flash_supports(tensors))
            ? gpu::Kernel::kFlash
            : gpu::Kernel::kEager;
    const attention::Status result = gpu::forward(tensors, call);
    if (result.ok()) return nullptr;
    // The library's codes are the ABI's (kernels/attention/cuda/attention_gpu.hpp).
    return host->status(static_cast<bp_status_code>(result.code), result.message);
  } catch (...) {  // the library does not throw; an allocation failure in this frame might
    return host->status(BP_OUT_OF_MEMORY, "attention_forward: out of memory");
  }
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
    kernel.op = "attention_forward";
    kernel.implementation = entry.name;
    kernel.device_type = "cuda";
    // Built for sm_80 and sm_90 (plus PTX for newer GPUs): nothing older can run them.
    kernel.min_compute_capability_major = 8;
    kernel.min_compute_capability_minor = 0;
    kernel.dtypes = entry.dtypes;
    kernel.max_head_dim = gpu::kMaxHeadDim;
    kernel.function = reinterpret_cast<void (*)(void)>(entry.function);
    kernel.context = const_cast<sdk::Host*>(host);
    if (!registrar.add(kernel)) {
      host->debug("the host takes no kernels (ABI older than 1.3): attention not registered");
      return;
    }
  }
  host->debug(std::string("CUDA attention kernels built for ") + gpu::compiled_targets());
}

}  // namespace backplane::cuda
