// What the GPU plugins' attention kernel tests share (backends/cuda/tests, backends/rocm/tests):
// the arguments of one call, at addresses no kernel should ever read, and the error it gives.
#pragma once

#include <backplane/error.hpp>
#include <backplane/runtime/kernels.hpp>

#include <cstdint>
#include <string>

namespace backplane::testing {

constexpr DLDataType kBf16{kDLBfloat, 16, 1};
constexpr DLDataType kF32{kDLFloat, 32, 1};

// q, k, v and output of shape [1, 2, 4, 64] on one device, at made-up addresses: enough for the
// checks a kernel makes before it touches memory. `args` points into this object, so it is
// neither copied nor moved.
struct AttentionCall {
  int64_t shape[4] = {1, 2, 4, 64};
  DLTensor q{}, k{}, v{}, out{};
  bp_attention_args args{};

  AttentionCall(DLDevice device, DLDataType dtype) {
    DLTensor* all[] = {&q, &k, &v, &out};
    for (size_t i = 0; i < 4; ++i) {
      all[i]->data = reinterpret_cast<void*>((uintptr_t{i} + 1) << 30);
      all[i]->device = device;
      all[i]->ndim = 4;
      all[i]->dtype = dtype;
      all[i]->shape = shape;
    }
    args.struct_size = sizeof args;
    args.query = &q;
    args.key = &k;
    args.value = &v;
    args.output = &out;
  }
  AttentionCall(const AttentionCall&) = delete;
  AttentionCall& operator=(const AttentionCall&) = delete;
};

// The error message of a call, or "" when it succeeded.
inline std::string call_error(const AttentionKernel& kernel, const bp_attention_args& args) {
  try {
    kernel(args);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace backplane::testing
