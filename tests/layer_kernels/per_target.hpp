// Test helper for the CPU layer kernels against LibTorch: each SIMD target Highway compiled that
// this CPU runs, as a GoogleTest parameter (PerTarget), and the closeness check the kernels'
// contract states (one rounding per result, plus float32 noise).
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <ostream>
#include <string>
#include <vector>

#include "common/bf16_instruction.hpp"

namespace backplane::testing {

inline const at::ScalarType kDTypes[] = {at::kFloat, at::kBFloat16, at::kHalf};

inline std::string dtype_label(at::ScalarType t) {
  return t == at::kFloat ? "f32" : t == at::kBFloat16 ? "bf16" : "f16";
}

// |ours - ref| <= atol + rtol |ref| everywhere (atol a number, or a tensor of ref's shape).
inline void expect_close(const at::Tensor& ours, const at::Tensor& ref, double rtol,
                         const at::Tensor& atol, const std::string& what) {
  const at::Tensor o = ours.to(at::kDouble), r = ref.to(at::kDouble);
  ASSERT_EQ(o.sizes(), r.sizes()) << what;
  const at::Tensor err = (o - r).abs();
  const at::Tensor bad = err.le(atol.to(at::kDouble) + rtol * r.abs()).logical_not();  // NaN: bad
  const int64_t n_bad = bad.sum().item<int64_t>();
  if (n_bad == 0) return;
  const int64_t first = bad.flatten().nonzero()[0].item<int64_t>();
  ADD_FAILURE() << what << ": " << n_bad << " of " << o.numel() << " elements off; the first, #"
                << first << ", is " << o.flatten()[first].item<double>() << " instead of "
                << r.flatten()[first].item<double>();
}
inline void expect_close(const at::Tensor& ours, const at::Tensor& ref, double rtol, double atol,
                         const std::string& what) {
  expect_close(ours, ref, rtol, at::scalar_tensor(atol, at::kDouble), what);
}

// One rounding to dtype, relative.
inline double rounding_rtol(at::ScalarType dtype) {
  return dtype == at::kFloat ? 2e-5 : dtype == at::kBFloat16 ? 8e-3 : 1e-3;
}

// The kernels' contract: one rounding to dtype per result, plus float32 noise.
inline void expect_close(const at::Tensor& ours, const at::Tensor& ref, at::ScalarType dtype,
                         const std::string& what) {
  expect_close(ours, ref, rounding_rtol(dtype), dtype == at::kFloat ? 1e-6 : 1e-5, what);
}

// Highway's own pattern: each target this CPU supports, in turn; the AVX-512 targets twice
// where the CPU has AVX512-BF16: with its float32 -> bfloat16 instruction and without.
struct Target {
  int64_t target;
  bool bf16_instruction;
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const Target& x, std::ostream* os) {
  *os << hwy::TargetName(x.target) << (x.bf16_instruction ? " (bf16 instruction)" : "");
}

inline std::vector<Target> targets_to_test() {
  std::vector<Target> out;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
    out.push_back({t, false});
    if ((t == HWY_AVX3 || t == HWY_AVX3_DL) && kernels::cpu_has_bf16_instruction()) {
      out.push_back({t, true});
    }
  }
  return out;
}

class PerTarget : public ::testing::TestWithParam<Target> {
 protected:
  void SetUp() override {
    hwy::SetSupportedTargetsForTest(GetParam().target);
    kernels::use_bf16_instruction(GetParam().bf16_instruction);
    at::manual_seed(7);
  }
  void TearDown() override {
    hwy::SetSupportedTargetsForTest(0);
    kernels::use_bf16_instruction(true);
  }
  const char* target_name() const { return hwy::TargetName(GetParam().target); }
};

inline std::string TargetParamName(const ::testing::TestParamInfo<Target>& info) {
  return std::string(hwy::TargetName(info.param.target)) +
         (info.param.bf16_instruction ? "_bf16_instruction" : "");
}

}  // namespace backplane::testing
