// The process-wide worker pool of the CPU kernels (attention, rmsnorm, activation, rotary): one
// pool per library that links this one, so kernels called one after another never fight over
// cores. Internal to the kernel libraries; no compatibility promise.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace backplane::kernels {

class ThreadPool {
 public:
  // The pool the kernels use; its workers start on first use and stop at exit.
  static ThreadPool& global();

  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // n <= 0: std::thread::hardware_concurrency(). Applies from the next parallel_for.
  void set_threads(int n);
  int threads() const;

  // Calls fn(item, worker) for every item in [0, items), items claimed in increasing order by
  // up to threads() workers (the calling thread is worker 0, the others 1..threads()-1).
  // Returns when all are done. Calls from several threads take turns; a call from inside fn
  // runs serially on the calling worker. An exception from fn reaches the caller (the first,
  // if several items throw) once every item already claimed has returned; the unclaimed items
  // are not run.
  template <class F>
  void parallel_for(int64_t items, int max_workers, const F& fn) {
    run(items, max_workers, &invoke<F>, const_cast<F*>(&fn));
  }

 private:
  using Call = void (*)(void* ctx, int64_t item, int worker);
  template <class F>
  static void invoke(void* ctx, int64_t item, int worker) {
    (*static_cast<const F*>(ctx))(item, worker);
  }
  void run(int64_t items, int max_workers, Call call, void* ctx);
  void resize_locked(int workers);
  void worker_main(int index, uint64_t seen);
  void drain(int worker);

  std::mutex run_mu_;  // one parallel_for at a time
  std::atomic<int> wanted_;
  std::vector<std::thread> workers_;

  // The current job, published under mu_ by bumping generation_.
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::atomic<uint64_t> generation_{0};
  bool stop_ = false;
  Call call_ = nullptr;
  void* ctx_ = nullptr;
  int64_t items_ = 0;
  int job_workers_ = 0;  // workers (besides the caller) that take part in the current job
  std::atomic<int64_t> next_{0};
  // Workers join the current job only while it is open; the caller closes it once every item is
  // claimed and then waits for the workers that joined. One that was not scheduled in time (on
  // cores shared with another runtime's threads) is not waited for: it has nothing left to do.
  bool job_open_ = false;
  int running_ = 0;           // workers that joined the current job and are still inside it
  std::exception_ptr error_;  // the current job's first exception, under mu_
};

}  // namespace backplane::kernels
