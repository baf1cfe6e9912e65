#pragma once
//! @file core/thread_pool.hpp
//! A small persistent thread pool for data-parallel loops (decode attention over
//! (sequence, KV head) pairs). `run(n, f)` calls f(task, worker) for task = 0..n-1 on
//! the calling thread (worker 0) and the pool's threads (workers 1..), and returns when
//! every task is done. Tasks are taken from an atomic counter. If f throws, the tasks not
//! yet started are skipped and run() rethrows the first exception once every worker is
//! idle again (nothing is allocated unless that happens). Calls from several threads take
//! turns (one run at a time); a run() from inside one of the pool's own tasks is an error
//! (bgtq::error, invalid_argument), since it would wait for the worker that makes it, and
//! so is one from a task of another pool's run() that one of this pool's tasks waits in
//! (A's task runs B.run, B's task runs A.run: on whatever thread B's task runs).

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "error.hpp"

namespace bgtq {

//! Fixed-size pool of worker threads. Not copyable; one run() at a time (concurrent
//! callers wait for their turn).
class thread_pool {
 public:
  //! A pool with `threads` workers in total, the calling thread included (>= 1).
  //! @throws bgtq::error(capacity_exhausted) if a thread cannot be started (the ones
  //!         already started are stopped and joined first)
  explicit thread_pool(int threads) {
    try {
      for (int i = 1; i < (threads < 1 ? 1 : threads); ++i) workers_.emplace_back([this, i] { loop(i); });
    } catch (const std::exception& e) {  // std::system_error from std::thread, or bad_alloc
      shutdown();
      fail(errc::capacity_exhausted, "thread_pool: cannot start thread " + std::to_string(workers_.size() + 1) + " of " +
                                         std::to_string(threads) + ": " + e.what());
    }
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() { shutdown(); }

  //! Workers in total, the calling thread included.
  int size() const noexcept { return static_cast<int>(workers_.size()) + 1; }

  //! Runs f(task, worker) for every task in [0, n); blocks until all are done. `f` is
  //! any callable (a lambda, a std::function): it is called through a pointer to it and
  //! one function pointer, so nothing is allocated (decode attention promises that).
  //! @throws bgtq::error(invalid_argument) when called from inside one of this pool's own
  //!         tasks (nested: the pool would wait for itself), or from a task of another
  //!         pool's run() that one of this pool's tasks is waiting in, however deep (the
  //!         waits would form a cycle); whatever f throws (the first)
  template <class F>
  void run(int n, const F& f) {
    if (n <= 0) return;
    for (const task_frame* fr = in_task_; fr; fr = fr->caller)
      if (fr->pool == this)
        fail(errc::invalid_argument,
             fr == in_task_ ? "thread_pool::run: called from inside one of the pool's own tasks (a nested run on the same pool)"
                            : "thread_pool::run: called from a task of another pool's run() that one of this pool's own tasks "
                              "is waiting in (the pools' runs would wait for each other)");
    std::lock_guard<std::mutex> turn(run_m_);  // concurrent callers take turns
    {
      std::lock_guard<std::mutex> g(m_);
      caller_ = in_task_;  // the tasks this run waits in, for its own tasks' frames
      job_ = &f;
      call_ = [](const void* job, int t, int worker) { (*static_cast<const F*>(job))(t, worker); };
      tasks_ = n;
      next_.store(0);
      busy_ = static_cast<int>(workers_.size());
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    work(0);
    std::unique_lock<std::mutex> lk(m_);
    done_.wait(lk, [this] { return busy_ == 0; });
    job_ = nullptr;
    caller_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void work(int worker) {
    // tasks run only here (on the caller as worker 0 and on the pool's threads): while
    // they do, this thread's in_task_ is a frame naming the pool and the frames of the
    // tasks whose run() this one serves (the caller's), for run()'s nested-call check.
    // caller_ was set under m_ before the generation this worker saw (worker 0 set it)
    const task_frame frame{this, caller_};
    struct mark {
      const task_frame* outer;
      ~mark() { in_task_ = outer; }
    } restore{std::exchange(in_task_, &frame)};
    try {
      // a 64-bit counter: each worker's last fetch_add goes past tasks_ (and a throw sets it
      // to tasks_ first), which with n = INT_MAX would wrap an int to negative tasks
      for (std::int64_t t = next_.fetch_add(1); t < tasks_; t = next_.fetch_add(1)) call_(job_, static_cast<int>(t), worker);
    } catch (...) {
      next_.store(tasks_);  // the tasks not started yet are skipped
      std::lock_guard<std::mutex> g(m_);
      if (!error_) error_ = std::current_exception();
    }
  }
  void shutdown() {
    {
      std::lock_guard<std::mutex> g(m_);
      stop_ = true;
      ++generation_;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
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
  std::mutex run_m_;  //!< held by the thread in run()
  //! A task being run: its pool, and the frame of the task that called that pool's run()
  //! (null for a run from outside any task). Frames live on the stacks of the threads
  //! running the tasks, each blocked in a run() while its callees' frames point to it.
  struct task_frame {
    const thread_pool* pool;
    const task_frame* caller;
  };
  //! The task this thread is running (a task of another pool may run() this one)
  static inline thread_local const task_frame* in_task_ = nullptr;
  const task_frame* caller_ = nullptr;  //!< in_task_ of the current run()'s caller (under m_)
  std::condition_variable cv_, done_;
  const void* job_ = nullptr;
  void (*call_)(const void*, int, int) = nullptr;
  int tasks_ = 0;
  std::atomic<std::int64_t> next_{0};
  int busy_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace bgtq
