#include "attention_kernels.hpp"

#include <backplane/internal/dynamic_library.hpp>
#include <backplane/internal/text.hpp>

#include <filesystem>
#include <string>
#include <utility>

namespace backplane::rocm {
namespace {

constexpr const char* kModuleName = "libbackplane-rocm-attention.so";
constexpr int kFlash = 0, kEager = 1, kSdpa = 2;
constexpr int kHalfBits = 16;

// The folder this plugin was loaded from ("" when unknown), where the module sits.
std::string own_folder() {
  const std::filesystem::path library =
      internal::library_holding(reinterpret_cast<const void*>(&own_folder));
  return library.empty() ? std::string() : library.parent_path().string() + "/";
}

template <int kKernel>
bp_status* trampoline(void* context, const bp_attention_args* args) noexcept {
  auto* self = static_cast<AttentionKernels*>(context);
  try {
    return self->forward(kKernel, args);
  } catch (...) {  // an allocation failed; the short message needs none
    return self->out_of_memory();
  }
}

}  // namespace

AttentionKernels::AttentionKernels(sdk::Host host, std::vector<std::string> archs,
                                   std::vector<std::string> device_archs)
    : host_(host), archs_(std::move(archs)), device_archs_(std::move(device_archs)) {}

void AttentionKernels::register_all(sdk::Registrar& registrar,
                                    const std::vector<std::string>& device_types) {
  struct Entry {
    const char* name;
    bp_attention_forward_fn function;
    std::vector<std::string> dtypes;
  };
  const std::vector<Entry> entries = {
      {"flash_attention_2", &trampoline<kFlash>, {"bfloat16", "float16"}},
      {"sdpa", &trampoline<kSdpa>, {"float32", "bfloat16", "float16"}},
      {"eager", &trampoline<kEager>, {"float32", "bfloat16", "float16"}},
  };
  for (const std::string& type : device_types) {
    for (const Entry& entry : entries) {
      sdk::KernelSpec kernel;
      kernel.op = "attention_forward";
      kernel.implementation = entry.name;
      kernel.device_type = type;
      // AMD GPUs have no compute capability; the arch is checked at the call (module archs).
      kernel.dtypes = entry.dtypes;
      kernel.max_head_dim = 256;
      kernel.function = reinterpret_cast<void (*)(void)>(entry.function);
      kernel.context = this;
      if (!registrar.add(kernel)) {
        host_.debug("the host takes no kernels (ABI older than 1.3): attention not registered");
        return;
      }
    }
  }
  host_.debug("HIP attention kernels (" + std::string(kModuleName) + ") for " +
              internal::join(archs_, " "));
}

AttentionKernels::ForwardFn AttentionKernels::entry() {
  std::call_once(once_, [this] {
    const std::string path = own_folder() + kModuleName;
    // Stays mapped: the HIP runtime it pulls in registers process-exit handlers.
    std::string why;
    module_ = internal::DynamicLibrary::open(path, why);
    if (!module_) {
      load_error_ = "the HIP attention kernels " + path + " could not be loaded: " + why;
      return;
    }
    forward_ = module_.function<ForwardFn>("backplane_rocm_attention_forward");
    if (forward_ == nullptr) load_error_ = path + " lacks backplane_rocm_attention_forward";
  });
  return forward_;
}

bp_status* AttentionKernels::out_of_memory() noexcept {
  try {
    return host_.status(BP_OUT_OF_MEMORY, "out of memory");
  } catch (...) {
    return nullptr;  // unreachable: the message fits std::string's inline buffer
  }
}

bp_status* AttentionKernels::forward(int kernel, const bp_attention_args* args) {
  if (std::string why = sdk::args_size_error("attention_forward", args, BP_ATTENTION_ARGS_SIZE_1_3,
                                             "1.3", "bp_attention_args");
      !why.empty()) {
    return host_.status(BP_INVALID_ARGUMENT, why);
  }
  // The module validates everything else; the arch is only known here.
  if (args->query != nullptr && args->query->device.device_type == kDLROCM) {
    const int index = args->query->device.device_id;
    if (index >= 0 && static_cast<size_t>(index) < device_archs_.size()) {
      const std::string& arch = device_archs_[static_cast<size_t>(index)];
      bool built = false;
      for (const std::string& a : archs_) built = built || a == arch;
      if (!built) {
        return host_.status(BP_UNAVAILABLE, "attention: the HIP kernels were built for " +
                                                internal::join(archs_, " ") + ", but GPU " +
                                                std::to_string(index) + " is " +
                                                (arch.empty() ? "of an unknown arch" : arch));
      }
    }
  }
  const ForwardFn fn = entry();
  if (fn == nullptr) return host_.status(BP_UNAVAILABLE, load_error_);
  int route = kernel;
  if (kernel == kSdpa) {
    const DLTensor* q = args->query;
    const bool half = q != nullptr && q->dtype.bits == kHalfBits && q->dtype.lanes == 1 &&
                      (q->dtype.code == kDLBfloat || q->dtype.code == kDLFloat);
    route = half ? kFlash : kEager;
  }
  char message[1024] = {};
  const int code = fn(route, args, message, sizeof message);
  if (code == BP_OK) return nullptr;
  return host_.status(kernels::to_bp_status_code(code), message);
}

}  // namespace backplane::rocm
