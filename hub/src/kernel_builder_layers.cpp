// The kernel-builder layers a C++ host can call (kernel_builder.hpp): kernels-community's
// activation package (layers.py over its _ops: silu_and_mul, gelu_and_mul, ...), RMSNorm as
// rms_norm(out, input, weight, epsilon), and rotary in place. Data: a new layer is a row.
#include <backplane/hub/kernel_builder.hpp>

#include <algorithm>

namespace backplane::hub {

const std::vector<KernelBuilderLayer>& kernel_builder_layers() {
  using C = KernelBuilderLayer::Call;
  static const std::vector<KernelBuilderLayer> table = [] {
    std::vector<KernelBuilderLayer> rows = {
        {"FastGELU", "gelu_fast", nullptr, C::kOutInput, "gelu, tanh approximation (fast)"},
        {"FatreluAndMul", "fatrelu_and_mul", nullptr, C::kOutInputFloat,
         "x[..., :d] > threshold ? x[..., :d] : 0, times x[..., d:]"},
        {"Gelu", "gelu", nullptr, C::kOutInput, "gelu (erf)"},
        {"GeluAndMul", "gelu_and_mul", nullptr, C::kOutInput, "gelu(x[..., :d]) * x[..., d:]"},
        {"GeluTanh", "gelu_tanh", nullptr, C::kOutInput, "gelu (tanh approximation)"},
        {"GeluTanhAndMul", "gelu_tanh_and_mul", nullptr, C::kOutInput,
         "gelu_tanh(x[..., :d]) * x[..., d:]"},
        {"MulAndSilu", "mul_and_silu", nullptr, C::kOutInput, "x[..., :d] * silu(x[..., d:])"},
        {"NewGELU", "gelu_new", nullptr, C::kOutInput, "gelu (tanh approximation, GPT-2's)"},
        {"QuickGELU", "gelu_quick", nullptr, C::kOutInput, "x * sigmoid(1.702 x)"},
        {"RMSNorm", "rms_norm", "rms_norm_backward", C::kRmsNorm,
         "x * rsqrt(mean(x^2) + epsilon) * weight"},
        {"RotaryEmbedding", "rotary_embedding", nullptr, C::kRotaryInPlace,
         "rotary position embedding of query and key, in place"},
        {"Silu", "silu", nullptr, C::kOutInput, "silu"},
        {"SiluAndMul", "silu_and_mul", nullptr, C::kOutInput, "silu(x[..., :d]) * x[..., d:]"},
    };
    std::sort(rows.begin(), rows.end(),
              [](const KernelBuilderLayer& a, const KernelBuilderLayer& b) {
                return std::string_view(a.layer) < b.layer;
              });
    return rows;
  }();
  return table;
}

const KernelBuilderLayer* find_kernel_builder_layer(std::string_view layer) {
  for (const KernelBuilderLayer& row : kernel_builder_layers()) {
    if (layer == row.layer) return &row;
  }
  return nullptr;
}

}  // namespace backplane::hub
