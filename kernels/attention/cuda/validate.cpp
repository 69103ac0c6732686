// Argument checks for the GPU kernels: the attention rules every kernel shares
// (kernels/attention/checks.hpp), plus what a GPU launch needs: device memory of one GPU, sizes
// that fit the grid, and the dtypes and head dims each kernel was built for.
#include "validate.hpp"

#include <attention/checks.hpp>
#include <common/tensor.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace backplane::attention::gpu {
namespace {

using kernels::base_of;
using kernels::element_bytes;
using kernels::stride_of;

// gridDim.y and gridDim.z (heads_q and batch) are limited to 65535 on both vendors.
constexpr int64_t kMaxGridYZ = 65535;

ElementType element_type(kernels::DType t) {
  switch (t) {
    case kernels::DType::kF32:
      return ElementType::kFloat32;
    case kernels::DType::kBF16:
      return ElementType::kBfloat16;
    case kernels::DType::kF16:
      return ElementType::kFloat16;
  }
  return ElementType::kFloat32;
}

MaskType mask_type(MaskDtype mask, ElementType dtype) {
  switch (mask) {
    case MaskDtype::kNone:
      return MaskType::kNone;
    case MaskDtype::kBool:
      return MaskType::kBool;
    case MaskDtype::kAdditiveF32:
      return MaskType::kAdditiveF32;
    case MaskDtype::kAdditiveQueryDtype:
      return dtype == ElementType::kBfloat16 ? MaskType::kAdditiveBf16 : MaskType::kAdditiveF16;
  }
  return MaskType::kNone;
}

kernels::Memory memory_of(Platform platform) {
  return platform == Platform::kCuda ? kernels::Memory::kCuda : kernels::Memory::kRocm;
}

Status error(const std::string& message) {
  return kernels::invalid("attention", message);
}

bool fits_int32(int64_t x) {
  return x <= std::numeric_limits<int32_t>::max();
}

// 16-byte copies: dim stride 1, the other strides multiples of 8 two-byte elements, aligned base.
bool vectorizable(const DLTensor& t, int64_t head_dim) {
  if (element_bytes(t) != 2 || head_dim % 8 != 0 || stride_of(t, 3) != 1) return false;
  for (int i = 0; i < 3; ++i) {
    if (stride_of(t, i) % 8 != 0) return false;
  }
  return reinterpret_cast<uintptr_t>(base_of(t)) % 16 == 0;
}

// What the GPU kernels add to the shared rules.
Status check_launch(const CheckedCall& c, Kernel kernel) {
  if (kernel == Kernel::kFlash && c.dtype == kernels::DType::kF32) {
    return error(
        "query has dtype float32; the flash kernel takes bfloat16 or float16 (tensor cores), "
        "use eager or sdpa for float32");
  }
  if (c.head_dim > kMaxHeadDim || c.head_dim_v > kMaxHeadDim) {
    return error("head_dim " + std::to_string(c.head_dim) + " and head_dim_v " +
                 std::to_string(c.head_dim_v) + ": the GPU kernels take head dims up to " +
                 std::to_string(kMaxHeadDim));
  }
  if (c.batch > kMaxGridYZ || c.heads_q > kMaxGridYZ) {
    return error("batch " + std::to_string(c.batch) + " and heads_q " + std::to_string(c.heads_q) +
                 " must each be at most " + std::to_string(kMaxGridYZ) +
                 " (one grid dimension each)");
  }
  if (!fits_int32(c.seq_q) || !fits_int32(c.seq_k)) {
    return error("seq_q " + std::to_string(c.seq_q) + " and seq_k " + std::to_string(c.seq_k) +
                 " must fit in 32 bits");
  }
  return Status::Ok();
}

}  // namespace

bool is_empty(const Params& p) {
  // With a logsumexp to write, a call without value dims still has work.
  return p.batch == 0 || p.heads_q == 0 || p.seq_q == 0 || (p.head_dim_v == 0 && !p.lse);
}

