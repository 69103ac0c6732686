#include "common/tensor.hpp"

#include <limits>
#include <sstream>

namespace backplane::kernels {
namespace {

// DLPack 0.8 added kDLBool (6); Debian's header (0.6) predates it.
constexpr uint8_t kDLBoolCode = 6;
constexpr int kMaxDims = 8;  // Rows and the attention operands hold at most 8 dims
// No tensor byte lies at or above this address: 64-bit Linux gives user space at most 2^56
// bytes (x86-64 with 5-level paging; arm64 stops at 2^52), and GPU unified addresses lie
// below it too. A byte_offset that reaches past it is refused before any pointer is formed,
// which also rules out wrapping around the address space.
constexpr uint64_t kAddressLimit =
    sizeof(uintptr_t) == 8 ? uint64_t{1} << 56 : std::numeric_limits<uintptr_t>::max();

std::string device_name(int type) {
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
      return "device type " + std::to_string(type);
  }
}

bool on(const DLTensor& t, Memory memory) {
  const int type = t.device.device_type;
  switch (memory) {
    case Memory::kHost:
      return type == kDLCPU || type == kDLCUDAHost;
    case Memory::kCuda:
      return type == kDLCUDA || type == kDLCUDAManaged;
    case Memory::kRocm:
      return type == kDLROCM;
  }
  return false;
}

const char* accepted_memory(Memory memory) {
  switch (memory) {
    case Memory::kHost:
      return "the CPU kernels need kDLCPU memory";
    case Memory::kCuda:
      return "the GPU kernels need kDLCUDA or kDLCUDAManaged memory";
    case Memory::kRocm:
      return "the GPU kernels need kDLROCM memory";
  }
  return "";
}

std::string strides_string(const DLTensor& t) {
  if (!t.strides) return "NULL (compact)";
  std::ostringstream s;
  s << '[';
  for (int i = 0; i < t.ndim; ++i) s << (i ? ", " : "") << t.strides[i];
  s << ']';
  return s.str();
}

// The lowest and highest element offsets from data + byte_offset that the elements reach (lo
// <= 0 <= hi; negative strides give lo < 0). False when a step overflows int64. Only for a
// tensor with elements.
bool element_reach(const DLTensor& t, int64_t* lo, int64_t* hi) {
  *lo = 0;
  *hi = 0;
  for (int i = 0; i < t.ndim; ++i) {
    int64_t reach = 0;
    if (__builtin_mul_overflow(t.shape[i] - 1, stride_of(t, i), &reach)) return false;
    if (__builtin_add_overflow(reach < 0 ? *lo : *hi, reach, reach < 0 ? lo : hi)) return false;
  }
  return true;
}

// The same in bytes, `hi` one past the last byte. False on overflow.
bool byte_reach(const DLTensor& t, int64_t* lo, int64_t* hi) {
  int64_t lo_elements = 0, hi_elements = 0;
  if (!element_reach(t, &lo_elements, &hi_elements)) return false;
  const int64_t es = element_bytes(t);
  return !__builtin_mul_overflow(lo_elements, es, lo) &&
         !__builtin_add_overflow(hi_elements, 1, &hi_elements) &&
         !__builtin_mul_overflow(hi_elements, es, hi);
}

struct Span {
  uintptr_t lo = 0, hi = 0;
  bool empty() const { return lo == hi; }
};

// Valid once check_layout and check_data passed.
Span span_of(const DLTensor& t) {
  int64_t lo = 0, hi = 0;
  if (!t.data || numel(t) == 0 || !byte_reach(t, &lo, &hi)) return {};
  const auto base = reinterpret_cast<uintptr_t>(base_of(t));
  return {base - static_cast<uintptr_t>(-lo), base + static_cast<uintptr_t>(hi)};
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

bool same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
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

int64_t element_bytes(const DLTensor& t) {
  return (t.dtype.bits * t.dtype.lanes + 7) / 8;
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

Status check_placement(const char* op, const DLTensor* t, const char* name, Memory memory) {
  const std::string n(name);
  if (!t) return invalid(op, n + " is NULL");
  if (!on(*t, memory)) {
    return invalid(op, n + " is on device " + device_name(t->device.device_type) + "; " +
                           accepted_memory(memory));
  }
  const int id = t->device.device_id;
  if (memory == Memory::kHost && id != 0) {
    return invalid(op, n + " has device_id " + std::to_string(id) + "; host memory (" +
                           device_name(t->device.device_type) + ") has device_id 0");
  }
  if (id < 0) {
    return invalid(
        op, n + " has device_id " + std::to_string(id) + "; expected a GPU ordinal (0 or more)");
  }
  return Status::Ok();
}

Status check_same_device(const char* op, const DLTensor& t, const char* name, const DLTensor& other,
                         const char* other_name) {
  if (t.device.device_id == other.device.device_id) return Status::Ok();
  return invalid(op, std::string(name) + " is on GPU " + std::to_string(t.device.device_id) +
                         " but " + other_name + " is on GPU " +
                         std::to_string(other.device.device_id) +
                         "; all tensors must be on one GPU");
}

Status check_layout(const char* op, const DLTensor& t, const char* name, int min_ndim) {
  const std::string n(name);
  if (t.ndim < min_ndim || t.ndim > kMaxDims || (t.ndim > 0 && !t.shape)) {
    return invalid(op, n + " must have " + std::to_string(min_ndim) + " to " +
                           std::to_string(kMaxDims) + " dims and a shape, got ndim " +
                           std::to_string(t.ndim) +
                           (t.ndim > 0 && !t.shape ? " and shape NULL" : ""));
  }
  int64_t product = 1;  // of the nonzero sizes: it bounds every compact stride too
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) return invalid(op, n + " has a negative size in shape " + dims_string(t));
    if (t.shape[i] > 0 && __builtin_mul_overflow(product, t.shape[i], &product)) {
      return invalid(op, n + " shape " + dims_string(t) +
                             " has more elements than an int64 counts; each size must be a real "
                             "extent of the tensor");
    }
  }
  int64_t lo = 0, hi = 0;
  if (numel(t) > 0 && !byte_reach(t, &lo, &hi)) {
    return invalid(op, n + " with shape " + dims_string(t) + ", strides " + strides_string(t) +
                           " and " + std::to_string(element_bytes(t)) +
                           "-byte elements spans more bytes than an int64 offset reaches");
  }
  return Status::Ok();
}

Status check_data(const char* op, const DLTensor& t, const char* name) {
  const std::string n(name);
  if (numel(t) == 0) return Status::Ok();
  if (!t.data) return invalid(op, n + " data is NULL");
  const int64_t es = element_bytes(t);
  if (es == 0) return invalid(op, n + " has dtype " + dtype_string(t.dtype) + " of 0 bits");
  int64_t lo = 0, hi = 0;
  byte_reach(t, &lo, &hi);  // no overflow: check_layout passed
  const auto data = reinterpret_cast<uintptr_t>(t.data);
  if (data >= kAddressLimit || t.byte_offset >= kAddressLimit - data ||
      static_cast<uint64_t>(hi) > kAddressLimit - data - t.byte_offset) {
    return invalid(op, n + " data + byte_offset " + std::to_string(t.byte_offset) +
                           " + its span of " + std::to_string(hi) +
                           " bytes ends past the user address space; byte_offset must stay "
                           "inside the tensor's allocation");
  }
  const uintptr_t base = data + t.byte_offset;
  if (lo < 0 && base < static_cast<uintptr_t>(-lo)) {
    return invalid(op, n + " has negative strides " + strides_string(t) + " that reach " +
                           std::to_string(-lo) +
                           " bytes before data + byte_offset, below address 0");
  }
  if (base % static_cast<uintptr_t>(es) != 0) {
    return invalid(op, n + " data (data + byte_offset) is not aligned to its " +
                           std::to_string(es) + "-byte elements");
  }
  return Status::Ok();
}

Status check_tensor(const char* op, const DLTensor* t, const char* name, Memory memory,
                    DType* dtype) {
  const std::string n(name);
  Status s = check_placement(op, t, name, memory);
  if (s.ok()) s = check_layout(op, *t, name, 1);
  if (!s.ok()) return s;
  if (!to_dtype(t->dtype, dtype)) {
    return invalid(
        op, n + " has dtype " + dtype_string(t->dtype) + "; supported: float32, bfloat16, float16");
  }
  s = check_data(op, *t, name);
  if (!s.ok()) return s;
  const int last = t->ndim - 1;
  if (numel(*t) > 0 && t->shape[last] > 1 && stride_of(*t, last) != 1) {
    return invalid(op, n + " must be contiguous in its last dim (stride 1), got stride " +
                           std::to_string(stride_of(*t, last)) + " for shape " + dims_string(*t) +
                           "; the leading dims may have any strides");
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
  if (same_dtype(t.dtype, other.dtype)) return Status::Ok();
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
    int64_t compact_outer = 0;  // the stride of the dim before when the two merge
    if (r.lead > 0 && !__builtin_mul_overflow(s, t.shape[i], &compact_outer) &&
        r.stride[r.lead - 1] == compact_outer) {
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
