// Attention on torch::Tensors through backplane's kernels (attention.hpp): checks what only the
// bridge knows (ranks, dtypes, devices, the output), views the tensors as DLPack without
// copying, and calls the resolved kernel.
#include <backplane/error.hpp>
#include <backplane/torch/attention.hpp>
#include <backplane/torch/device.hpp>
#include <backplane/torch/dlpack.hpp>
#include <backplane/torch/output.hpp>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/version.h>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "attention_autograd.hpp"

namespace backplane::torch {
namespace {

constexpr const char* kWho = "backplane::torch::attention: ";

std::string shape(const at::Tensor& t) {
  std::string out = "[";
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(t.size(i));
  }
  return out + "]";
}

void check_4d(const at::Tensor& t, const char* name, const char* layout) {
  if (!t.defined()) throw InvalidArgument(std::string(kWho) + name + " is an undefined tensor");
  if (t.dim() != 4) {
    throw InvalidArgument(std::string(kWho) + name + " must be 4-D " + layout + ", got a " +
                          std::to_string(t.dim()) + "-D tensor " + shape(t));
  }
}

std::string dtype_of(const at::Tensor& t) {
  return dtype_name(t.scalar_type());
}

// c10 reads an index-less device as "the current one", and CPU tensors carry no index.
bool same_device(const c10::Device& a, const c10::Device& b) {
  const int ia = a.has_index() ? a.index() : 0;
  const int ib = b.has_index() ? b.index() : 0;
  return a.type() == b.type() && ia == ib;
}

// The stream LibTorch would run on, so that the kernel orders with the tensors' producers; NULL
// (the device's default stream) where LibTorch cannot hand out a native handle (before 2.1).
void* current_stream(const c10::Device& device) {
  if (device.is_cpu()) return nullptr;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  if (c10::impl::hasDeviceGuardImpl(device.type())) {
    try {
      return c10::impl::getDeviceGuardImpl(device.type())->getStream(device).native_handle();
    } catch (const c10::Error&) {
      return nullptr;  // a device type whose streams have no native handle
    }
  }
#endif
  return nullptr;
}

const std::vector<std::string>& tell(const std::vector<std::string>& warnings,
                                     const WarningHandler& on_warning) {
  for (const std::string& w : warnings) tell_warning(on_warning, w);
  return warnings;
}

}  // namespace

Attention::Attention(const Runtime& runtime, const Device& device,
                     std::optional<std::string> attn_implementation,
                     const WarningHandler& on_warning, const AttentionQuery& query)
    : Attention(runtime,
                runtime.resolve_attention(
                    device,
                    attn_implementation ? std::optional<std::string_view>(*attn_implementation)
                                        : std::nullopt,
                    query),
                on_warning) {}

Attention::Attention(const Runtime& runtime, const c10::Device& device,
                     std::optional<std::string> attn_implementation,
                     const WarningHandler& on_warning, const AttentionQuery& query)
    : Attention(runtime, backplane_device(device), std::move(attn_implementation), on_warning,
                query) {}

Attention::Attention(const Runtime& runtime, const AttentionResolution& resolution,
                     const WarningHandler& on_warning)
    : device_(runtime.device(resolution.device).device),
      torch_device_(torch_device(device_)),
      warnings_(tell(resolution.warnings, on_warning)),
      kernel_(runtime.attention_kernel(resolution)) {}

