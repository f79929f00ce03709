// ThreadPool (engine/core/thread_pool.h): the contract of parallel_for checked
// item by item. Every index in [0, n) is visited exactly once, in contiguous
// chunks aligned to the grain, at most one chunk per thread and call, chunk 0 on
// the caller; n <= 0 calls nothing; more threads than items; an exception in any
// chunk reaches the caller after every chunk ran, and the pool keeps working; many
// back-to-back calls (the spin-then-wait handoff) and pools built and destroyed
// while their workers sleep. Nothing here is timed.
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "gb_test.h"

namespace {

struct Chunk {
  int64_t begin, end;
  int thread;
  std::thread::id os_thread;
};

// Runs one parallel_for and checks its chunks; returns false (after a QVERIFY
// failure) when a rule is broken.
void check_cover(gb::ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> visits(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::mutex mutex;
  std::vector<Chunk> chunks;
  pool.parallel_for(
      n,
      [&](int64_t begin, int64_t end, int thread) {
        for (int64_t i = begin; i < end; ++i) visits[static_cast<size_t>(i)].fetch_add(1);
        std::lock_guard lock(mutex);
        chunks.push_back({begin, end, thread, std::this_thread::get_id()});
      },
      grain);
  const std::string where = "n=" + std::to_string(n) + " grain=" + std::to_string(grain) +
                            " threads=" + std::to_string(pool.num_threads());
  for (int64_t i = 0; i < n; ++i)
    QVERIFY2(visits[static_cast<size_t>(i)].load() == 1, (where + " index " + std::to_string(i)).c_str());
  std::set<int> threads;
  for (const Chunk& c : chunks) {
    QVERIFY2(c.begin < c.end, where.c_str());                       // empty chunks are skipped
    QVERIFY2(c.begin % std::max<int64_t>(grain, 1) == 0, where.c_str());  // aligned to the grain
    QVERIFY2(c.thread >= 0 && c.thread < pool.num_threads(), where.c_str());
    QVERIFY2(threads.insert(c.thread).second, where.c_str());       // one chunk per thread
    if (c.thread == 0) QVERIFY2(c.os_thread == std::this_thread::get_id(), where.c_str());
  }
  if (n <= 0) QVERIFY2(chunks.empty(), where.c_str());
}

}  // namespace

GB_TEST(zero_and_negative_counts_call_nothing) {
  gb::ThreadPool pool(4);
  int calls = 0;
  pool.parallel_for(0, [&](int64_t, int64_t, int) { ++calls; });
  pool.parallel_for(-7, [&](int64_t, int64_t, int) { ++calls; });
  QCOMPARE(calls, 0);
}

GB_TEST(one_item_runs_once_on_the_caller) {
  gb::ThreadPool pool(4);
  std::vector<Chunk> chunks;
  pool.parallel_for(1, [&](int64_t b, int64_t e, int t) { chunks.push_back({b, e, t, std::this_thread::get_id()}); });
  QCOMPARE(chunks.size(), size_t{1});
  QCOMPARE(chunks[0].begin, int64_t{0});
  QCOMPARE(chunks[0].end, int64_t{1});
  QCOMPARE(chunks[0].thread, 0);
  QVERIFY(chunks[0].os_thread == std::this_thread::get_id());
}

GB_TEST(every_index_exactly_once_for_awkward_sizes_threads_and_grains) {
  for (int threads : {1, 2, 3, 8}) {
    gb::ThreadPool pool(threads);
    QCOMPARE(pool.num_threads(), threads);
    for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{33}, int64_t{4095}, int64_t{100003}})
      for (int64_t grain : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{64}, int64_t{5000}}) {
        check_cover(pool, n, grain);
        if (QTest::currentTestFailed()) return;
      }
  }
}

GB_TEST(more_threads_than_items_uses_one_chunk_per_item) {
  gb::ThreadPool pool(8);
  std::atomic<int> chunks{0};
  pool.parallel_for(3, [&](int64_t b, int64_t e, int) {
    QVERIFY(e - b == 1);
    chunks.fetch_add(1);
  });
  QCOMPARE(chunks.load(), 3);
}

GB_TEST(default_size_is_the_hardware_concurrency) {
  const int expected = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  QCOMPARE(gb::ThreadPool(0).num_threads(), expected);
  QCOMPARE(gb::ThreadPool(-3).num_threads(), expected);
}

GB_TEST(an_exception_in_any_chunk_reaches_the_caller_after_all_chunks_ran) {
  gb::ThreadPool pool(4);
  for (int thrower = 0; thrower < 4; ++thrower) {
    std::atomic<int64_t> done{0};
    bool caught = false;
    try {
      pool.parallel_for(400, [&](int64_t b, int64_t e, int t) {
        if (t == thrower) throw std::runtime_error("chunk " + std::to_string(t));
        // Slow the other chunks so a rethrow before they finish would show.
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        done.fetch_add(e - b);
      });
    } catch (const std::runtime_error& e) {
      caught = std::string(e.what()) == "chunk " + std::to_string(thrower);
    }
    QVERIFY2(caught, ("thrower " + std::to_string(thrower)).c_str());
    QCOMPARE(done.load(), int64_t{300});  // the three other chunks of 100 finished
    check_cover(pool, 1000, 1);           // and the pool still works
  }
}

GB_TEST(two_chunks_throwing_rethrows_one_of_them) {
  gb::ThreadPool pool(3);
  bool caught = false;
  try {
    pool.parallel_for(9, [](int64_t, int64_t, int t) {
      if (t != 1) throw std::logic_error("boom");
    });
  } catch (const std::logic_error&) {
    caught = true;
  }
  QVERIFY(caught);
  check_cover(pool, 9, 1);
}

GB_TEST(stress_many_back_to_back_calls) {
  // The decode loop's pattern: thousands of small dispatches, workers spinning or
  // sleeping between them. A lost wake-up hangs here; a lost chunk breaks the sum.
  // (3 threads, 1,000 calls: on an oversubscribed machine each call can cost a
  // scheduler time slice, because the caller spin-waits for the workers; 20,000
  // calls took 192 s on the shared 2-core machine.)
  gb::ThreadPool pool(3);
  std::vector<int64_t> data(4096);
  std::iota(data.begin(), data.end(), 0);
  int64_t total = 0;
  for (int call = 0; call < 1000; ++call) {
    const int64_t n = 1 + call % 97;
    std::atomic<int64_t> sum{0};
    pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
      int64_t s = 0;
      for (int64_t i = b; i < e; ++i) s += data[static_cast<size_t>(i)];
      sum.fetch_add(s);
    });
    QCOMPARE(sum.load(), n * (n - 1) / 2);
    total += sum.load();
    if (call % 250 == 249) std::this_thread::sleep_for(std::chrono::milliseconds(30));  // let workers sleep
  }
  QVERIFY(total > 0);
}

GB_TEST(pools_built_and_destroyed_repeatedly) {
  for (int round = 0; round < 200; ++round) {
    gb::ThreadPool pool(1 + round % 6);
    if (round % 2 == 0) check_cover(pool, 1 + round, 1);  // half are destroyed without ever running
    if (QTest::currentTestFailed()) return;
  }
}
