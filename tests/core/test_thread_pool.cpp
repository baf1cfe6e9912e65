// thread_pool: every task runs once; an exception from a task is rethrown by run() after
// the workers are idle, the remaining tasks are skipped, and the pool stays usable.
#include <bgtq/core/thread_pool.hpp>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common.hpp"

namespace {
//! Runs f(); aborts the program (a failed ctest entry, not a hang until its timeout) if
//! f has not returned after `seconds`.
template <class F>
void within(int seconds, const char* what, F&& f) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread dog([&] {
    std::unique_lock<std::mutex> lk(m);
    if (!cv.wait_for(lk, std::chrono::seconds(seconds), [&] { return done; })) {
      std::fprintf(stderr, "%s: still running after %d s (deadlock)\n", what, seconds);
      std::abort();
    }
  });
  struct finish {
    std::mutex& m;
    std::condition_variable& cv;
    bool& done;
    std::thread& dog;
    ~finish() {
      {
        std::lock_guard<std::mutex> g(m);
        done = true;
      }
      cv.notify_all();
      dog.join();
    }
  } fin{m, cv, done, dog};
  f();
}
}  // namespace

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
  // One thread: the tasks run in order on the calling thread, so exactly tasks 0..5 ran.
  // Three threads: the other workers may start tasks while task 5's exception unwinds
  // (an ASan build on a loaded 2-core machine once ran all 1000 before the skip took
  // effect, when every task was a single atomic add). So every task started after the
  // throw sleeps 2 ms: the ~995 left would need about a second on the two other workers,
  // while the unwinding to the skip is microseconds. ran < 1000 then says the skip
  // happened, without depending on how fast the other workers are.
  for (int threads : {1, 3}) {
    INFO("threads " << threads);
    bgtq::thread_pool pool(threads);
    std::atomic<int> ran{0};
    std::atomic<bool> thrown{false};
    REQUIRE_THROWS_WITH(pool.run(1000,
                                 [&](int t, int) {
                                   ran.fetch_add(1);
                                   if (t == 5) {
                                     thrown.store(true);
                                     throw std::runtime_error("task 5 failed");
                                   }
                                   if (thrown.load()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
                                 }),
                        "task 5 failed");
    if (threads == 1) {
      REQUIRE(ran.load() == 6);
    } else {
      REQUIRE(ran.load() >= 1);
      REQUIRE(ran.load() < 1000);  // the tasks not started when it threw were skipped
    }
    // the next run is complete and clean
    std::atomic<int> count{0};
    pool.run(64, [&](int, int) { count.fetch_add(1); });
    REQUIRE(count.load() == 64);
  }
}

TEST_CASE("thread_pool: each worker index belongs to one thread (per-worker workspaces never shared)", "[core][pool]") {
  // decode_attention gives task `worker` the workspace ws[worker]: two threads with one
  // index would write the same scratch at once. Every (index, thread) pair seen is
  // recorded; an index must map to one thread and a thread to one index.
  bgtq::thread_pool pool(4);
  std::mutex mu;
  std::map<int, std::set<std::thread::id>> threads_of;
  std::map<std::thread::id, std::set<int>> indices_of;
  std::atomic<int> in_use[4] = {0, 0, 0, 0};
  std::atomic<int> clashes{0};
  pool.run(200, [&](int, int w) {
    if (in_use[w].exchange(1) != 0) clashes.fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(mu);
      threads_of[w].insert(std::this_thread::get_id());
      indices_of[std::this_thread::get_id()].insert(w);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // so the threads overlap
    in_use[w].store(0);
  });
  REQUIRE(clashes.load() == 0);
  REQUIRE(threads_of.size() >= 2);  // the work was spread (200 ms of sleeps over 4 threads)
  for (const auto& [w, ids] : threads_of) {
    INFO("worker index " << w);
    REQUIRE(ids.size() == 1);
  }
  for (const auto& [id, ws] : indices_of) REQUIRE(ws.size() == 1);
}

TEST_CASE("thread_pool: run from two threads at once runs both jobs completely, no deadlock", "[core][pool]") {
  // decode_attention(..., pool, ws) from two engine threads sharing one pool: the calls
  // take turns (before, the second run overwrote the first's job and counters: tasks were
  // lost or both callers waited forever)
  within(60, "two concurrent run() callers", [] {
    bgtq::thread_pool pool(3);
    std::atomic<long> a{0}, b{0};
    const int reps = 2000;
    std::thread other([&] {
      for (int r = 0; r < reps; ++r)
        pool.run(40, [&](int, int) {
          b.fetch_add(1);
          std::this_thread::yield();
        });
    });
    for (int r = 0; r < reps; ++r)
      pool.run(40, [&](int, int) {
        a.fetch_add(1);
        std::this_thread::yield();
      });
    other.join();
    REQUIRE(a.load() == reps * 40L);
    REQUIRE(b.load() == reps * 40L);
  });
}

