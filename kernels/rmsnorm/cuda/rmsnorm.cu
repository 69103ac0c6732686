// The CUDA RMSNorm: one block per row; each thread sums the squares of a strided share of the
// row (adding and writing back the residual first), a block reduction gives the row's inverse
// RMS, and the same threads scale the same elements.
//
// The backward, deterministic without atomics or scratch memory, in three kernels on the stream:
//   1. per row: r = rsqrt(mean(x^2) + eps), parked as float32 bits in the first 4 bytes of the
//      row's grad_input (rewritten by kernel 3; a 16-bit row of one element has only 2 bytes and
//      kernel 2 recomputes its r instead);
//   2. per column: grad_weight[c] = sum over the rows, in row order, of g x r (float32, rounded
//      once), each thread one column, reading its rows' r from kernel 1;
//   3. per row: grad_input = r (g w - x r^2 mean(g w x)) (+ grad_residual).
#include <algorithm>

#include "common/cuda_rows.cuh"
#include "rmsnorm/problem.hpp"

namespace backplane::rmsnorm {
namespace {

using kernels::DType;
using kernels::gpu::DeviceRows;
using kernels::gpu::from_float;
using kernels::gpu::to_float;

constexpr int kMaxThreads = 1024;

__device__ float block_sum(float v) {
  __shared__ float partial[kMaxThreads / 32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x + 31) / 32;
  v = lane < warps ? partial[lane] : 0.0f;
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;  // every thread has the sum
}

template <class S, bool kResidual>
__global__ void rms_norm_rows(DeviceRows input, DeviceRows residual, DeviceRows output,
                              const S* weight, int64_t hidden, float epsilon) {
  const int64_t row = blockIdx.x;
  const S* x = reinterpret_cast<const S*>(input.data) + input.offset(row);
  S* r = kResidual ? reinterpret_cast<S*>(residual.data) + residual.offset(row) : nullptr;
  S* out = reinterpret_cast<S*>(output.data) + output.offset(row);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = to_float(x[i]);
    if (kResidual) {
      const S rounded = from_float<S>(v + to_float(r[i]));
      r[i] = rounded;
      v = to_float(rounded);
    }
    sum += v * v;
  }
  sum = block_sum(sum);
  const float inv_rms = rsqrtf(sum / static_cast<float>(hidden) + epsilon);
  const S* src = kResidual ? r : x;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    out[i] = from_float<S>(to_float(src[i]) * inv_rms * to_float(weight[i]));
  }
}

template <class S>
__device__ float row_rstd(const S* x, int64_t hidden, float epsilon) {
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = to_float(x[i]);
    sum += v * v;
  }
  sum = block_sum(sum);
  return rsqrtf(sum / static_cast<float>(hidden) + epsilon);
}

// Where kernel 1 parks a row's r: the first 4 bytes of its grad_input row, when it has them.
template <class S>
__device__ bool parks_rstd(int64_t hidden) {
  return static_cast<int64_t>(sizeof(S)) * hidden >= 4;
}

template <class S>
__global__ void rms_norm_backward_rstd(DeviceRows input, DeviceRows grad_input, int64_t hidden,
                                       float epsilon) {
  const int64_t row = blockIdx.x;
  const float r =
      row_rstd(reinterpret_cast<const S*>(input.data) + input.offset(row), hidden, epsilon);
  if (threadIdx.x == 0 && parks_rstd<S>(hidden)) {
    char* dst = grad_input.data + grad_input.offset(row) * static_cast<int64_t>(sizeof(S));
    memcpy(dst, &r, sizeof r);
  }
}

template <class S>
__global__ void rms_norm_backward_weight(DeviceRows grad_output, DeviceRows input,
                                         DeviceRows grad_input, S* grad_weight, int64_t rows,
                                         int64_t hidden, float epsilon) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= hidden) return;
  float acc = 0.0f;
  for (int64_t row = 0; row < rows; ++row) {
    const S* x = reinterpret_cast<const S*>(input.data) + input.offset(row);
    const S* g = reinterpret_cast<const S*>(grad_output.data) + grad_output.offset(row);
    float r;
    if (parks_rstd<S>(hidden)) {
      memcpy(&r, grad_input.data + grad_input.offset(row) * static_cast<int64_t>(sizeof(S)),
             sizeof r);
    } else {  // one 16-bit element per row
      const float v = to_float(x[0]);
      r = rsqrtf(v * v + epsilon);
    }
    acc += to_float(g[c]) * to_float(x[c]) * r;
  }
  grad_weight[c] = from_float<S>(acc);
}

