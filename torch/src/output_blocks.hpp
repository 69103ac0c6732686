// Host memory for outputs that are allocated on every call (the layers' `norm(x)`): a block freed
// by one call is kept for the next call that asks for the same size, so that a layer called in a
// loop writes into pages it already has instead of faulting in fresh ones.
//
// Why (measured in bench/alloc_bench.cpp, docs/performance.md "Allocating outputs"): glibc
// serves a request above its mmap threshold (at most 32 MiB) with a fresh mmap and returns it
// with munmap, so each call of a 64 MiB layer pays ~16,000 page faults, which cost more than the
// kernel itself. Blocks of at least kHugeBlock are mmap'ed 2 MiB-aligned and advised
// MADV_HUGEPAGE, so that even a first touch costs one fault per 2 MiB.
//
// Torch-free on purpose: the LibTorch bridge wraps it in a c10::Allocator (layers.cpp), and the
// peers benchmark's shim (bench/peers) links the same file so that its allocating column is the
// bridge's way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace backplane::torch::detail {

struct OutputBlockStats {
  std::uint64_t reused = 0;      // requests served from the cache
  std::uint64_t mapped = 0;      // requests that mapped a new block
  std::size_t cached_bytes = 0;  // idle bytes held now
};

class OutputBlocks {
 public:
  // Blocks below this size come from malloc (glibc reuses them without faults already).
  static constexpr std::size_t kHugeBlock = std::size_t{2} << 20;

  // The process-wide cache. Its bound on idle bytes is BACKPLANE_OUTPUT_CACHE_MIB (default 512;
  // 0 keeps nothing, every block is unmapped when freed), read once.
  static OutputBlocks& process();

  explicit OutputBlocks(std::size_t max_idle_bytes) : max_idle_bytes_(max_idle_bytes) {}
  ~OutputBlocks();
  OutputBlocks(const OutputBlocks&) = delete;
  OutputBlocks& operator=(const OutputBlocks&) = delete;

  // At least `bytes` bytes, 64-byte aligned (2 MiB for a mapped block); nullptr when the system
  // has no memory. Thread-safe.
  void* acquire(std::size_t bytes);
  // Gives back a block from acquire() with the same `bytes`. Thread-safe.
  void release(void* block, std::size_t bytes);
  // Unmaps every idle block.
  void trim();
  OutputBlockStats stats() const;

 private:
  struct Idle {
    void* block;
    std::size_t size;  // mapped bytes
  };
  static std::size_t mapped_size(std::size_t bytes);
  void unmap_oldest_until(std::size_t limit);  // mutex_ held

  const std::size_t max_idle_bytes_;
  mutable std::mutex mutex_;
  std::vector<Idle> idle_;  // oldest first
  std::size_t idle_bytes_ = 0;
  OutputBlockStats stats_;
};

}  // namespace backplane::torch::detail
