#pragma once
//! @file core/thread_pool.hpp
//! A small persistent thread pool for data-parallel loops (decode attention over
//! (sequence, KV head) pairs). `run(n, f)` calls f(task, worker) for task = 0..n-1 on
//! the calling thread (worker 0) and the pool's threads (workers 1..), and returns when
//! every task is done. Tasks are taken from an atomic counter; f must not throw.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace bgtq {

//! Fixed-size pool of worker threads. Not copyable; one run() at a time.
class thread_pool {
 public:
  //! A pool with `threads` workers in total, the calling thread included (>= 1).
  explicit thread_pool(int threads) {
    for (int i = 1; i < (threads < 1 ? 1 : threads); ++i) workers_.emplace_back([this, i] { loop(i); });
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() {
    {
      std::lock_guard<std::mutex> g(m_);
      stop_ = true;
      ++generation_;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

  //! Workers in total, the calling thread included.
  int size() const noexcept { return static_cast<int>(workers_.size()) + 1; }

  //! Runs f(task, worker) for every task in [0, n); blocks until all are done. `f` is
  //! any callable (a lambda, a std::function): it is called through a pointer to it and
  //! one function pointer, so nothing is allocated (decode attention promises that).
  template <class F>
  void run(int n, const F& f) {
    if (n <= 0) return;
    {
      std::lock_guard<std::mutex> g(m_);
      job_ = &f;
      call_ = [](const void* job, int t, int worker) { (*static_cast<const F*>(job))(t, worker); };
      tasks_ = n;
      next_.store(0);
      busy_ = static_cast<int>(workers_.size());
      ++generation_;
    }
    cv_.notify_all();
    work(0);
    std::unique_lock<std::mutex> lk(m_);
    done_.wait(lk, [this] { return busy_ == 0; });
    job_ = nullptr;
  }

 private:
  void work(int worker) {
    for (int t = next_.fetch_add(1); t < tasks_; t = next_.fetch_add(1)) call_(job_, t, worker);
  }
  void loop(int worker) {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return generation_ != seen; });
        seen = generation_;
        if (stop_) return;
      }
      work(worker);
      {
        std::lock_guard<std::mutex> g(m_);
        if (--busy_ == 0) done_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable cv_, done_;
  const void* job_ = nullptr;
  void (*call_)(const void*, int, int) = nullptr;
  int tasks_ = 0;
  std::atomic<int> next_{0};
  int busy_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace bgtq
