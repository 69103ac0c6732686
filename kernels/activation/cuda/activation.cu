// The CUDA gated activations: a grid-stride loop over the output elements; each reads its gate
// and multiplier from the input row. float32 arithmetic with the CUDA math library's expf,
// erff and tanhf.
#include <algorithm>

#include "activation/problem.hpp"
#include "common/cuda_rows.cuh"

namespace backplane::activation {
namespace {

using kernels::DType;
using kernels::gpu::DeviceRows;
using kernels::gpu::from_float;
using kernels::gpu::to_float;

template <Activation A>
__device__ __forceinline__ float act(float x) {
  if constexpr (A == Activation::kSilu) {
    return x / (1.0f + expf(-x));
  } else if constexpr (A == Activation::kGelu) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  } else {
    const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
  }
}

template <Activation A, class S>
__global__ void gated(DeviceRows input, DeviceRows output, int64_t rows, int64_t d) {
  const int64_t total = rows * d;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t row = e / d, col = e % d;
    const S* x = reinterpret_cast<const S*>(input.data) + input.offset(row);
    S* out = reinterpret_cast<S*>(output.data) + output.offset(row);
    out[col] = from_float<S>(act<A>(to_float(x[col])) * to_float(x[d + col]));
  }
}

template <Activation A, DType T>
void launch(const Problem& p, cudaStream_t stream) {
  using S = typename kernels::gpu::Storage<T>::type;
  constexpr int kThreads = 256;
  const int64_t total = p.rows * p.d;
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535 * 8));
  const auto kernel = gated<A, S>;
  BACKPLANE_LAUNCH(kernel, blocks, kThreads, stream, kernels::gpu::device_rows(p.input),
                   kernels::gpu::device_rows(p.output), p.rows, p.d);
}

template <Activation A>
void launch_typed(const Problem& p, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kF32:
      return launch<A, DType::kF32>(p, stream);
    case DType::kBF16:
      return launch<A, DType::kBF16>(p, stream);
    case DType::kF16:
      return launch<A, DType::kF16>(p, stream);
  }
}

}  // namespace

Status forward_cuda(Activation activation, const DLTensor* input, const DLTensor* output,
                    void* stream) {
  Problem p;
  Status s = make_problem(activation, input, output, kernels::Memory::kCuda, &p);
  if (!s.ok() || p.rows == 0 || p.d == 0) return s;
  const auto cu_stream = static_cast<cudaStream_t>(stream);
  switch (activation) {
    case Activation::kSilu:
      launch_typed<Activation::kSilu>(p, cu_stream);
      break;
    case Activation::kGelu:
      launch_typed<Activation::kGelu>(p, cu_stream);
      break;
    case Activation::kGeluTanh:
      launch_typed<Activation::kGeluTanh>(p, cu_stream);
      break;
  }
  return kernels::gpu::launch_status(op_name(activation));
}

}  // namespace backplane::activation
