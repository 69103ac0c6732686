// The GPU backward's source on CPU threads (gpu_emulator.hpp), after the GPU forward that saves
// its logsumexp (flash for bf16 and f16, eager for every dtype), against the float64 reference
// of tests/kernels/attention_testing.hpp: the logsumexp, the output and the three gradients.
// Small shapes: every GPU thread is a CPU thread here.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention_testing.hpp"
#include "emulated_kernels.hpp"
#include "validate.hpp"

namespace backplane::attention {
namespace {

using testing::Case;
using testing::HostTensor;
using testing::Instance;
using testing::MaskType;
using testing::rel_error;
using DType = cpu::DType;

struct GpuCase {
  Case c;
  gpu::Kernel forward;
};

void PrintTo(const GpuCase& g, std::ostream* os) {
  *os << g.c.name;
}

// The same storage seen as GPU memory (the emulator reads host memory).
DLTensor on_gpu(const HostTensor& t) {
  DLTensor d = *t.dl();
  d.device = {kDLCUDA, 0};
  return d;
}

HostTensor like(const HostTensor& t, const Case& c) {
  std::vector<int> perm;
  if (c.transposed && t.shape().size() == 4) perm = {0, 2, 1, 3};
  return HostTensor(t.shape(), t.dl()->dtype, perm);
}

class EmulatedBackward : public ::testing::TestWithParam<GpuCase> {};

TEST_P(EmulatedBackward, MatchesTheFloat64Reference) {
  const Case& c = GetParam().c;
  Instance in(c);
  HostTensor dout = like(in.out, c), dq = like(in.q, c), dk = like(in.k, c), dv = like(in.v, c);
  HostTensor lse({c.batch, c.heads_q, c.seq_q}, {kDLFloat, 32, 1});
  std::mt19937 rng(99);
  dout.fill_normal(rng);
  const DLTensor q = on_gpu(in.q), k = on_gpu(in.k), v = on_gpu(in.v), out = on_gpu(in.out);
  const DLTensor mask = in.has_mask ? on_gpu(in.mask) : DLTensor{};
  const DLTensor l = on_gpu(lse), g = on_gpu(dout), gq = on_gpu(dq), gk = on_gpu(dk),
                 gv = on_gpu(dv);

  Tensors f;
  f.query = &q, f.key = &k, f.value = &v, f.output = &out, f.logsumexp = &l;
  f.mask = in.has_mask ? &mask : nullptr;
  gpu::Params params{};
  Status s = gpu::make_params(f, c.causal, std::nullopt, GetParam().forward, gpu::Platform::kCuda,
                              &params);
  ASSERT_TRUE(s.ok()) << s.message;
  if (GetParam().forward == gpu::Kernel::kFlash) {
    gpu::emulate_flash_nvidia(params);
  } else {
    gpu::emulate_eager(params);
  }

  BackwardTensors bt;
  bt.query = &q, bt.key = &k, bt.value = &v, bt.mask = f.mask, bt.output = &out;
  bt.logsumexp = &l, bt.grad_output = &g, bt.grad_query = &gq, bt.grad_key = &gk;
  bt.grad_value = &gv;
  gpu::BackwardParams bp{};
  s = gpu::make_backward_params(bt, c.causal, std::nullopt, gpu::Platform::kCuda, &bp);
  ASSERT_TRUE(s.ok()) << s.message;
  gpu::emulate_eager_backward(bp);

  const testing::Gradients ref = testing::reference_backward(in, dout);
  const std::vector<float> got_lse = lse.logical();
  for (size_t i = 0; i < got_lse.size(); ++i) {
    if (std::isinf(ref.lse[i])) {
      ASSERT_EQ(got_lse[i], -INFINITY) << "row " << i;
    } else {
      ASSERT_NEAR(got_lse[i], ref.lse[i], 1e-4 * (1.0 + std::fabs(ref.lse[i]))) << "row " << i;
    }
  }
  const double tol = testing::tolerance(c.dtype);
  EXPECT_LE(rel_error(dq.logical(), ref.dq), tol) << "grad_query";
  EXPECT_LE(rel_error(dk.logical(), ref.dk), tol) << "grad_key";
  EXPECT_LE(rel_error(dv.logical(), ref.dv), tol) << "grad_value";
}

std::vector<GpuCase> gpu_cases() {
  const auto f32 = DType::kF32, bf16 = DType::kBF16, f16 = DType::kF16;
  return {
      {{"flash_bf16_gqa_causal_bool_transposed",
        1,
        4,
        2,
        40,
        40,
        64,
        true,
        bf16,
        MaskType::kBool,
        {},
        true},
       gpu::Kernel::kFlash},
      {{"flash_f16_d128_additive_q5_k70", 1, 2, 1, 5, 70, 128, false, f16, MaskType::kAdditive},
       gpu::Kernel::kFlash},
      {{"eager_f32_mqa_causal_q9_k33", 2, 3, 1, 9, 33, 96, true, f32}, gpu::Kernel::kEager},
      {{"eager_bf16_q20_k8_causal_empty_rows", 1, 2, 2, 20, 8, 64, true, bf16},
       gpu::Kernel::kEager},
      {{"eager_f32_d64_dv32", 1, 2, 2, 17, 150, 64, false, f32, MaskType::kNone, {}, false, 32},
       gpu::Kernel::kEager},
  };
}

INSTANTIATE_TEST_SUITE_P(Kernels, EmulatedBackward, ::testing::ValuesIn(gpu_cases()),
                         [](const ::testing::TestParamInfo<GpuCase>& i) { return i.param.c.name; });

TEST(EmulatedBackward, RefusalsNameTheBackward) {
  Instance in(Case{"r", 1, 2, 2, 4, 4, 300, false, DType::kF32});
  HostTensor lse({1, 2, 4}, {kDLFloat, 32, 1});
  const DLTensor q = on_gpu(in.q), k = on_gpu(in.k), v = on_gpu(in.v), out = on_gpu(in.out);
  const DLTensor l = on_gpu(lse);
  BackwardTensors bt;
  bt.query = &q, bt.key = &k, bt.value = &v, bt.output = &out, bt.logsumexp = &l;
  bt.grad_output = &out;
  gpu::BackwardParams bp{};
  Status s = gpu::make_backward_params(bt, false, std::nullopt, gpu::Platform::kCuda, &bp);
  EXPECT_NE(s.message.find("attention_backward: grad_query is NULL"), std::string::npos)
      << s.message;
  const DLTensor gq = on_gpu(in.out), gk = on_gpu(in.k), gv = on_gpu(in.v);
  HostTensor dq(in.q.shape(), in.q.dl()->dtype), dk(in.k.shape(), in.k.dl()->dtype),
      dv(in.v.shape(), in.v.dl()->dtype), dout(in.out.shape(), in.out.dl()->dtype);
  const DLTensor g = on_gpu(dout), gq2 = on_gpu(dq), gk2 = on_gpu(dk), gv2 = on_gpu(dv);
  (void)gq, (void)gk, (void)gv;
  bt.grad_output = &g, bt.grad_query = &gq2, bt.grad_key = &gk2, bt.grad_value = &gv2;
  s = gpu::make_backward_params(bt, false, std::nullopt, gpu::Platform::kCuda, &bp);
  EXPECT_NE(s.message.find("attention_backward: head_dim 300 and head_dim_v 300: the GPU "
                           "kernels take head dims up to 256"),
            std::string::npos)
      << s.message;
  const DLTensor host_q = *in.q.dl();
  bt.query = &host_q;
  s = gpu::make_backward_params(bt, false, std::nullopt, gpu::Platform::kCuda, &bp);
  EXPECT_NE(s.message.find("attention_backward: query is on device kDLCPU"), std::string::npos)
      << s.message;
}

}  // namespace
}  // namespace backplane::attention
