// thread_pool: every task runs once; an exception from a task is rethrown by run() after
// the workers are idle, the remaining tasks are skipped, and the pool stays usable.
#include <bgtq/core/thread_pool.hpp>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "common.hpp"

TEST_CASE("thread_pool runs every task exactly once, for any pool size and task count", "[core][pool]") {
  for (int threads : {0, 1, 2, 5}) {
    bgtq::thread_pool pool(threads);
    REQUIRE(pool.size() == (threads < 1 ? 1 : threads));
    for (int n : {0, 1, 3, 100}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      std::atomic<int> bad_worker{0};
      pool.run(n, [&](int t, int worker) {
        hits[static_cast<std::size_t>(t)].fetch_add(1);
        if (worker < 0 || worker >= pool.size()) bad_worker.fetch_add(1);
      });
      for (const auto& h : hits) REQUIRE(h.load() == 1);
      REQUIRE(bad_worker.load() == 0);
    }
  }
}

TEST_CASE("thread_pool: a throwing task is rethrown by run, the rest skipped, the pool reusable", "[core][pool]") {
  for (int threads : {1, 3}) {
    bgtq::thread_pool pool(threads);
    std::atomic<int> ran{0};
    REQUIRE_THROWS_WITH(pool.run(1000,
                                 [&](int t, int) {
                                   ran.fetch_add(1);
                                   if (t == 5) throw std::runtime_error("task 5 failed");
                                 }),
                        "task 5 failed");
    REQUIRE(ran.load() >= 1);
    REQUIRE(ran.load() < 1000);  // the tasks not started when it threw were skipped
    // the next run is complete and clean
    std::atomic<int> count{0};
    pool.run(64, [&](int, int) { count.fetch_add(1); });
    REQUIRE(count.load() == 64);
  }
}
