#include "common/thread_pool.hpp"

#include "common/threads.hpp"

#include <algorithm>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BACKPLANE_PAUSE() _mm_pause()
#else
#define BACKPLANE_PAUSE() std::this_thread::yield()
#endif

namespace backplane::kernels {
namespace {

thread_local bool t_inside_pool = false;

int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace

ThreadPool& ThreadPool::global() {
  static ThreadPool pool;
  return pool;
}

ThreadPool::ThreadPool(int threads) : wanted_(threads > 0 ? threads : default_threads()) {}

ThreadPool::~ThreadPool() {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  resize_locked(0);
}

void ThreadPool::set_threads(int n) {
  wanted_.store(n > 0 ? n : default_threads());
}

int ThreadPool::threads() const {
  return wanted_.load();
}

void ThreadPool::resize_locked(int workers) {
  if (static_cast<int>(workers_.size()) == workers) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  stop_ = false;
  // A new worker must not miss the next job: it starts from the generation current now, not
  // from whatever it reads once scheduled.
  const uint64_t now = generation_.load();
  for (int i = 0; i < workers; ++i) {
    workers_.emplace_back([this, i, now] { worker_main(i + 1, now); });
  }
}

void ThreadPool::drain(int worker) {
  for (;;) {
    const int64_t item = next_.fetch_add(1, std::memory_order_relaxed);
    if (item >= items_) return;
    try {
      call_(ctx_, item, worker);
    } catch (...) {
      // Leaving a worker thread would end the process: the caller rethrows the first one, and
      // the items nobody claimed yet are dropped, since the call fails as a whole.
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      next_.store(items_, std::memory_order_relaxed);
      return;
    }
  }
}

void ThreadPool::run(int64_t items, int max_workers, Call call, void* ctx) {
  if (items <= 0) return;
  int threads = static_cast<int>(std::min<int64_t>(wanted_.load(), items));
  if (max_workers > 0) threads = std::min(threads, max_workers);
  if (threads <= 1 || t_inside_pool) {
    for (int64_t i = 0; i < items; ++i) call(ctx, i, 0);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  resize_locked(std::max(wanted_.load(), 1) - 1);
  threads = std::min<int>(threads, static_cast<int>(workers_.size()) + 1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    call_ = call;
    ctx_ = ctx;
    items_ = items;
    job_workers_ = threads - 1;
    job_open_ = true;
    running_ = 0;
    next_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  t_inside_pool = true;
  drain(0);  // returns once every item is claimed
  t_inside_pool = false;
  std::unique_lock<std::mutex> lock(mu_);
  job_open_ = false;
  done_.wait(lock, [this] { return running_ == 0; });
  call_ = nullptr;
  ctx_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::worker_main(int index, uint64_t seen) {
  t_inside_pool = true;
  for (;;) {
    // Spin briefly before sleeping: back-to-back kernel calls (decoding) then start at once.
    for (int spin = 0; spin < 4000 && generation_.load(std::memory_order_acquire) == seen; ++spin) {
      BACKPLANE_PAUSE();
    }
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait(lock, [&] { return stop_ || generation_.load() != seen; });
    if (stop_) return;
    seen = generation_.load();
    if (!job_open_ || index > job_workers_) continue;  // finished without it, or not needed
    ++running_;
    lock.unlock();
    drain(index);
    lock.lock();
    if (--running_ == 0) done_.notify_one();
  }
}

}  // namespace backplane::kernels

namespace backplane::kernels {

void set_num_threads(int n) {
  ThreadPool::global().set_threads(n);
}

int num_threads() {
  return ThreadPool::global().threads();
}

}  // namespace backplane::kernels
