// Outputs at any alignment. The CPU layer kernels, forward and backward, stream a large output
// with non-temporal stores from the first lane whose address lines up with a register
// (StreamStart, common/simd-inl.h) and store the lanes before it plainly; RMSNorm's bfloat16
// weight is converted for the pairs that start there. A caller's own buffer seldom starts on a
// line (glibc's malloc puts a large block 16 bytes past a page), so each case writes into an
// output that does and again into one shifted by a few elements, over the streaming threshold
// (8 MiB), with rows whose length is not a whole number of registers too (each row then starts
// at a different alignment): the bits must not change.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <hwy/highway.h>

#include <cstdint>
#include <string>
#include <vector>

#include "activation/activation.hpp"
#include "per_target.hpp"
#include "rmsnorm/rmsnorm.hpp"
#include "torch_dlpack.hpp"

namespace backplane {
namespace {

using testing::dtype_label;
using testing::kDTypes;
using testing::PerTarget;
using testing::Target;
using testing::TargetParamName;
using testing::targets_to_test;
using testing::TorchView;

// The targets with streaming stores (kCanStream, common/simd-inl.h: AVX2 and AVX-512). Elsewhere
// every output is stored plainly whatever its alignment, as the composite tests already check;
// those targets took 47 of these tests' 73 s in ctest.
class StreamingTarget : public PerTarget {};

std::vector<Target> streaming_targets() {
  std::vector<Target> out;
  for (const Target& t : targets_to_test()) {
    if (HWY_ARCH_X86 && t.target <= HWY_AVX2) out.push_back(t);
  }
  return out;
}

// Elements the shifted outputs start past a 64-byte line: 4 and 32 bytes for float32, 2 and 16
// for the 16-bit types (16: where malloc's large blocks start).
const int64_t kShifts[] = {1, 8};

// Each shape's output is at least 8 MiB in every dtype; the second's rows are an odd length.
const std::vector<int64_t> kShapes[] = {{2048, 2048}, {2100, 2047}};

// A [rows, cols] tensor of dtype whose data starts `shift` elements past a 64-byte line.
at::Tensor shifted_empty(int64_t rows, int64_t cols, at::ScalarType dtype, int64_t shift) {
  const at::Tensor block = at::empty({rows * cols + 64}, at::TensorOptions().dtype(dtype));
  const auto start = reinterpret_cast<std::uintptr_t>(block.data_ptr());
  const int64_t to_line = static_cast<int64_t>((64 - start % 64) % 64) / block.element_size();
  return block.narrow(0, to_line + shift, rows * cols).view({rows, cols});
}

// `run(shift)` writes a case into an output `shift` elements past a line and returns everything
// it wrote, flattened into one tensor: each shift must give the bits of shift 0.
template <class Run>
void expect_the_same_bits_at_each_shift(const Run& run, at::ScalarType dtype,
                                        const std::string& what) {
  const at::Tensor lined_up = run(int64_t{0});
  for (int64_t shift : kShifts) {
    SCOPED_TRACE(what + ", " + dtype_label(dtype) + ", written " + std::to_string(shift) +
                 " elements past a line");
    EXPECT_TRUE(at::equal(run(shift), lined_up));
  }
}

const activation::Activation kActivations[] = {activation::Activation::kSilu,
                                               activation::Activation::kGelu,
                                               activation::Activation::kGeluTanh};

TEST_P(StreamingTarget, RmsNormOutputsAtAnyAlignmentGiveTheSameBits) {
  for (const std::vector<int64_t>& shape : kShapes) {
    for (at::ScalarType dtype : kDTypes) {
      for (bool residual : {false, true}) {
        const at::Tensor x = at::randn(shape).to(dtype);
        const at::Tensor w = at::randn({shape[1]}).to(dtype);
        const at::Tensor res = at::randn(shape).to(dtype);
        auto run = [&](int64_t shift) {
          const at::Tensor out = shifted_empty(shape[0], shape[1], dtype, shift);
          const at::Tensor res_after = res.clone();
          const TorchView xv(x), wv(w), ov(out), rv(res_after);
          rmsnorm::Tensors t;
          t.input = xv;
          t.weight = wv;
          t.output = ov;
          if (residual) t.residual = rv;
          const kernels::Status s = rmsnorm::forward_cpu(t, 1e-6);
          EXPECT_TRUE(s.ok()) << s.message;
          return at::cat({out.flatten(), res_after.flatten()});
        };
        expect_the_same_bits_at_each_shift(
            run, dtype,
            "rms_norm " + c10::str(at::IntArrayRef(shape)) + (residual ? " +residual" : ""));
      }
    }
  }
}

TEST_P(StreamingTarget, GatedActivationOutputsAtAnyAlignmentGiveTheSameBits) {
  for (const std::vector<int64_t>& shape : kShapes) {
    for (at::ScalarType dtype : kDTypes) {
      const at::Tensor x = (at::randn({shape[0], 2 * shape[1]}) * 4).to(dtype);
      for (activation::Activation a : kActivations) {
        auto run = [&](int64_t shift) {
          const at::Tensor out = shifted_empty(shape[0], shape[1], dtype, shift);
          const TorchView xv(x), ov(out);
          const kernels::Status s = activation::forward_cpu(a, xv, ov);
          EXPECT_TRUE(s.ok()) << s.message;
          return out;
        };
        expect_the_same_bits_at_each_shift(
            run, dtype,
            std::string(activation::op_name(a)) + " " + c10::str(at::IntArrayRef(shape)));
      }
    }
  }
}

TEST_P(StreamingTarget, RmsNormInputGradientsAtAnyAlignmentGiveTheSameBits) {
  for (const std::vector<int64_t>& shape : kShapes) {
    for (at::ScalarType dtype : kDTypes) {
      const at::Tensor x = at::randn(shape).to(dtype), grad = at::randn(shape).to(dtype);
      const at::Tensor w = (at::rand({shape[1]}) + 0.5).to(dtype);
      auto run = [&](int64_t shift) {
        const at::Tensor grad_input = shifted_empty(shape[0], shape[1], dtype, shift);
        const at::Tensor grad_weight = at::empty({shape[1]}, x.options());
        const TorchView gv(grad), xv(x), wv(w), giv(grad_input), gwv(grad_weight);
        rmsnorm::BackwardTensors t;
        t.grad_output = gv;
        t.input = xv;
        t.weight = wv;
        t.grad_input = giv;
        t.grad_weight = gwv;
        const kernels::Status s = rmsnorm::backward_cpu(t, 1e-6);
        EXPECT_TRUE(s.ok()) << s.message;
        return at::cat({grad_input.flatten(), grad_weight});
      };
      expect_the_same_bits_at_each_shift(run, dtype,
                                         "rms_norm_backward " + c10::str(at::IntArrayRef(shape)));
    }
  }
}

TEST_P(StreamingTarget, GatedActivationInputGradientsAtAnyAlignmentGiveTheSameBits) {
  for (const std::vector<int64_t>& shape : kShapes) {
    for (at::ScalarType dtype : kDTypes) {
      const at::Tensor x = (at::randn({shape[0], 2 * shape[1]}) * 4).to(dtype);
      const at::Tensor grad = at::randn(shape).to(dtype);
      for (activation::Activation a : kActivations) {
        auto run = [&](int64_t shift) {
          const at::Tensor grad_input = shifted_empty(shape[0], 2 * shape[1], dtype, shift);
          const TorchView gv(grad), xv(x), giv(grad_input);
          const kernels::Status s = activation::backward_cpu(a, gv, xv, giv);
          EXPECT_TRUE(s.ok()) << s.message;
          return grad_input;
        };
        expect_the_same_bits_at_each_shift(
            run, dtype,
            std::string(activation::backward_op_name(a)) + " " + c10::str(at::IntArrayRef(shape)));
      }
    }
  }
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(StreamingTarget);  // a CPU without AVX2
INSTANTIATE_TEST_SUITE_P(Targets, StreamingTarget, ::testing::ValuesIn(streaming_targets()),
                         TargetParamName);

}  // namespace
}  // namespace backplane
