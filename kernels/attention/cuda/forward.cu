// The entry point: validate on the host, switch to the tensors' device, queue the kernel on the
// caller's stream, switch back. CUDA and HIP errors come back with the runtime's own text.
#include <exception>
#include <string>

#include "attention_gpu.hpp"
#include "launch.hpp"
#include "validate.hpp"

namespace backplane::attention::gpu {
namespace {

#if defined(BACKPLANE_GPU_AMD)
constexpr Platform kPlatform = Platform::kRocm;
#else
constexpr Platform kPlatform = Platform::kCuda;
#endif

Status runtime_error(const char* call, LaunchStatus status) {
  // No device or no driver is a state of the machine, not a bug: say so with its own code.
  const bool unavailable =
#if defined(BACKPLANE_GPU_AMD)
      status == hipErrorNoDevice || status == hipErrorInvalidDevice ||
      status == hipErrorInsufficientDriver;
#else
      status == cudaErrorNoDevice || status == cudaErrorInvalidDevice ||
      status == cudaErrorInsufficientDriver || status == cudaErrorCompatNotSupportedOnDevice;
#endif
  return {unavailable ? StatusCode::kUnavailable : StatusCode::kInternal,
          std::string("attention: ") + call + " failed: " + gpuGetErrorName(status) + ": " +
              gpuGetErrorString(status)};
}

}  // namespace

const char* kernel_name(Kernel kernel) {
  return kernel == Kernel::kFlash ? "flash" : "eager";
}

const char* compiled_targets() {
  return BACKPLANE_GPU_TARGETS;
}

bool flash_supports(const Tensors& tensors) {
  const DLTensor* q = tensors.query;
  const DLTensor* v = tensors.value;
  if (!q || !v || q->ndim != 4 || v->ndim != 4 || !q->shape || !v->shape) return false;
  const bool half = q->dtype.bits == 16 && q->dtype.lanes == 1 &&
                    (q->dtype.code == kDLBfloat || q->dtype.code == kDLFloat);
  return half && q->shape[3] <= kMaxHeadDim && v->shape[3] <= kMaxHeadDim;
}

Status forward(const Tensors& tensors, const Call& call) {
  try {
    Params params;
    Status r = make_params(tensors, call.causal, call.scale, call.kernel, kPlatform, &params);
    if (!r.ok() || is_empty(params)) return r;

    int previous = -1;
    if (const LaunchStatus s = gpuGetDevice(&previous); s != kLaunchOk) {
      return runtime_error("getting the current device", s);
    }
    if (previous != params.device_id) {
      if (const LaunchStatus s = gpuSetDevice(params.device_id); s != kLaunchOk) {
        return runtime_error(("selecting device " + std::to_string(params.device_id)).c_str(), s);
      }
    }
    const auto stream = static_cast<GpuStream>(call.stream);
    const LaunchStatus launched =
        call.kernel == Kernel::kFlash ? launch_flash(params, stream) : launch_eager(params, stream);
    const LaunchStatus restored = previous != params.device_id ? gpuSetDevice(previous) : kLaunchOk;
    if (launched != kLaunchOk) {
      return runtime_error(
          call.kernel == Kernel::kFlash ? "the flash kernel launch" : "the eager kernel launch",
          launched);
    }
    if (restored != kLaunchOk) return runtime_error("restoring the caller's device", restored);
    return {};
  } catch (const std::exception& e) {
    return {StatusCode::kInternal, std::string("attention: ") + e.what()};
  } catch (...) {
    return {StatusCode::kInternal, "attention: unknown error"};
  }
}

}  // namespace backplane::attention::gpu