template <class S, bool kResidual>
__global__ void rms_norm_backward_input(DeviceRows grad_output, DeviceRows input,
                                        DeviceRows grad_residual, DeviceRows grad_input,
                                        const S* weight, int64_t hidden, float epsilon) {
  const int64_t row = blockIdx.x;
  const S* x = reinterpret_cast<const S*>(input.data) + input.offset(row);
  const S* g = reinterpret_cast<const S*>(grad_output.data) + grad_output.offset(row);
  S* gx = reinterpret_cast<S*>(grad_input.data) + grad_input.offset(row);
  const S* gr = kResidual
                    ? reinterpret_cast<const S*>(grad_residual.data) + grad_residual.offset(row)
                    : nullptr;
  float sum = 0.0f, dot = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = to_float(x[i]);
    sum += v * v;
    dot += to_float(g[i]) * to_float(weight[i]) * v;
  }
  sum = block_sum(sum);
  __syncthreads();  // block_sum's shared partials are reused
  dot = block_sum(dot);
  const float r = rsqrtf(sum / static_cast<float>(hidden) + epsilon);
  const float mean_dot = dot / static_cast<float>(hidden);
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = r * (to_float(g[i]) * to_float(weight[i]) - to_float(x[i]) * r * r * mean_dot);
    if (kResidual) v += to_float(gr[i]);
    gx[i] = from_float<S>(v);
  }
}

int row_threads(int64_t hidden) {
  return static_cast<int>(std::min<int64_t>(
      kMaxThreads, std::max<int64_t>(32, (std::min<int64_t>(hidden, 256) + 31) / 32 * 32)));
}

template <DType T>
void launch_backward(const BackwardProblem& p, cudaStream_t stream) {
  using S = typename kernels::gpu::Storage<T>::type;
  const int threads = row_threads(p.hidden);
  const DeviceRows g = kernels::gpu::device_rows(p.grad_output);
  const DeviceRows x = kernels::gpu::device_rows(p.input);
  const DeviceRows gr = kernels::gpu::device_rows(p.grad_residual);
  const DeviceRows gx = kernels::gpu::device_rows(p.grad_input);
  const auto* w = static_cast<const S*>(p.weight);
  auto* gw = static_cast<S*>(p.grad_weight);
  const auto rows = static_cast<unsigned>(p.rows);
  // No rows: only the weight gradient, zeros (a grid of no blocks is not a launch).
  if (rows > 0) {
    BACKPLANE_LAUNCH(rms_norm_backward_rstd<S>, rows, threads, stream, x, gx, p.hidden, p.epsilon);
  }
  constexpr int kColumns = 256;
  const auto column_blocks = static_cast<unsigned>((p.hidden + kColumns - 1) / kColumns);
  BACKPLANE_LAUNCH(rms_norm_backward_weight<S>, column_blocks, kColumns, stream, g, x, gx, gw,
                   p.rows, p.hidden, p.epsilon);
  const auto input_kernel =
      p.grad_residual.data ? rms_norm_backward_input<S, true> : rms_norm_backward_input<S, false>;
  if (rows > 0) {
    BACKPLANE_LAUNCH(input_kernel, rows, threads, stream, g, x, gr, gx, w, p.hidden, p.epsilon);
  }
}

template <DType T>
void launch(const Problem& p, cudaStream_t stream) {
  using S = typename kernels::gpu::Storage<T>::type;
  const int threads = row_threads(p.hidden);
  const DeviceRows in = kernels::gpu::device_rows(p.input);
  const DeviceRows res = kernels::gpu::device_rows(p.residual);
  const DeviceRows out = kernels::gpu::device_rows(p.output);
  const auto* w = static_cast<const S*>(p.weight);
  const auto blocks = static_cast<unsigned>(p.rows);
  const auto kernel = p.residual.data ? rms_norm_rows<S, true> : rms_norm_rows<S, false>;
  BACKPLANE_LAUNCH(kernel, blocks, threads, stream, in, res, out, w, p.hidden, p.epsilon);
}

}  // namespace

Status forward_cuda(const Tensors& tensors, double epsilon, void* stream) {
  Problem p;
  Status s = make_problem(tensors, epsilon, kernels::Memory::kCuda, &p);
  if (!s.ok() || p.rows == 0 || p.hidden == 0) return s;
  if (p.rows > 0x7fffffff) return kernels::invalid("rms_norm", "more than 2^31 - 1 rows");
  const auto cu_stream = static_cast<cudaStream_t>(stream);
  switch (p.dtype) {
    case DType::kF32:
      launch<DType::kF32>(p, cu_stream);
      break;
    case DType::kBF16:
      launch<DType::kBF16>(p, cu_stream);
      break;
    case DType::kF16:
      launch<DType::kF16>(p, cu_stream);
      break;
  }
  return kernels::gpu::launch_status("rms_norm");
}

Status backward_cuda(const BackwardTensors& tensors, double epsilon, void* stream) {
  BackwardProblem p;
  Status s = make_backward_problem(tensors, epsilon, kernels::Memory::kCuda, &p);
  if (!s.ok() || p.hidden == 0) return s;
  if (p.rows > 0x7fffffff) return kernels::invalid("rms_norm_backward", "more than 2^31 - 1 rows");
  const auto cu_stream = static_cast<cudaStream_t>(stream);
  switch (p.dtype) {
    case DType::kF32:
      launch_backward<DType::kF32>(p, cu_stream);
      break;
    case DType::kBF16:
      launch_backward<DType::kBF16>(p, cu_stream);
      break;
    case DType::kF16:
      launch_backward<DType::kF16>(p, cu_stream);
      break;
  }
  return kernels::gpu::launch_status("rms_norm_backward");
}

}  // namespace backplane::rmsnorm
