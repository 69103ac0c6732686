// A float32 host tensor that owns its data, filled from a fixed seed (0: zeros), with its
// DLPack view: the tests that call attention kernels with small made-up problems.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <random>
#include <vector>

namespace backplane::testing {

struct OwnedTensor {
  std::vector<float> data;
  std::vector<int64_t> shape;
  DLTensor dl{};

  OwnedTensor(std::vector<int64_t> dims, unsigned seed) : shape(std::move(dims)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    data.resize(static_cast<size_t>(n));
    if (seed != 0) {
      std::mt19937 rng(seed);
      std::uniform_real_distribution<float> dist(-1.f, 1.f);
      for (float& x : data) x = dist(rng);
    }
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
