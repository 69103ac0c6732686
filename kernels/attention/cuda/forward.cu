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

namespace {

// Runs launch() with the tensors' device current, restoring the caller's after; `what` names
// the launch in errors ("the flash kernel launch"), `op` the call's op.
template <class Launch>
Status on_device(int device_id, const char* what, Launch&& launch) {
  int previous = -1;
  if (const LaunchStatus s = gpuGetDevice(&previous); s != kLaunchOk) {
    return runtime_error("getting the current device", s);
  }
  if (previous != device_id) {
    if (const LaunchStatus s = gpuSetDevice(device_id); s != kLaunchOk) {
      return runtime_error(("selecting device " + std::to_string(device_id)).c_str(), s);
    }
  }
  const LaunchStatus launched = launch();
  const LaunchStatus restored = previous != device_id ? gpuSetDevice(previous) : kLaunchOk;
  if (launched != kLaunchOk) return runtime_error(what, launched);
  if (restored != kLaunchOk) return runtime_error("restoring the caller's device", restored);
  return {};
}

template <class Call>
Status guarded(const char* op, Call&& call) {
  try {
    return call();
  } catch (const std::exception& e) {
    return {StatusCode::kInternal, std::string(op) + ": " + e.what()};
  } catch (...) {
    return {StatusCode::kInternal, std::string(op) + ": unknown error"};
  }
}

}  // namespace

Status forward(const Tensors& tensors, const Call& call) {
  return guarded("attention", [&]() -> Status {
    Params params;
    Status r = make_params(tensors, call.causal, call.scale, call.kernel, kPlatform, &params);
    if (!r.ok() || is_empty(params)) return r;
    // Without value dims only the logsumexp is left to write, which eager does for any dtype.
    const Kernel kernel = params.head_dim_v == 0 ? Kernel::kEager : call.kernel;
    const auto stream = static_cast<GpuStream>(call.stream);
    return on_device(
        params.device_id,
        kernel == Kernel::kFlash ? "the flash kernel launch" : "the eager kernel launch", [&] {
          return kernel == Kernel::kFlash ? launch_flash(params, stream)
                                          : launch_eager(params, stream);
        });
  });
}

Status backward(const BackwardTensors& tensors, const Call& call) {
  return guarded("attention_backward", [&]() -> Status {
    BackwardParams params;
    Status r = make_backward_params(tensors, call.causal, call.scale, kPlatform, &params);
    if (!r.ok() || params.fwd.batch == 0 || params.fwd.heads_kv == 0) return r;
    const auto stream = static_cast<GpuStream>(call.stream);
    return on_device(params.fwd.device_id, "the eager backward kernels' launch",
                     [&] { return launch_eager_backward(params, stream); });
  });
}

}  // namespace backplane::attention::gpu
