#include "common/tensor.hpp"

#include <sstream>

namespace backplane::kernels {
namespace {

// DLPack 0.8 added kDLBool (6); Debian's header (0.6) predates it.
constexpr uint8_t kDLBoolCode = 6;

const char* device_name(int type) {
  switch (type) {
    case kDLCPU:
      return "kDLCPU";
    case kDLCUDA:
      return "kDLCUDA";
    case kDLCUDAHost:
      return "kDLCUDAHost";
    case kDLCUDAManaged:
      return "kDLCUDAManaged";
    case kDLROCM:
      return "kDLROCM";
    case kDLROCMHost:
      return "kDLROCMHost";
    case kDLMetal:
      return "kDLMetal";
    case kDLVulkan:
      return "kDLVulkan";
    case kDLOpenCL:
      return "kDLOpenCL";
    default:
      return "an unknown device type";
  }
}

bool on(const DLTensor& t, Memory memory) {
  const int type = t.device.device_type;
  if (memory == Memory::kHost) return type == kDLCPU || type == kDLCUDAHost;
  return type == kDLCUDA || type == kDLCUDAManaged;
}

bool to_dtype(DLDataType t, DType* out) {
  if (t.lanes != 1) return false;
  if (t.code == kDLFloat && t.bits == 32) {
    *out = DType::kF32;
  } else if (t.code == kDLBfloat && t.bits == 16) {
    *out = DType::kBF16;
  } else if (t.code == kDLFloat && t.bits == 16) {
    *out = DType::kF16;
  } else {
    return false;
  }
  return true;
}

int64_t element_bytes(const DLTensor& t) {
  return (t.dtype.bits * t.dtype.lanes + 7) / 8;
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
  const auto base = reinterpret_cast<uintptr_t>(base_of(t));
  return {base + static_cast<uintptr_t>(lo * es), base + static_cast<uintptr_t>((hi + 1) * es)};
}

}  // namespace

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "float32";
    case DType::kBF16:
      return "bfloat16";
    case DType::kF16:
      return "float16";
  }
  return "unknown";
}

std::string dims_string(const DLTensor& t) {
  std::ostringstream s;
  s << '[';
  for (int i = 0; i < t.ndim; ++i) s << (i ? ", " : "") << t.shape[i];
  s << ']';
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
    case kDLComplex:
      base = "complex";
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

int64_t numel(const DLTensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

int64_t stride_of(const DLTensor& t, int dim) {
  if (t.strides) return t.strides[dim];
  int64_t s = 1;
  for (int j = t.ndim - 1; j > dim; --j) s *= t.shape[j];
  return s;
}

char* base_of(const DLTensor& t) {
  return static_cast<char*>(t.data) + t.byte_offset;
}

Status invalid(const char* op, const std::string& message) {
  return Status::InvalidArgument(std::string(op) + ": " + message);
}

Status check_tensor(const char* op, const DLTensor* t, const char* name, Memory memory,
                    DType* dtype) {
  const std::string n(name);
  if (!t) return invalid(op, n + " is NULL");
  if (!on(*t, memory)) {
    return invalid(op, n + " is on device " + device_name(t->device.device_type) +
                           (memory == Memory::kHost
                                ? "; the CPU kernels need kDLCPU memory"
                                : "; the CUDA kernels need kDLCUDA (or kDLCUDAManaged) memory"));
  }
  if (t->ndim < 1 || t->ndim > 8 || !t->shape) {
    return invalid(op, n + " must have 1 to 8 dims and a shape, got ndim " +
                           std::to_string(t->ndim) + (t->shape ? "" : " and shape NULL"));
  }
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 0) return invalid(op, n + " has a negative size in shape " + dims_string(*t));
  }
  if (!to_dtype(t->dtype, dtype)) {
    return invalid(
        op, n + " has dtype " + dtype_string(t->dtype) + "; supported: float32, bfloat16, float16");
  }
  if (numel(*t) > 0) {
    if (!t->data) return invalid(op, n + " data is NULL");
    const auto es = static_cast<uintptr_t>(element_bytes(*t));
    if (reinterpret_cast<uintptr_t>(base_of(*t)) % es != 0) {
      return invalid(op, n + " data (data + byte_offset) is not aligned to its " +
                             std::to_string(es) + "-byte elements");
    }
    const int last = t->ndim - 1;
    if (t->shape[last] > 1 && stride_of(*t, last) != 1) {
      return invalid(op, n + " must be contiguous in its last dim (stride 1), got stride " +
                             std::to_string(stride_of(*t, last)) + " for shape " + dims_string(*t) +
                             "; the leading dims may have any strides");
    }
  }
  return Status::Ok();
}

Status check_written(const char* op, const DLTensor& t, const char* name) {
  if (numel(t) == 0) return Status::Ok();
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] > 1 && stride_of(t, i) == 0) {
      return invalid(op, std::string(name) + " has stride 0 on dim " + std::to_string(i) +
                             " of size > 1: the kernel writes it, and its elements would overlap");
    }
  }
  return Status::Ok();
}

Status check_same_dtype(const char* op, const DLTensor& t, const char* name, const DLTensor& other,
                        const char* other_name) {
  if (t.dtype.code == other.dtype.code && t.dtype.bits == other.dtype.bits &&
      t.dtype.lanes == other.dtype.lanes) {
    return Status::Ok();
  }
  return invalid(op, std::string(name) + " has dtype " + dtype_string(t.dtype) + " but " +
                         other_name + " has " + dtype_string(other.dtype) + "; they must match");
}

Status check_same_shape(const char* op, const DLTensor& t, const char* name, const DLTensor& other,
                        const char* other_name) {
  bool same = t.ndim == other.ndim;
  for (int i = 0; same && i < t.ndim; ++i) same = t.shape[i] == other.shape[i];
  if (same) return Status::Ok();
  return invalid(op, std::string(name) + " shape " + dims_string(t) + " must equal " + other_name +
                         "'s " + dims_string(other));
}

bool overlaps(const DLTensor& a, const DLTensor& b) {
  const Span x = span_of(a), y = span_of(b);
  return !x.empty() && !y.empty() && x.lo < y.hi && y.lo < x.hi;
}

bool same_view(const DLTensor& a, const DLTensor& b) {
  if (base_of(a) != base_of(b) || a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i) {
    if (a.shape[i] != b.shape[i]) return false;
    if (a.shape[i] > 1 && stride_of(a, i) != stride_of(b, i)) return false;
  }
  return true;
}

Rows rows_of(const DLTensor& t) {
  Rows r;
  r.data = base_of(t);
  r.cols = t.shape[t.ndim - 1];
  r.rows = 1;
  // Leading dims, outermost first, size-1 dims dropped, compact neighbours merged.
  for (int i = 0; i < t.ndim - 1; ++i) {
    r.rows *= t.shape[i];
    if (t.shape[i] == 1) continue;
    const int64_t s = stride_of(t, i);
    if (r.lead > 0 && r.stride[r.lead - 1] == s * t.shape[i]) {
      r.shape[r.lead - 1] *= t.shape[i];
      r.stride[r.lead - 1] = s;
    } else {
      r.shape[r.lead] = t.shape[i];
      r.stride[r.lead] = s;
      ++r.lead;
    }
  }
  if (r.lead == 0) {  // one row (or none)
    r.lead = 1;
    r.shape[0] = 1;
    r.stride[0] = 0;
  }
  return r;
}

}  // namespace backplane::kernels
