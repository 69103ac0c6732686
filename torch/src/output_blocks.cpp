#include "output_blocks.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace backplane::torch::detail {
namespace {

constexpr std::size_t kAlignment = 64;  // what LibTorch's CPU allocator gives

std::size_t idle_bound_from_env() {
  constexpr std::size_t kDefaultMiB = 512;
  const char* text = secure_getenv("BACKPLANE_OUTPUT_CACHE_MIB");
  if (text == nullptr || *text == '\0') return kDefaultMiB << 20;
  char* end = nullptr;
  const unsigned long long mib = std::strtoull(text, &end, 10);
  // A value that is not a number keeps the default rather than disabling the cache unasked.
  if (end == text || *end != '\0') {
    std::fprintf(stderr,
                 "backplane: warn: BACKPLANE_OUTPUT_CACHE_MIB=%s is not a number of MiB; "
                 "keeping the default %zu (0 turns the output cache off)\n",
                 text, kDefaultMiB);
    return kDefaultMiB << 20;
  }
  return static_cast<std::size_t>(mib) << 20;
}

// A 2 MiB-aligned anonymous mapping of `size` bytes (a multiple of 2 MiB): map 2 MiB more and
// cut the unaligned ends off, so that every 2 MiB of it can be one huge page.
void* map_aligned(std::size_t size) {
  const std::size_t huge = OutputBlocks::kHugeBlock;
  void* raw =
      mmap(nullptr, size + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + huge - 1) & ~(std::uintptr_t{huge} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const std::uintptr_t tail = aligned + size, end = start + size + huge;
  if (end > tail) munmap(reinterpret_cast<void*>(tail), end - tail);
  // Advice only: with transparent huge pages "never" it does nothing, and that is no error.
  madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

}  // namespace

OutputBlocks& OutputBlocks::process() {
  // Never destroyed: tensors may give their blocks back from static destructors.
  static OutputBlocks* blocks = new OutputBlocks(idle_bound_from_env());
  return *blocks;
}

OutputBlocks::~OutputBlocks() {
  trim();
}

std::size_t OutputBlocks::mapped_size(std::size_t bytes) {
  return (bytes + kHugeBlock - 1) / kHugeBlock * kHugeBlock;
}

void* OutputBlocks::acquire(std::size_t bytes) {
  if (bytes < kHugeBlock) {
    void* small = nullptr;
    return posix_memalign(&small, kAlignment, bytes == 0 ? kAlignment : bytes) == 0 ? small
                                                                                    : nullptr;
  }
  const std::size_t size = mapped_size(bytes);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    // The newest idle block of the size: the one most likely still in the caches.
    for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
      if (it->size != size) continue;
      void* block = it->block;
      idle_bytes_ -= size;
      idle_.erase(std::next(it).base());
      ++stats_.reused;
      return block;
    }
    ++stats_.mapped;
  }
  void* block = map_aligned(size);
  if (block == nullptr) {
    // Idle blocks of other sizes may be what the system is missing.
    trim();
    block = map_aligned(size);
  }
  return block;
}

void OutputBlocks::release(void* block, std::size_t bytes) {
  if (block == nullptr) return;
  if (bytes < kHugeBlock) {
    std::free(block);
    return;
  }
  const std::size_t size = mapped_size(bytes);
  const std::lock_guard<std::mutex> lock(mutex_);
  if (size > max_idle_bytes_) {
    munmap(block, size);
    return;
  }
  idle_.push_back({block, size});
  idle_bytes_ += size;
  unmap_oldest_until(max_idle_bytes_);
}

void OutputBlocks::unmap_oldest_until(std::size_t limit) {
  std::size_t dropped = 0;
  while (idle_bytes_ > limit && dropped < idle_.size()) {
    munmap(idle_[dropped].block, idle_[dropped].size);
    idle_bytes_ -= idle_[dropped].size;
    ++dropped;
  }
  idle_.erase(idle_.begin(), idle_.begin() + static_cast<std::ptrdiff_t>(dropped));
}

void OutputBlocks::trim() {
  const std::lock_guard<std::mutex> lock(mutex_);
  unmap_oldest_until(0);
}

OutputBlockStats OutputBlocks::stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  OutputBlockStats now = stats_;
  now.cached_bytes = idle_bytes_;
  return now;
}

}  // namespace backplane::torch::detail