namespace {

// The flat parameters of a call that passed the checks; `output` is written.
Params params_of(const CheckedCall& c, const DLTensor& query, const DLTensor& key,
                 const DLTensor& value, const DLTensor& output, bool causal) {
  Params p{};
  p.dtype = element_type(c.dtype);
  p.batch = static_cast<int32_t>(c.batch);
  p.heads_q = static_cast<int32_t>(c.heads_q);
  p.heads_kv = static_cast<int32_t>(c.heads_kv);
  p.seq_q = static_cast<int32_t>(c.seq_q);
  p.seq_k = static_cast<int32_t>(c.seq_k);
  p.head_dim = static_cast<int32_t>(c.head_dim);
  p.head_dim_v = static_cast<int32_t>(c.head_dim_v);
  p.group = c.heads_kv > 0 ? static_cast<int32_t>(c.heads_q / c.heads_kv) : 1;
  p.scale = static_cast<float>(c.scale);
  p.causal = causal ? 1 : 0;
  p.device_id = query.device.device_id;
  p.q = c.q.data;
  p.k = c.k.data;
  p.v = c.v.data;
  p.out = base_of(output);  // c.out.data, writable
  const StridedView* views[] = {&c.q, &c.k, &c.v, &c.out};
  int64_t* strides[] = {p.q_stride, p.k_stride, p.v_stride, p.out_stride};
  for (int i = 0; i < 4; ++i) {
    for (int d = 0; d < 4; ++d) strides[i][d] = views[i]->stride[d];
  }
  p.vector_loads = vectorizable(query, c.head_dim) && vectorizable(key, c.head_dim) &&
                   vectorizable(value, c.head_dim_v);
  p.mask_type = mask_type(c.mask_dtype, p.dtype);
  if (p.mask_type != MaskType::kNone) {
    p.mask = c.mask.data;
    for (int d = 0; d < 4; ++d) p.mask_stride[d] = c.mask.stride[d];
  }
  if (c.lse.data) {
    p.lse = static_cast<float*>(const_cast<void*>(c.lse.data));
    for (int d = 0; d < 3; ++d) p.lse_stride[d] = c.lse.stride[d];
  }
  return p;
}

}  // namespace

Status make_params(const Tensors& tensors, bool causal, std::optional<double> scale, Kernel kernel,
                   Platform platform, Params* params) {
  CheckedCall c;
  if (Status s = check_call(tensors, scale, memory_of(platform), &c); !s.ok()) return s;
  if (Status s = check_launch(c, kernel); !s.ok()) return s;
  *params = params_of(c, *tensors.query, *tensors.key, *tensors.value, *tensors.output, causal);
  return {};
}

Status make_backward_params(const BackwardTensors& tensors, bool causal,
                            std::optional<double> scale, Platform platform,
                            BackwardParams* params) {
  CheckedBackward c;
  Status s = check_backward_call(tensors, scale, memory_of(platform), &c);
  if (!s.ok()) return s;
  if (s = check_launch(c.call, Kernel::kEager); !s.ok()) return backward_status(s);
  BackwardParams p{};
  p.fwd = params_of(c.call, *tensors.query, *tensors.key, *tensors.value, *tensors.output, causal);
  p.grad_out = c.grad_out.data;
  p.grad_q = const_cast<void*>(c.grad_q.data);
  p.grad_k = const_cast<void*>(c.grad_k.data);
  p.grad_v = const_cast<void*>(c.grad_v.data);
  for (int d = 0; d < 4; ++d) {
    p.grad_out_stride[d] = c.grad_out.stride[d];
    p.grad_q_stride[d] = c.grad_q.stride[d];
    p.grad_k_stride[d] = c.grad_k.stride[d];
    p.grad_v_stride[d] = c.grad_v.stride[d];
  }
  *params = p;
  return {};
}

}  // namespace backplane::attention::gpu
