// Source: transformers 5.24.0 activations.py (ACT2CLS, each class's __init__, and the Hub
// layer name its use_kernel_forward_from_hub decorator gives it).
#include "activation.hpp"

namespace backplane::model_detail {
namespace {

struct Activation {
  std::string_view name;
  std::string_view class_name;
  std::string_view kernel_layer;  // "" where the class is not kernelizable
};

constexpr Activation kActivations[] = {
    {"gelu", "GELUActivation", "GeLU"},
    {"gelu_10", "ClippedGELUActivation", ""},
    {"gelu_fast", "FastGELUActivation", "FastGELU"},
    {"gelu_new", "NewGELUActivation", "NewGELU"},
    {"gelu_python", "GELUActivation", "GeLU"},
    {"gelu_pytorch_tanh", "GELUTanh", "GeluTanh"},
    {"gelu_python_tanh", "GELUTanh", "GeluTanh"},
    {"gelu_accurate", "AccurateGELUActivation", ""},
    {"hardswish", "Hardswish", ""},
    {"laplace", "LaplaceActivation", ""},
    {"leaky_relu", "LeakyReLU", ""},
    {"linear", "LinearActivation", ""},
    {"mish", "MishActivation", ""},
    {"quick_gelu", "QuickGELUActivation", "QuickGELU"},
    {"relu", "ReLU", ""},
    {"relu2", "ReLUSquaredActivation", ""},
    {"relu6", "ReLU6", ""},
    {"sigmoid", "Sigmoid", ""},
    {"silu", "SiLUActivation", "SiLU"},
    {"sqrtsoftplus", "SqrtSoftplusActivation", ""},
    {"swish", "SiLU", ""},
    {"tanh", "Tanh", ""},
    {"prelu", "PReLU", ""},
    {"xielu", "XIELUActivation", ""},
};

TensorInfo state(const char* name, std::vector<int64_t> shape, DType dtype, bool buffer) {
  TensorInfo tensor;
  tensor.name = name;
  tensor.shape = std::move(shape);
  tensor.dtype = dtype;
  tensor.buffer = buffer;
  return tensor;
}

}  // namespace

std::optional<Module> activation_module(std::string_view activation, std::string name,
                                        DType dtype) {
  for (const Activation& entry : kActivations) {
    if (entry.name != activation) continue;
    Module result;
    result.name = std::move(name);
    result.class_name = std::string(entry.class_name);
    if (entry.name == "prelu") {
      result.tensors.push_back(state("weight", {1}, dtype, false));
    } else if (entry.name == "xielu") {
      // XIELUActivation creates its state in bfloat16 whatever the model's dtype.
      result.tensors.push_back(state("alpha_p", {1}, DType::kBFloat16, false));
      result.tensors.push_back(state("alpha_n", {1}, DType::kBFloat16, false));
      result.tensors.push_back(state("beta", {}, DType::kBFloat16, true));
      result.tensors.push_back(state("eps", {}, DType::kBFloat16, true));
    }
    return result;
  }
  return std::nullopt;
}

std::string_view activation_kernel_layer(std::string_view class_name) {
  for (const Activation& entry : kActivations) {
    if (entry.class_name == class_name) return entry.kernel_layer;
  }
  return {};
}

std::string activation_names() {
  std::string names;
  for (const Activation& entry : kActivations) {
    if (!names.empty()) names += ", ";
    names += entry.name;
  }
  return names;
}

}  // namespace backplane::model_detail
