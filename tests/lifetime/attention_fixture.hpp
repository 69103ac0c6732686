// A small fixed attention problem for the lifetime tests: float32 tensors that own their data,
// filled from a fixed seed, and the call's arguments.
#pragma once

#include <backplane/plugin.h>

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

// GQA 4 query heads over 2 KV heads, 7 queries against 11 keys, head_dim 32, causal.
struct AttentionProblem {
  OwnedTensor q{{1, 4, 7, 32}, 1}, k{{1, 2, 11, 32}, 2}, v{{1, 2, 11, 32}, 3};

  // Arguments writing into `out` (shape {1, 4, 7, 32}).
  bp_attention_args args(const OwnedTensor& out) const {
    bp_attention_args a{};
    a.struct_size = sizeof a;
    a.query = &q.dl;
    a.key = &k.dl;
    a.value = &v.dl;
    a.output = &out.dl;
    a.causal = 1;
    return a;
  }
  static OwnedTensor output() { return OwnedTensor({1, 4, 7, 32}, 0); }
};

}  // namespace backplane::testing