TEST_CASE("thread_pool: run from inside one of its own tasks is an error, not lost tasks or a deadlock", "[core][pool]") {
  // before: the nested run replaced the outer job, so the outer tasks not yet started were
  // silently skipped (3 of 10 ran) and run() returned as if all were done
  for (int threads : {1, 3}) {
    INFO("threads " << threads);
    within(60, "nested run()", [&] {
      bgtq::thread_pool pool(threads);
      std::atomic<int> outer{0}, inner{0};
      const bgtq::errc code = bgtq_test::error_code_of([&] {
        pool.run(10, [&](int t, int) {
          if (t == 2) pool.run(4, [&](int, int) { inner.fetch_add(1); });
          outer.fetch_add(1);
        });
      });
      REQUIRE(code == bgtq::errc::invalid_argument);
      REQUIRE(inner.load() == 0);
      // still usable, and a run on another pool from inside a task is fine
      bgtq::thread_pool other(2);
      std::atomic<int> count{0};
      pool.run(8, [&](int, int) { other.run(5, [&](int, int) { count.fetch_add(1); }); });
      REQUIRE(count.load() == 40);
    });
  }
}

TEST_CASE("thread_pool: a run that would wait for itself through another pool is an error, not a deadlock", "[core][pool]") {
  // A's task runs B.run and B's task runs A.run: A's run waits for that task, which waits
  // for B's run, which waits for its task, which waits for A's turn (before: a deadlock,
  // or a second lock of A's run mutex when both tasks ran on the calling thread)
  for (int ta : {1, 3})
    for (int tb : {1, 2}) {
      INFO("threads " << ta << " and " << tb);
      within(60, "run() cycle through another pool", [&] {
        bgtq::thread_pool a(ta), b(tb), c(2);
        std::atomic<int> inner{0}, refused_on_b_thread{0};
        std::atomic<bool> b_thread_started{false};
        std::string what;
        const bgtq::errc code = bgtq_test::error_code_of([&] {
          try {
            a.run(4, [&](int, int) {
              b.run(3, [&](int, int worker) {
                // with a thread of its own, B runs a task there too (the chain crosses
                // threads): its caller-side task waits until one has started (B's thread
                // takes the next task while worker 0 waits; the watchdog bounds the wait)
                if (worker > 0) b_thread_started = true;
                while (tb > 1 && worker == 0 && !b_thread_started) std::this_thread::yield();
                try {
                  a.run(2, [&](int, int) { inner.fetch_add(1); });
                } catch (const bgtq::error&) {
                  if (worker > 0) refused_on_b_thread.fetch_add(1);
                  throw;
                }
              });
            });
          } catch (const bgtq::error& e) {
            what = e.what();
            throw;
          }
        });
        REQUIRE(code == bgtq::errc::invalid_argument);
        CHECK(what.find("from a task of another pool's run() that one of this pool's own tasks is waiting in") != std::string::npos);
        REQUIRE(inner.load() == 0);
        if (tb > 1) REQUIRE(refused_on_b_thread.load() > 0);  // refused on B's own thread as well
        // a chain without a cycle runs every task (A -> B -> C), and a deeper cycle
        // (A -> B -> C -> A) is refused as well
        std::atomic<int> count{0};
        a.run(4, [&](int, int) { b.run(3, [&](int, int) { c.run(2, [&](int, int) { count.fetch_add(1); }); }); });
        REQUIRE(count.load() == 24);
        REQUIRE(bgtq_test::error_code_of([&] {
                  a.run(2, [&](int, int) { b.run(2, [&](int, int) { c.run(2, [&](int, int) { a.run(1, [](int, int) {}); }); }); });
                }) == bgtq::errc::invalid_argument);
        // all three still usable
        count = 0;
        for (bgtq::thread_pool* p : {&a, &b, &c}) p->run(5, [&](int, int) { count.fetch_add(1); });
        REQUIRE(count.load() == 15);
      });
    }
}

TEST_CASE("thread_pool: INT_MAX tasks never hand a task a negative index", "[core][pool]") {
  // the task counter must not wrap: after a throw sets it to n = INT_MAX, each worker's
  // last fetch_add went past INT_MAX and the next one handed out INT_MIN, INT_MIN + 1, ...
  within(60, "INT_MAX tasks", [] {
    bgtq::thread_pool pool(4);
    std::atomic<int> negative{0};
    REQUIRE_THROWS_WITH(pool.run(INT_MAX,
                                 [&](int t, int) {
                                   if (t < 0) {
                                     negative.fetch_add(1);
                                     throw std::runtime_error("negative task");
                                   }
                                   if (t == 0) throw std::runtime_error("task 0 failed");
                                 }),
                        "task 0 failed");
    REQUIRE(negative.load() == 0);
  });
}
