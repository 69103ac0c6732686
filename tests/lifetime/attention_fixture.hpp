// A small fixed attention problem for the lifetime tests: float32 tensors that own their data,
// filled from a fixed seed, and the call's arguments.
#pragma once

#include <backplane/plugin.h>

#include "owned_tensor.hpp"

namespace backplane::testing {

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
