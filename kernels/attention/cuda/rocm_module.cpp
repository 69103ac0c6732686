// The C entry point of libbackplane-rocm-attention.so, the HIP build of the GPU attention
// kernels. The rocm plugin opens this module with dlopen the first time a kernel is called, so
// the plugin never links the HIP runtime.
#include <backplane/plugin.h>

#include <cstdio>
#include <exception>

#include "attention_gpu.hpp"

namespace {

int fail(char* message, size_t size, const char* text, int code) {
  if (message != nullptr && size > 0) std::snprintf(message, size, "%s", text);
  return code;
}

}  // namespace

// kernel: 0 flash, 1 eager. Returns a bp_status_code; on error `message` holds the reason.
extern "C" __attribute__((visibility("default"))) int backplane_rocm_attention_forward(
    int kernel, const bp_attention_args* args, char* message, size_t message_size) noexcept {
  namespace gpu = backplane::attention::gpu;
  try {
    backplane::attention::Tensors tensors;
    tensors.query = args->query;
    tensors.key = args->key;
    tensors.value = args->value;
    tensors.mask = args->mask;
    tensors.output = args->output;
    gpu::Call call;
    call.causal = args->causal != 0;
    if (args->scale > 0) call.scale = args->scale;
    call.kernel = kernel == 0 ? gpu::Kernel::kFlash : gpu::Kernel::kEager;
    call.stream = args->stream;
    const backplane::attention::Status result = gpu::forward(tensors, call);
    if (result.ok()) return BP_OK;
    return fail(message, message_size, result.message.c_str(), static_cast<int>(result.code));
  } catch (const std::exception& e) {
    return fail(message, message_size, e.what(), BP_INTERNAL);
  } catch (...) {
    return fail(message, message_size, "unknown error", BP_INTERNAL);
  }
}
