#include "core/thread_pool.h"

#include <algorithm>
#include <utility>

namespace gb {

namespace {
// Spin iterations before sleeping: about the gap between two matrix products of
// one decode step, so workers stay hot during a step and sleep between steps.
constexpr int kSpinIterations = 20000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = num_threads;
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunk(int index) {
  const int64_t begin = std::min(job_n_, index * job_chunk_);
  const int64_t end = std::min(job_n_, begin + job_chunk_);
  if (begin >= end) return;
  try {
    (*job_)(begin, end, index);
  } catch (...) {
    // The first exception wins; the caller rethrows it once every chunk is done.
    if (!job_failed_.exchange(true, std::memory_order_acq_rel)) job_error_ = std::current_exception();
  }
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < kSpinIterations; ++spin) {
      cpu_relax();
      g = generation_.load(std::memory_order_acquire);
    }
    while (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load()) return;
    run_chunk(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (n + grain - 1) / grain;
  if (num_threads_ == 1 || units == 1) {
    fn(0, n, 0);
    return;
  }
  const int64_t per_thread = (units + num_threads_ - 1) / num_threads_;
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = per_thread * grain;
  pending_.store(num_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  run_chunk(0);
  // Spin while the workers finish (the usual case: they run now); past the spin
  // budget a worker has likely been descheduled (a busy or oversubscribed
  // machine), so give the core away instead of burning a time slice per dispatch.
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) cpu_relax();
    else std::this_thread::yield();
  }
  job_ = nullptr;
  if (job_failed_.load(std::memory_order_acquire)) {
    std::exception_ptr error = std::exchange(job_error_, nullptr);
    job_failed_.store(false, std::memory_order_relaxed);
    std::rethrow_exception(error);
  }
}

}  // namespace gb
