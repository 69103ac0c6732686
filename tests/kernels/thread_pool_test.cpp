// The CPU kernels' worker pool: an item that throws fails the call on the caller's thread, never
// a worker's (which would end the process), and the pool serves the next call in full.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/thread_pool.hpp"

namespace {

using backplane::kernels::ThreadPool;

constexpr int64_t kItems = 2000;

// Runs every item once on `pool`, counting per item and per worker.
void ExpectEveryItemOnce(ThreadPool& pool) {
  std::vector<std::atomic<int>> runs(kItems);
  pool.parallel_for(kItems, 0, [&](int64_t item, int) { runs[item].fetch_add(1); });
  for (int64_t i = 0; i < kItems; ++i) ASSERT_EQ(runs[i].load(), 1) << "item " << i;
}

std::string MessageOf(ThreadPool& pool, int64_t throwing_item) {
  try {
    pool.parallel_for(kItems, 0, [&](int64_t item, int) {
      if (throwing_item < 0 || item == throwing_item)
        throw std::runtime_error("item " + std::to_string(item));
    });
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no exception";
}

TEST(ThreadPool, AnItemsExceptionReachesTheCaller) {
  for (int threads : {1, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    ThreadPool pool(threads);
    EXPECT_EQ(MessageOf(pool, 1234), "item 1234");
    ExpectEveryItemOnce(pool);
  }
}

TEST(ThreadPool, WhenEveryItemThrowsTheCallerGetsOneOfThem) {
  ThreadPool pool(3);
  for (int round = 0; round < 20; ++round) {
    const std::string message = MessageOf(pool, -1);
    ASSERT_EQ(message.rfind("item ", 0), 0u) << message;
  }
  ExpectEveryItemOnce(pool);
}

TEST(ThreadPool, TheItemsAfterAFailureAreNotRun) {
  ThreadPool pool(2);
  std::atomic<int64_t> ran{0};
  // Each other item takes 20 us, so that the range outlasts any descheduling of the failing
  // worker on a loaded machine (2 s in all): the pool stops long before.
  constexpr int64_t kSlowItems = 100000;
  EXPECT_THROW(pool.parallel_for(kSlowItems, 0,
                                 [&](int64_t item, int) {
                                   ran.fetch_add(1);
                                   if (item == 0) throw std::runtime_error("first");
                                   const auto until = std::chrono::steady_clock::now() +
                                                      std::chrono::microseconds(20);
                                   while (std::chrono::steady_clock::now() < until) {
                                   }
                                 }),
               std::runtime_error);
  // Item 0 fails first; the other worker may have claimed some more, not the whole range.
  EXPECT_LT(ran.load(), kSlowItems);
}

}  // namespace
