// The public entry points: validation, dispatch to eager or sdpa, no exception escapes.

#include "attention/attention.hpp"
#include "common/thread_pool.hpp"
#include "cpu/problem.hpp"

#include <cstring>

namespace backplane::attention {

const char* implementation_name(Implementation impl) {
  switch (impl) {
    case Implementation::kSdpa:
      return "sdpa";
    case Implementation::kEager:
      return "eager";
  }
  return "unknown";
}

Status validate(const Tensors& tensors, const Options& options) {
  return kernels::guarded_call("attention", "", [&] {
    cpu::Problem p;
    return cpu::make_problem(tensors, options, &p);
  });
}

Status forward(const Tensors& tensors, const Options& options, RunInfo* info) {
  return kernels::guarded_call("attention", " for the kernel's buffers", [&]() -> Status {
    cpu::Problem p;
    Status s = cpu::make_problem(tensors, options, &p);
    if (!s.ok()) return s;
    const int threads = kernels::ThreadPool::global().threads();
    if (info) *info = RunInfo{"", "", threads};
    if (p.batch == 0 || p.heads_q == 0 || p.seq_q == 0) return s;
    if (p.head_dim_v == 0) {  // nothing to write but the logsumexp, which eager computes
      if (p.lse.data) cpu::run_eager(p, threads);
      return s;
    }
    switch (options.implementation) {
      case Implementation::kEager:
        cpu::run_eager(p, threads);
        break;
      case Implementation::kSdpa:
        cpu::run_sdpa(p, threads, info);
        break;
      default:
        return {StatusCode::kInvalidArgument,
                "attention: unknown implementation; expected "
                "Implementation::kSdpa or kEager"};
    }
    return s;
  });
}

Status backward(const BackwardTensors& tensors, const Options& options, RunInfo* info) {
  return kernels::guarded_call("attention_backward", " for the kernel's buffers", [&]() -> Status {
    cpu::BackwardProblem p;
    Status s = cpu::make_backward_problem(tensors, options, &p);
    if (!s.ok()) return s;
    const int threads = kernels::ThreadPool::global().threads();
    if (info) *info = RunInfo{"", "", threads};
    // No query rows still leaves grad_key and grad_value to zero.
    if (p.fwd.batch == 0 || p.fwd.heads_kv == 0) return s;
    cpu::run_sdpa_backward(p, threads, info);
    return s;
  });
}

void set_num_threads(int n) {
  kernels::ThreadPool::global().set_threads(n);
}

int num_threads() {
  return kernels::ThreadPool::global().threads();
}

const char* dispatch_target() {
  return cpu::sdpa_target();
}

bool has_amx_bf16() {
  return cpu::amx_bf16_available();
}

const char* bf16_tile_kernel() {
  const bool avx3 = std::strncmp(cpu::sdpa_target(), "AVX3", 4) == 0;
  if (avx3 && cpu::amx_bf16_available()) return "amx-bf16";
  if (avx3 && cpu::dpbf16_tiles_available()) return "avx512-bf16";
  return "f32-fma";
}

}  // namespace backplane::attention
