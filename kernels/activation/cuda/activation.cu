// The CUDA gated activations and their backward: grid-stride loops over the output elements;
// each reads its gate and multiplier from the input row. float32 arithmetic with the CUDA math
// library's expf, erff and tanhf (the backward's slopes: expf and erfcf).
#include <algorithm>

#include "activation/dispatch.hpp"
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

// act(x) and act'(x) for the backward, in float32 with the CUDA math library.
struct ActAndSlope {
  float act, slope;
};
template <Activation A>
__device__ __forceinline__ ActAndSlope act_and_slope(float x) {
  if constexpr (A == Activation::kSilu) {
    const float s = 1.0f / (1.0f + expf(-x));
    const float q = 1.0f / (1.0f + expf(x));  // 1 - s, without the cancellation
    return {x * s, s + x * s * q};
  } else if constexpr (A == Activation::kGelu) {
    const float phi = 0.5f * erfcf(-x * 0.70710678118654752f);
    const float density = 0.39894228040143268f * expf(-0.5f * x * x);
    return {x * phi, phi + x * density};
  } else {
    const float k = 2.0f * 0.79788456080286536f;  // 2 sqrt(2 / pi)
    const float y = k * (x + 0.044715f * x * x * x);
    const float s = 1.0f / (1.0f + expf(-y)), q = 1.0f / (1.0f + expf(y));
    const float t = x * s * q;  // 0 where s or 1 - s underflows; the slope below may be inf there
    const float du = k * (1.0f + 3.0f * 0.044715f * x * x);
    return {x * s, s + (t == 0.0f ? 0.0f : t * du)};
  }
}

template <Activation A, class S>
__global__ void gated_backward(DeviceRows grad_output, DeviceRows input, DeviceRows grad_input,
                               int64_t rows, int64_t d) {
  const int64_t total = rows * d;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t row = e / d, col = e % d;
    const S* x = reinterpret_cast<const S*>(input.data) + input.offset(row);
    const float g =
        to_float(reinterpret_cast<const S*>(grad_output.data)[grad_output.offset(row) + col]);
    S* gi = reinterpret_cast<S*>(grad_input.data) + grad_input.offset(row);
    const ActAndSlope a = act_and_slope<A>(to_float(x[col]));
    gi[col] = from_float<S>(g * to_float(x[d + col]) * a.slope);
    gi[d + col] = from_float<S>(g * a.act);
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

constexpr int kThreads = 256;

// Blocks of a grid-stride loop over `total` elements.
unsigned grid_blocks(int64_t total) {
  return static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535 * 8));
}

template <Activation A, DType T>
void launch(const Problem& p, cudaStream_t stream) {
  using S = typename kernels::gpu::Storage<T>::type;
  const auto kernel = gated<A, S>;
  BACKPLANE_LAUNCH(kernel, grid_blocks(p.rows * p.d), kThreads, stream,
                   kernels::gpu::device_rows(p.input), kernels::gpu::device_rows(p.output), p.rows,
                   p.d);
}

template <Activation A, DType T>
void launch_backward(const BackwardProblem& p, cudaStream_t stream) {
  using S = typename kernels::gpu::Storage<T>::type;
  const auto kernel = gated_backward<A, S>;
  BACKPLANE_LAUNCH(kernel, grid_blocks(p.rows * p.d), kThreads, stream,
                   kernels::gpu::device_rows(p.grad_output), kernels::gpu::device_rows(p.input),
                   kernels::gpu::device_rows(p.grad_input), p.rows, p.d);
}

}  // namespace

Status forward_cuda(Activation activation, const DLTensor* input, const DLTensor* output,
                    void* stream) {
  Problem p;
  Status s = make_problem(activation, input, output, kernels::Memory::kCuda, &p);
  if (!s.ok() || p.rows == 0 || p.d == 0) return s;
  for_activation_and_dtype(activation, p.dtype, [&](auto a, auto t) {
    launch<decltype(a)::value, decltype(t)::value>(p, static_cast<cudaStream_t>(stream));
  });
  return kernels::gpu::launch_status(op_name(activation));
}

Status backward_cuda(Activation activation, const DLTensor* grad_output, const DLTensor* input,
                     const DLTensor* grad_input, void* stream) {
  BackwardProblem p;
  Status s =
      make_backward_problem(activation, grad_output, input, grad_input, kernels::Memory::kCuda, &p);
  if (!s.ok() || p.rows == 0 || p.d == 0) return s;
  for_activation_and_dtype(activation, p.dtype, [&](auto a, auto t) {
    launch_backward<decltype(a)::value, decltype(t)::value>(p, static_cast<cudaStream_t>(stream));
  });
  return kernels::gpu::launch_status(backward_op_name(activation));
}

}  // namespace backplane::activation