at::Tensor Attention::operator()(const at::Tensor& query, const at::Tensor& key,
                                 const at::Tensor& value, const AttentionArgs& args) const {
  check_4d(query, "query", "[batch, heads_q, seq_q, head_dim]");
  check_4d(key, "key", "[batch, heads_kv, seq_k, head_dim]");
  check_4d(value, "value", "[batch, heads_kv, seq_k, head_dim_v]");
  for (const auto& [t, name] : {std::pair{&key, "key"}, std::pair{&value, "value"}}) {
    if (t->scalar_type() != query.scalar_type()) {
      throw InvalidArgument(std::string(kWho) + name + " has dtype " + dtype_of(*t) +
                            " but query has " + dtype_of(query) +
                            "; query, key and value must share one dtype");
    }
  }
  const std::vector<std::string>& accepted = kernel_.info().dtypes;
  if (!accepted.empty()) {
    const std::string dtype = dtype_name(dlpack_dtype(query.scalar_type()));
    if (std::find(accepted.begin(), accepted.end(), dtype) == accepted.end()) {
      std::string list;
      for (const std::string& a : accepted) list += (list.empty() ? "" : ", ") + a;
      throw InvalidArgument(std::string(kWho) + "query has dtype " + dtype + "; " +
                            kernel_.info().op + "/" + kernel_.info().implementation + " on " +
                            device_.str() + " takes " + list);
    }
  }
  if (args.scale && !(*args.scale > 0 && std::isfinite(*args.scale))) {
    throw InvalidArgument(std::string(kWho) + "scale must be a positive finite number, got " +
                          std::to_string(*args.scale) + "; leave it unset for 1 / sqrt(head_dim)");
  }

  const std::vector<int64_t> out_shape = {query.size(0), query.size(1), query.size(2),
                                          value.size(3)};
  at::Tensor out;
  if (args.out) {
    out = *args.out;
    check_4d(out, "out", "[batch, heads_q, seq_q, head_dim_v]");
    if (out.sizes() != at::IntArrayRef(out_shape) || out.scalar_type() != query.scalar_type()) {
      throw InvalidArgument(std::string(kWho) + "out is " + dtype_of(out) + " " + shape(out) +
                            "; expected " + dtype_of(query) + " [" + std::to_string(out_shape[0]) +
                            ", " + std::to_string(out_shape[1]) + ", " +
                            std::to_string(out_shape[2]) + ", " + std::to_string(out_shape[3]) +
                            "] (query's dtype, value's head_dim)");
    }
  }
  const at::Tensor* on_device[] = {&query, &key, &value, args.mask ? &*args.mask : nullptr,
                                   args.out ? &out : nullptr};
  const char* names[] = {"query", "key", "value", "mask", "out"};
  for (size_t i = 0; i < 5; ++i) {
    const at::Tensor* t = on_device[i];
    if (t == nullptr || !t->defined() || same_device(t->device(), torch_device_)) continue;
    throw InvalidArgument(std::string(kWho) + names[i] + " is on " +
                          backplane_device(t->device()).str() + " but this attention runs on " +
                          device_.str() + " (" + kernel_.info().plugin + " plugin)");
  }
  if (at::GradMode::is_enabled() &&
      (query.requires_grad() || key.requires_grad() || value.requires_grad())) {
    return with_grad(query, key, value, args);
  }
  if (!args.out) out = empty_output(out_shape, query.options());

  const DLTensorView q(query, "query"), k(key, "key"), v(value, "value"), o(out, "out");
  std::optional<DLTensorView> m;
  if (args.mask) m.emplace(*args.mask, "mask");
  bp_attention_args call{};
  call.struct_size = sizeof call;
  call.query = q.get();
  call.key = k.get();
  call.value = v.get();
  call.mask = m ? m->get() : nullptr;
  call.output = o.get();
  call.causal = args.causal ? 1 : 0;
  call.scale = args.scale.value_or(0.0);  // <= 0 asks the kernel for 1 / sqrt(head_dim)
  call.stream = current_stream(query.device());
  kernel_(call);
  return out;
}

at::Tensor Attention::with_grad(const at::Tensor& query, const at::Tensor& key,
                                const at::Tensor& value, const AttentionArgs& args) const {
  if (args.mask && args.mask->defined() && args.mask->requires_grad()) {
    throw InvalidArgument(std::string(kWho) +
                          "mask requires grad, but the attention kernels give no gradient for "
                          "the mask (as LibTorch's fused attention); pass mask.detach()");
  }
  if (args.out) {
    throw InvalidArgument(std::string(kWho) +
                          "out= cannot be recorded by autograd, and an input requires grad; "
                          "leave out unset");
  }
  if (kernel_.has_backward()) {
    return detail::attention_with_grad(kernel_, query, key, value, args.mask, args.causal,
                                       args.scale, current_stream(query.device()));
  }
  tell_warning({}, std::string(kWho) + "an input requires grad, but " + kernel_.info().op + "/" +
                       kernel_.info().implementation + " on " + device_.str() + " (" +
                       kernel_.info().plugin +
                       " plugin) has no attention_backward; running a composite of LibTorch "
                       "ops so that the gradients flow");
  return detail::composite_attention(query, key, value, args.mask, args.causal, args.scale);
}

const Runtime& default_runtime() {
  static const Runtime runtime = Runtime::open();
  return runtime;
}

at::Tensor attention(const Runtime& runtime, const at::Tensor& query, const at::Tensor& key,
                     const at::Tensor& value, const AttentionOptions& options) {
  check_4d(query, "query", "[batch, heads_q, seq_q, head_dim]");
  // What resolution may check: the dtype (transformers warns when flash attention gets other
  // than fp16 or bf16) and the head size (kernels with a maximum).
  AttentionQuery checks;
  checks.dtype = dtype_name(dlpack_dtype(query.scalar_type()));
  checks.head_dim = static_cast<int>(query.size(3));
  const Attention attn(runtime, query.device(), options.attn_implementation, {}, checks);
  return attn(query, key, value, options);
}

at::Tensor attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                     const AttentionOptions& options) {
  return attention(default_runtime(), query, key, value, options);
}

}  // namespace backplane::torch
