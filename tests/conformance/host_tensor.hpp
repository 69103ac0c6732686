// Tensors the conformance suite makes in host memory for kernel calls: a DLTensor over its own
// buffer, values written and read as float whatever the dtype (float32, bfloat16, float16).
#pragma once

#include <backplane/plugin.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace backplane::conformance {

// The DLPack dtype of a kernel requirement's name ("float32", "bfloat16", "float16",
// "float64"); nullopt for any other name.
std::optional<DLDataType> dlpack_dtype(const std::string& name);

class HostTensor {
 public:
  HostTensor(std::vector<int64_t> shape, DLDataType dtype, DLDevice device);
  HostTensor(const HostTensor&) = delete;
  HostTensor& operator=(const HostTensor&) = delete;

  DLTensor& dl() { return tensor_; }
  const DLTensor* get() const { return &tensor_; }
  int64_t size() const;
  // Element i (row-major), stored rounded to the dtype; read back as float.
  void set(int64_t i, float value);
  float get(int64_t i) const;
  // Fills with values in [-1, 1) from `seed`, deterministic.
  void fill_random(uint32_t seed);
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<int64_t> shape_;
  std::vector<uint8_t> bytes_;
  DLTensor tensor_{};
};

}  // namespace backplane::conformance
