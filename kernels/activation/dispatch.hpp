// Internal: one call per activation and dtype, for the CPU and CUDA kernels (forward and
// backward), which are compiled once per pair.
#pragma once

#include <type_traits>

#include "activation/activation.hpp"
#include "common/tensor.hpp"

namespace backplane::activation {

// Calls f(std::integral_constant<Activation, A>{}, std::integral_constant<DType, T>{}).
template <Activation A, class F>
void for_dtype(kernels::DType t, const F& f) {
  using kernels::DType;
  using Act = std::integral_constant<Activation, A>;
  switch (t) {
    case DType::kF32:
      return f(Act{}, std::integral_constant<DType, DType::kF32>{});
    case DType::kBF16:
      return f(Act{}, std::integral_constant<DType, DType::kBF16>{});
    case DType::kF16:
      return f(Act{}, std::integral_constant<DType, DType::kF16>{});
  }
}
template <class F>
void for_activation_and_dtype(Activation a, kernels::DType t, const F& f) {
  switch (a) {
    case Activation::kSilu:
      return for_dtype<Activation::kSilu>(t, f);
    case Activation::kGelu:
      return for_dtype<Activation::kGelu>(t, f);
    case Activation::kGeluTanh:
      return for_dtype<Activation::kGeluTanh>(t, f);
  }
}

}  // namespace backplane::activation
