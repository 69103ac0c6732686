// How the layer kernels split their rows over the shared pool: small calls stay on the calling
// thread (waking workers costs more than the work), big ones get a few ranges per thread so a
// slow core does not hold up the others.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/thread_pool.hpp"

namespace backplane::kernels {

// Calls fn(begin, end) over ranges covering [0, n); `bytes_per_item` is the memory one item
// reads and writes.
template <class F>
void parallel_ranges(int64_t n, int64_t bytes_per_item, const F& fn) {
  constexpr int64_t kSerialBytes = int64_t{256} << 10;  // below this: the calling thread alone
  constexpr int64_t kMinRangeBytes = int64_t{64} << 10;
  if (n <= 0) return;
  ThreadPool& pool = ThreadPool::global();
  const int64_t bytes = n * std::max<int64_t>(bytes_per_item, 1);
  const int threads = pool.threads();
  if (threads <= 1 || bytes < kSerialBytes || n == 1) {
    fn(int64_t{0}, n);
    return;
  }
  int64_t ranges = std::min<int64_t>(n, int64_t{4} * threads);
  ranges = std::max<int64_t>(1, std::min(ranges, bytes / kMinRangeBytes));
  const int64_t per = (n + ranges - 1) / ranges;
  ranges = (n + per - 1) / per;
  pool.parallel_for(ranges, 0, [&](int64_t item, int) {
    const int64_t begin = item * per;
    fn(begin, std::min(n, begin + per));
  });
}

}  // namespace backplane::kernels
