// Argument checks for the GPU kernels: the CPU kernels' rules (kernels/attention/cpu/
// validate.cpp), plus what a GPU launch needs: device memory of one GPU, sizes that fit the
// grid, and the dtypes and head dims each kernel was built for.
#include "validate.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

namespace backplane::attention::gpu {
namespace {

// DLPack 0.8 added kDLBool (6); Debian's header (0.6) predates it.
constexpr uint8_t kDLBoolCode = 6;
// gridDim.y and gridDim.z (heads_q and batch) are limited to 65535 on both vendors.
constexpr int64_t kMaxGridYZ = 65535;

std::string dims_string(const DLTensor& t) {
  std::ostringstream s;
  s << '[';
  for (int i = 0; i < t.ndim; ++i) s << (i ? ", " : "") << t.shape[i];
  s << ']';
  return s.str();
}

std::string dims_string(const int64_t (&d)[4]) {
  std::ostringstream s;
  s << '[' << d[0] << ", " << d[1] << ", " << d[2] << ", " << d[3] << ']';
  return s.str();
}

std::string dtype_string(DLDataType t) {
  std::string base;
  switch (t.code) {
    case kDLInt:
      base = "int";
      break;
    case kDLUInt:
      base = "uint";
      break;
    case kDLFloat:
      base = "float";
      break;
    case kDLBfloat:
      base = "bfloat";
      break;
    case kDLBoolCode:
      base = "bool";
      break;
    default:
      base = "code" + std::to_string(t.code) + "_";
      break;
  }
  std::string s = base + std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

bool to_element_type(DLDataType t, ElementType* out) {
  if (t.lanes != 1) return false;
  if (t.code == kDLFloat && t.bits == 32) {
    *out = ElementType::kFloat32;
  } else if (t.code == kDLBfloat && t.bits == 16) {
    *out = ElementType::kBfloat16;
  } else if (t.code == kDLFloat && t.bits == 16) {
    *out = ElementType::kFloat16;
  } else {
    return false;
  }
  return true;
}

std::string device_name(int type) {
  switch (type) {
    case kDLCPU:
      return "kDLCPU";
    case kDLCUDA:
      return "kDLCUDA";
    case kDLCUDAHost:
      return "kDLCUDAHost";
    case kDLROCM:
      return "kDLROCM";
    case kDLROCMHost:
      return "kDLROCMHost";
    case kDLCUDAManaged:
      return "kDLCUDAManaged";
    default:
      return "device type " + std::to_string(type);
  }
}

bool serves(Platform platform, int type) {
  return platform == Platform::kCuda ? (type == kDLCUDA || type == kDLCUDAManaged)
                                     : type == kDLROCM;
}

const char* accepted_devices(Platform platform) {
  return platform == Platform::kCuda ? "kDLCUDA or kDLCUDAManaged memory" : "kDLROCM memory";
}

int64_t numel(const DLTensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

int64_t element_bytes(const DLTensor& t) {
  return (t.dtype.bits * t.dtype.lanes + 7) / 8;
}

int64_t stride_of(const DLTensor& t, int i) {
  if (t.strides) return t.strides[i];
  int64_t s = 1;
  for (int j = t.ndim - 1; j > i; --j) s *= t.shape[j];
  return s;
}

const char* base_ptr(const DLTensor& t) {
  return static_cast<const char*>(t.data) + t.byte_offset;
}

struct Span {
  uintptr_t lo = 0, hi = 0;
  bool empty() const { return lo == hi; }
};
Span span_of(const DLTensor& t) {
  if (numel(t) == 0 || !t.data) return {};
  int64_t lo = 0, hi = 0;
  for (int i = 0; i < t.ndim; ++i) {
    const int64_t reach = (t.shape[i] - 1) * stride_of(t, i);
    (reach < 0 ? lo : hi) += reach;
  }
  const int64_t es = element_bytes(t);
  const auto base = reinterpret_cast<uintptr_t>(base_ptr(t));
  return {base + static_cast<uintptr_t>(lo * es), base + static_cast<uintptr_t>((hi + 1) * es)};
}

bool overlaps(Span a, Span b) {
  return !a.empty() && !b.empty() && a.lo < b.hi && b.lo < a.hi;
}

Result error(const std::string& message) {
  return {Code::kInvalidArgument, "attention: " + message};
}

Result check_tensor(const DLTensor* t, const char* name, bool four_dims, const char* layout,
                    Platform platform) {
  if (!t) return error(std::string(name) + " is NULL");
  if (!serves(platform, t->device.device_type)) {
    return error(std::string(name) + " is on device " + device_name(t->device.device_type) +
                 "; the GPU kernels need " + accepted_devices(platform));
  }
  if (t->ndim < 0 || t->ndim > 8 || (t->ndim > 0 && !t->shape)) {
    return error(std::string(name) + " has an invalid shape (ndim " + std::to_string(t->ndim) +
                 (t->ndim > 0 && !t->shape ? ", shape NULL)" : ")"));
  }
  if (four_dims && t->ndim != 4) {
    return error(std::string(name) + " must have 4 dims " + layout + ", got " +
                 std::to_string(t->ndim) + " dims " + dims_string(*t));
  }
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 0) {
      return error(std::string(name) + " has a negative size in shape " + dims_string(*t));
    }
  }
  if (numel(*t) > 0) {
    if (!t->data) return error(std::string(name) + " data is NULL");
    const int64_t es = element_bytes(*t);
    if (reinterpret_cast<uintptr_t>(base_ptr(*t)) % static_cast<uintptr_t>(es) != 0) {
      return error(std::string(name) + " data (data + byte_offset) is not aligned to its " +
                   std::to_string(es) + "-byte elements");
    }
  }
  return {};
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
  return reinterpret_cast<uintptr_t>(base_ptr(t)) % 16 == 0;
}

}  // namespace

bool is_empty(const Params& p) {
  return p.batch == 0 || p.heads_q == 0 || p.seq_q == 0 || p.head_dim_v == 0;
}

Result make_params(const Tensors& tensors, bool causal, std::optional<double> scale, Kernel kernel,
                   Platform platform, Params* params) {
  const char* layouts[] = {
      "[batch, heads_q, seq_q, head_dim]", "[batch, heads_kv, seq_k, head_dim]",
      "[batch, heads_kv, seq_k, head_dim_v]", "[batch, heads_q, seq_q, head_dim_v]"};
  const DLTensor* all[] = {tensors.query, tensors.key, tensors.value, tensors.output};
  const char* names[] = {"query", "key", "value", "output"};
  for (int i = 0; i < 4; ++i) {
    if (Result r = check_tensor(all[i], names[i], true, layouts[i], platform); !r.ok()) return r;
  }
  const DLTensor& q = *tensors.query;
  const DLTensor& k = *tensors.key;
  const DLTensor& v = *tensors.value;
  const DLTensor& o = *tensors.output;
  for (int i = 1; i < 4; ++i) {
    if (all[i]->device.device_id != q.device.device_id) {
      return error(std::string(names[i]) + " is on GPU " +
                   std::to_string(all[i]->device.device_id) + " but query is on GPU " +
                   std::to_string(q.device.device_id) + "; all tensors must be on one GPU");
    }
  }
  if (q.device.device_id < 0) {
    return error("query has device_id " + std::to_string(q.device.device_id) +
                 "; expected a GPU ordinal (0 or more)");
  }

  Params p{};
  if (!to_element_type(q.dtype, &p.dtype)) {
    return error("query has dtype " + dtype_string(q.dtype) +
                 "; supported: float32, bfloat16, float16");
  }
  for (int i = 1; i < 4; ++i) {
    if (all[i]->dtype.code != q.dtype.code || all[i]->dtype.bits != q.dtype.bits ||
        all[i]->dtype.lanes != q.dtype.lanes) {
      return error(std::string(names[i]) + " has dtype " + dtype_string(all[i]->dtype) +
                   " but query has " + dtype_string(q.dtype) +
                   "; query, key, value and output must share one dtype");
    }
  }
  if (kernel == Kernel::kFlash && p.dtype == ElementType::kFloat32) {
    return error(
        "query has dtype float32; the flash kernel takes bfloat16 or float16 (tensor cores), "
        "use eager or sdpa for float32");
  }

  const int64_t batch = q.shape[0], heads_q = q.shape[1], seq_q = q.shape[2], head_dim = q.shape[3],
                heads_kv = k.shape[1], seq_k = k.shape[2], head_dim_v = v.shape[3];
  if (k.shape[0] != batch || v.shape[0] != batch) {
    return error("batch sizes differ: query " + dims_string(q) + ", key " + dims_string(k) +
                 ", value " + dims_string(v));
  }
  if (k.shape[3] != head_dim) {
    return error("key head_dim " + std::to_string(k.shape[3]) + " differs from query head_dim " +
                 std::to_string(head_dim) + " (query " + dims_string(q) + ", key " +
                 dims_string(k) + ")");
  }
  if (v.shape[1] != heads_kv || v.shape[2] != seq_k) {
    return error("value " + dims_string(v) + " must have key's heads_kv and seq_k (key " +
                 dims_string(k) + ")");
  }
  if (head_dim == 0 && seq_k > 0) return error("head_dim must be at least 1, got 0");
  if (heads_kv == 0 ? heads_q != 0 : heads_q % heads_kv != 0) {
    return error("heads_q (" + std::to_string(heads_q) + ") must be a multiple of heads_kv (" +
                 std::to_string(heads_kv) + ") for grouped-query attention");
  }
  const int64_t want_out[4] = {batch, heads_q, seq_q, head_dim_v};
  for (int i = 0; i < 4; ++i) {
    if (o.shape[i] != want_out[i]) {
      return error("output shape " + dims_string(o) + " must be [batch, heads_q, seq_q, " +
                   "head_dim_v] = " + dims_string(want_out));
    }
  }
  for (int i = 0; i < 4 && numel(o) > 0; ++i) {
    if (o.shape[i] > 1 && stride_of(o, i) == 0) {
      return error("output has stride 0 on dim " + std::to_string(i) +
                   " of size > 1: its elements would overlap");
    }
  }
  if (head_dim > kMaxHeadDim || head_dim_v > kMaxHeadDim) {
    return error("head_dim " + std::to_string(head_dim) + " and head_dim_v " +
                 std::to_string(head_dim_v) + ": the GPU kernels take head dims up to " +
                 std::to_string(kMaxHeadDim));
  }
  if (batch > kMaxGridYZ || heads_q > kMaxGridYZ) {
    return error("batch " + std::to_string(batch) + " and heads_q " + std::to_string(heads_q) +
                 " must each be at most " + std::to_string(kMaxGridYZ) +
                 " (one grid dimension each)");
  }
  if (!fits_int32(seq_q) || !fits_int32(seq_k)) {
    return error("seq_q " + std::to_string(seq_q) + " and seq_k " + std::to_string(seq_k) +
                 " must fit in 32 bits");
  }

  const double s =
      scale ? *scale : (head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0);
  if (!std::isfinite(s)) return error("scale must be finite, got " + std::to_string(s));

  p.batch = static_cast<int32_t>(batch);
  p.heads_q = static_cast<int32_t>(heads_q);
  p.heads_kv = static_cast<int32_t>(heads_kv);
  p.seq_q = static_cast<int32_t>(seq_q);
  p.seq_k = static_cast<int32_t>(seq_k);
  p.head_dim = static_cast<int32_t>(head_dim);
  p.head_dim_v = static_cast<int32_t>(head_dim_v);
  p.group = heads_kv > 0 ? static_cast<int32_t>(heads_q / heads_kv) : 1;
  p.scale = static_cast<float>(s);
  p.causal = causal ? 1 : 0;
  p.device_id = q.device.device_id;
  p.q = base_ptr(q);
  p.k = base_ptr(k);
  p.v = base_ptr(v);
  p.out = const_cast<char*>(base_ptr(o));
  for (int d = 0; d < 4; ++d) {
    p.q_stride[d] = stride_of(q, d);
    p.k_stride[d] = stride_of(k, d);
    p.v_stride[d] = stride_of(v, d);
    p.out_stride[d] = stride_of(o, d);
  }
  p.vector_loads =
      vectorizable(q, head_dim) && vectorizable(k, head_dim) && vectorizable(v, head_dim_v);

  const Span out_span = span_of(o);
  for (int i = 0; i < 3; ++i) {
    if (overlaps(out_span, span_of(*all[i]))) {
      return error(std::string("output overlaps ") + names[i] +
                   " in memory; write the result to a separate buffer");
    }
  }

  p.mask_type = MaskType::kNone;
  if (tensors.mask) {
    const DLTensor& m = *tensors.mask;
    if (Result r = check_tensor(&m, "mask", false, "", platform); !r.ok()) return r;
    if (m.device.device_id != q.device.device_id) {
      return error("mask is on GPU " + std::to_string(m.device.device_id) +
                   " but query is on GPU " + std::to_string(q.device.device_id) +
                   "; all tensors must be on one GPU");
    }
    if (m.ndim > 4) {
      return error("mask has " + std::to_string(m.ndim) + " dims " + dims_string(m) +
                   "; it must broadcast to [batch, heads_q, seq_q, seq_k] (at most 4 dims)");
    }
    const DLDataType mt = m.dtype;
    if (mt.lanes == 1 && mt.bits == 8 && (mt.code == kDLBoolCode || mt.code == kDLUInt)) {
      p.mask_type = MaskType::kBool;
    } else if (mt.lanes == 1 && mt.code == kDLFloat && mt.bits == 32) {
      p.mask_type = MaskType::kAdditiveF32;
    } else if (mt.lanes == 1 && mt.code == q.dtype.code && mt.bits == q.dtype.bits) {
      p.mask_type =
          p.dtype == ElementType::kBfloat16 ? MaskType::kAdditiveBf16 : MaskType::kAdditiveF16;
    } else {
      return error("mask has dtype " + dtype_string(mt) +
                   "; expected bool (keep where true), or an additive float32 or " +
                   dtype_string(q.dtype) + " (the query's dtype)");
    }
    const int64_t target[4] = {batch, heads_q, seq_q, seq_k};
    p.mask = base_ptr(m);
    for (int d = 0; d < 4; ++d) {
      const int md = d - (4 - m.ndim);
      if (md < 0) {
        p.mask_stride[d] = 0;
        continue;
      }
      const int64_t size = m.shape[md];
      if (size != target[d] && size != 1) {
        return error("mask shape " + dims_string(m) +
                     " does not broadcast to [batch, heads_q, seq_q, seq_k] = " +
                     dims_string(target) + ": mask dim " + std::to_string(md) + " is " +
                     std::to_string(size) + ", expected " + std::to_string(target[d]) + " or 1");
      }
      p.mask_stride[d] = size == 1 ? 0 : stride_of(m, md);
    }
    if (overlaps(out_span, span_of(m))) {
      return error("output overlaps mask in memory; write the result to a separate buffer");
    }
  }
  *params = p;
  return {};
}

}  // namespace backplane::attention::gpu
