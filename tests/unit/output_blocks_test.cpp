// torch/src/output_blocks.hpp, torch-free: blocks of a size are reused newest first, the idle
// bound is kept, small blocks go to malloc, and memory is usable as given.
#include "output_blocks.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace {

using backplane::torch::detail::OutputBlocks;

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(OutputBlocks, ReusesTheFreedBlockOfTheSameSize) {
  OutputBlocks blocks(64 * kMiB);
  void* first = blocks.acquire(5 * kMiB);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % OutputBlocks::kHugeBlock, 0u);
  std::memset(first, 0x5a, 5 * kMiB);  // all of it is writable
  blocks.release(first, 5 * kMiB);
  EXPECT_EQ(blocks.stats().cached_bytes, 6 * kMiB);  // rounded up to 2 MiB
  // 5.5 MiB rounds to the same 6 MiB block; 7 MiB does not.
  void* again = blocks.acquire(5 * kMiB + kMiB / 2);
  EXPECT_EQ(again, first);
  void* other = blocks.acquire(7 * kMiB);
  EXPECT_NE(other, first);
  EXPECT_EQ(blocks.stats().reused, 1u);
  EXPECT_EQ(blocks.stats().mapped, 2u);
  blocks.release(again, 5 * kMiB + kMiB / 2);
  blocks.release(other, 7 * kMiB);
  EXPECT_EQ(blocks.stats().cached_bytes, 14 * kMiB);
  blocks.trim();
  EXPECT_EQ(blocks.stats().cached_bytes, 0u);
}

TEST(OutputBlocks, KeepsAtMostItsBoundOfIdleBytesDroppingTheOldest) {
  OutputBlocks blocks(8 * kMiB);
  void* a = blocks.acquire(4 * kMiB);
  void* b = blocks.acquire(4 * kMiB);
  void* c = blocks.acquire(4 * kMiB);
  blocks.release(a, 4 * kMiB);
  blocks.release(b, 4 * kMiB);
  blocks.release(c, 4 * kMiB);  // a is unmapped
  EXPECT_EQ(blocks.stats().cached_bytes, 8 * kMiB);
  // Newest first: c, then b.
  EXPECT_EQ(blocks.acquire(4 * kMiB), c);
  EXPECT_EQ(blocks.acquire(4 * kMiB), b);
  EXPECT_EQ(blocks.stats().cached_bytes, 0u);
  blocks.release(b, 4 * kMiB);
  blocks.release(c, 4 * kMiB);
  // A block larger than the whole bound is never kept.
  void* big = blocks.acquire(16 * kMiB);
  blocks.release(big, 16 * kMiB);
  EXPECT_EQ(blocks.stats().cached_bytes, 8 * kMiB);
}

TEST(OutputBlocks, BoundZeroKeepsNothing) {
  OutputBlocks blocks(0);
  void* a = blocks.acquire(4 * kMiB);
  blocks.release(a, 4 * kMiB);
  EXPECT_EQ(blocks.stats().cached_bytes, 0u);
  blocks.release(blocks.acquire(4 * kMiB), 4 * kMiB);
  EXPECT_EQ(blocks.stats().reused, 0u);
}

TEST(OutputBlocks, SmallBlocksComeFromMallocAndAreNotCounted) {
  OutputBlocks blocks(64 * kMiB);
  void* small = blocks.acquire(1000);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small) % 64, 0u);
  std::memset(small, 1, 1000);
  blocks.release(small, 1000);
  void* empty = blocks.acquire(0);
  EXPECT_NE(empty, nullptr);
  blocks.release(empty, 0);
  EXPECT_EQ(blocks.stats().cached_bytes, 0u);
  EXPECT_EQ(blocks.stats().mapped, 0u);
  blocks.release(nullptr, 8 * kMiB);  // nothing to give back
}

}  // namespace
