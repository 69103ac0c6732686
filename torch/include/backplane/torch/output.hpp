// Output tensors for the bridge's layers and attention, and for programs that want the same: on
// the CPU, a large output comes from a process-wide cache of 2 MiB-aligned, huge-page-advised
// blocks (torch/src/output_blocks.hpp), so that a layer called in a loop reuses the pages of the
// output its previous call freed instead of faulting in fresh ones (a fresh 64 MiB output cost
// more than the RMSNorm kernel that fills it: docs/performance.md "Allocating outputs"). Small
// outputs and other devices come from LibTorch's own allocator (CUDA's caches already).
//
// The cache keeps at most BACKPLANE_OUTPUT_CACHE_MIB MiB of idle blocks (default 512; 0 turns
// reuse off). A cached output's storage is not resizable (it is LibTorch's "from_blob" kind):
// resize_ on it throws; every other use is an ordinary contiguous tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>

namespace backplane::torch {

// A contiguous, uninitialized tensor, as at::empty(sizes, options).
at::Tensor empty_output(at::IntArrayRef sizes, const at::TensorOptions& options);

struct OutputCacheStats {
  std::uint64_t reused = 0;      // large outputs served from idle blocks
  std::uint64_t mapped = 0;      // large outputs that mapped a new block
  std::size_t cached_bytes = 0;  // idle bytes held now
};
OutputCacheStats output_cache_stats();
// Unmaps every idle block (e.g. after a phase that used large outputs).
void trim_output_cache();

}  // namespace backplane::torch
