#include "host_tensor.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace backplane::conformance {
namespace {

uint16_t float_to_bfloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even (finite values only here)
  return static_cast<uint16_t>(bits >> 16);
}

float bfloat16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// IEEE half from float, rounded to nearest; the suite's values are in [-1, 1], so normal or
// subnormal halves only.
uint16_t float_to_half(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
  const float a = std::fabs(f);
  if (a == 0.0f) return sign;
  int exponent = 0;
  const float mantissa = std::frexp(a, &exponent);  // a = mantissa * 2^exponent, [0.5, 1)
  const int half_exponent = exponent + 14;          // biased exponent of 1.m form
  if (half_exponent <= 0) {                         // subnormal: units of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t m = static_cast<uint32_t>(std::nearbyint((mantissa * 2.0f - 1.0f) * 1024.0f));
  uint32_t e = static_cast<uint32_t>(half_exponent);
  if (m == 1024u) {
    m = 0;
    ++e;
  }
  return static_cast<uint16_t>(sign | (e << 10) | m);
}

float half_to_float(uint16_t h) {
  const float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -24);
  return sign * std::ldexp(1.0f + static_cast<float>(m) / 1024.0f, e - 15);
}

}  // namespace

std::optional<DLDataType> dlpack_dtype(const std::string& name) {
  if (name == "float32") return DLDataType{kDLFloat, 32, 1};
  if (name == "float64") return DLDataType{kDLFloat, 64, 1};
  if (name == "float16") return DLDataType{kDLFloat, 16, 1};
  if (name == "bfloat16") return DLDataType{kDLBfloat, 16, 1};
  return std::nullopt;
}

HostTensor::HostTensor(std::vector<int64_t> shape, DLDataType dtype, DLDevice device)
    : shape_(std::move(shape)) {
  int64_t count = 1;
  for (int64_t s : shape_) count *= s;
  bytes_.assign(static_cast<size_t>(count) * (dtype.bits / 8u) + 1, 0);  // never empty
  tensor_.data = bytes_.data();
  tensor_.device = device;
  tensor_.ndim = static_cast<int32_t>(shape_.size());
  tensor_.dtype = dtype;
  tensor_.shape = shape_.data();
  tensor_.strides = nullptr;
  tensor_.byte_offset = 0;
}

int64_t HostTensor::size() const {
  int64_t count = 1;
  for (int64_t s : shape_) count *= s;
  return count;
}

void HostTensor::set(int64_t i, float value) {
  uint8_t* p = bytes_.data() + static_cast<size_t>(i) * (tensor_.dtype.bits / 8u);
  const DLDataType t = tensor_.dtype;
  if (t.code == kDLFloat && t.bits == 32) {
    std::memcpy(p, &value, 4);
  } else if (t.code == kDLFloat && t.bits == 64) {
    const double d = value;
    std::memcpy(p, &d, 8);
  } else if (t.code == kDLFloat && t.bits == 16) {
    const uint16_t h = float_to_half(value);
    std::memcpy(p, &h, 2);
  } else if (t.code == kDLBfloat && t.bits == 16) {
    const uint16_t h = float_to_bfloat16(value);
    std::memcpy(p, &h, 2);
  } else {
    throw std::logic_error("HostTensor: dtype has no float values");
  }
}

float HostTensor::get(int64_t i) const {
  const uint8_t* p = bytes_.data() + static_cast<size_t>(i) * (tensor_.dtype.bits / 8u);
  const DLDataType t = tensor_.dtype;
  if (t.code == kDLFloat && t.bits == 32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (t.code == kDLFloat && t.bits == 64) {
    double d;
    std::memcpy(&d, p, 8);
    return static_cast<float>(d);
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  if (t.code == kDLFloat && t.bits == 16) return half_to_float(h);
  if (t.code == kDLBfloat && t.bits == 16) return bfloat16_to_float(h);
  throw std::logic_error("HostTensor: dtype has no float values");
}

void HostTensor::fill_random(uint32_t seed) {
  uint32_t state = seed * 2654435761u + 1u;
  for (int64_t i = 0; i < size(); ++i) {
    state = state * 1664525u + 1013904223u;  // a small LCG: values need only be varied
    set(i, static_cast<float>(state >> 8) / 8388608.0f - 1.0f);
  }
}

}  // namespace backplane::conformance
