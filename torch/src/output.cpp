#include <backplane/torch/output.hpp>

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include <functional>
#include <new>

#include "output_blocks.hpp"

namespace backplane::torch {

using detail::OutputBlocks;

at::Tensor empty_output(at::IntArrayRef sizes, const at::TensorOptions& options) {
  if (options.device().type() != c10::DeviceType::CPU || options.layout() != c10::kStrided) {
    return at::empty(sizes, options);
  }
  std::size_t elements = 1;
  for (const int64_t size : sizes) {
    TORCH_CHECK(size >= 0, "empty_output: negative size ", size, " in ", sizes);
    elements *= static_cast<std::size_t>(size);
  }
  const std::size_t bytes = elements * options.dtype().itemsize();
  if (bytes < OutputBlocks::kHugeBlock) return at::empty(sizes, options);
  void* block = OutputBlocks::process().acquire(bytes);
  if (block == nullptr) throw std::bad_alloc();
  return at::from_blob(
      block, sizes, [bytes](void* data) { OutputBlocks::process().release(data, bytes); },
      at::TensorOptions().dtype(options.dtype()).device(options.device()));
}

OutputCacheStats output_cache_stats() {
  const detail::OutputBlockStats now = OutputBlocks::process().stats();
  return {now.reused, now.mapped, now.cached_bytes};
}

void trim_output_cache() {
  OutputBlocks::process().trim();
}

}  // namespace backplane::torch
