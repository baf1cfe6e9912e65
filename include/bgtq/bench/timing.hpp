#pragma once
//! @file bench/timing.hpp
//! Helpers for the CLI's benchmarks: a monotonic timer, medians, and the memory-copy
//! bandwidth floor measured in the same run.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

namespace bgtq::bench {

//! Seconds since an arbitrary epoch (steady clock).
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

//! Median of a sample (copied).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

//! Keeps the compiler from discarding a computed value.
template <class T>
inline void do_not_optimize(const T& x) {
  asm volatile("" : : "r,m"(x) : "memory");
}

//! Single-thread memory-copy bandwidth in GB/s (bytes of the source per second, median
//! of `reps` copies of a buffer far larger than the caches).
inline double copy_bandwidth_gbps(std::size_t bytes = std::size_t{256} << 20, int reps = 7) {
  std::vector<unsigned char> a(bytes, 1), b(bytes, 0);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    a[static_cast<std::size_t>(r)] = static_cast<unsigned char>(r);
    const double t0 = now_s();
    std::memcpy(b.data(), a.data(), bytes);
    t.push_back(now_s() - t0);
    do_not_optimize(b[static_cast<std::size_t>(r) * 4096 % bytes]);
  }
  return static_cast<double>(bytes) / median(t) * 1e-9;
}

}  // namespace bgtq::bench
