// A float32 host tensor that owns its data, filled from a fixed seed (0: zeros) or by a
// function of the element's index, with its DLPack view: the tests that call kernels with small
// made-up problems.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

namespace backplane::testing {

struct OwnedTensor {
  std::vector<float> data;
  std::vector<int64_t> shape;
  DLTensor dl{};

  OwnedTensor(std::vector<int64_t> dims, unsigned seed)
      : OwnedTensor(std::move(dims), [rng = std::mt19937(seed),
                                      dist = std::uniform_real_distribution<float>(-1.f, 1.f),
                                      seed](int64_t) mutable { return seed ? dist(rng) : 0.f; }) {}

  // Element i (in memory order) is value(i).
  template <class Value, class = std::enable_if_t<std::is_invocable_r_v<float, Value&, int64_t>>>
  OwnedTensor(std::vector<int64_t> dims, Value value) : shape(std::move(dims)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    data.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) data.push_back(value(i));
    dl.data = data.data();
    dl.device = {kDLCPU, 0};
    dl.ndim = static_cast<int32_t>(shape.size());
    dl.dtype = {kDLFloat, 32, 1};
    dl.shape = shape.data();
  }
  OwnedTensor(const OwnedTensor&) = delete;
  OwnedTensor& operator=(const OwnedTensor&) = delete;
};

}  // namespace backplane::testing
