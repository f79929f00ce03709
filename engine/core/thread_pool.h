// ThreadPool: a fixed set of worker threads for data-parallel loops in the CPU
// kernels. parallel_for() splits [0, n) into one contiguous chunk per thread (the
// caller runs chunk 0) and returns when all chunks are done. Workers spin briefly
// and then sleep on an atomic wait, so the ~100 dispatches of a decode step cost
// microseconds, not a thread start each.
//
// Thread-safety: one caller at a time (the engine thread owns its pool).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace gb {

class ThreadPool {
 public:
  // num_threads <= 0: std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // fn(begin, end, thread_index) for one contiguous chunk per thread. Chunks are
  // aligned to `grain` items (the last may be shorter); empty chunks are skipped;
  // n <= 0 calls nothing. If fn throws, the other chunks still run to the end and
  // the first exception is rethrown here, on the caller's thread, once all are
  // done; the pool stays usable.
  using RangeFn = std::function<void(int64_t begin, int64_t end, int thread_index)>;
  void parallel_for(int64_t n, const RangeFn& fn, int64_t grain = 1);

 private:
  void worker_loop(int index);
  void run_chunk(int index);

  int num_threads_ = 1;
  std::vector<std::thread> workers_;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  // The job being run (valid while pending_ > 0).
  const RangeFn* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 0;
  std::atomic<bool> job_failed_{false};  // a chunk threw; job_error_ holds the first exception
  std::exception_ptr job_error_;
};

}  // namespace gb
