// The CUDA rotary embedding: a grid-stride loop over every (row, pair) of query and key; each
// thread reads its pair and its cos and sin and writes the pair back in place.
#include <algorithm>

#include "common/cuda_rows.cuh"
#include "rotary/problem.hpp"

namespace backplane::rotary {
namespace {

using kernels::DType;
using kernels::gpu::from_float;
using kernels::gpu::to_float;

template <class S, class C>
__global__ void rotate(Problem p, int64_t heads, bool interleaved) {
  const int64_t total = p.batch * heads * p.seq * p.half;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t i = e % p.half;
    const RowStart r = row_start(p, heads, e / p.half);
    const int64_t b = r.batch, s = r.seq;
    S* x = reinterpret_cast<S*>(r.operand->data) + r.element;
    const float c = to_float(
        reinterpret_cast<const C*>(p.cos.data)[b * p.cos.stride[0] + s * p.cos.stride[1] + i]);
    // The backward rotates back: -sin.
    const float sn = (p.inverse ? -1.0f : 1.0f) *
                     to_float(reinterpret_cast<const C*>(
                         p.sin.data)[b * p.sin.stride[0] + s * p.sin.stride[1] + i]);
    const int64_t j1 = interleaved ? 2 * i : i;
    const int64_t j2 = interleaved ? 2 * i + 1 : i + p.half;
    const float x1 = to_float(x[j1]), x2 = to_float(x[j2]);
    x[j1] = from_float<S>(x1 * c - x2 * sn);
    x[j2] = from_float<S>(x2 * c + x1 * sn);
  }
}

template <DType T, DType C>
void launch(const Problem& p, cudaStream_t stream) {
  using S = typename kernels::gpu::Storage<T>::type;
  using CS = typename kernels::gpu::Storage<C>::type;
  constexpr int kThreads = 256;
  const int64_t heads = p.query.heads + (p.key.data ? p.key.heads : 0);
  const int64_t total = p.batch * heads * p.seq * p.half;
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535 * 8));
  const auto kernel = rotate<S, CS>;
  BACKPLANE_LAUNCH(kernel, blocks, kThreads, stream, p, heads, p.style == Style::kInterleaved);
}

template <DType T>
void launch_table(const Problem& p, cudaStream_t stream) {
  if (p.table_dtype == DType::kF32) return launch<T, DType::kF32>(p, stream);
  return launch<T, T>(p, stream);
}

}  // namespace

namespace {

Status run(const Tensors& tensors, Style style, void* stream, bool inverse) {
  Problem p;
  Status s = make_problem(tensors, style, kernels::Memory::kCuda, &p, inverse);
  if (!s.ok() || p.batch == 0 || p.seq == 0 || p.half == 0) return s;
  const auto cu_stream = static_cast<cudaStream_t>(stream);
  switch (p.dtype) {
    case DType::kF32:
      launch<DType::kF32, DType::kF32>(p, cu_stream);
      break;
    case DType::kBF16:
      launch_table<DType::kBF16>(p, cu_stream);
      break;
    case DType::kF16:
      launch_table<DType::kF16>(p, cu_stream);
      break;
  }
  return kernels::gpu::launch_status(inverse ? "rotary_embedding_backward" : "rotary_embedding");
}

}  // namespace

Status forward_cuda(const Tensors& tensors, Style style, void* stream) {
  return run(tensors, style, stream, false);
}

Status backward_cuda(const Tensors& gradients, Style style, void* stream) {
  return run(gradients, style, stream, true);
}

}  // namespace backplane::rotary
