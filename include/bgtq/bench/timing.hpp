#pragma once
//! @file bench/timing.hpp
//! Helpers for the CLI's benchmarks: a monotonic timer, medians, and the floors measured
//! in the same run: memory-copy and read bandwidth, and vector multiply-add throughput.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64) || (defined(__i386__) && defined(__SSE2__))
#define BGTQ_DETAIL_CLFLUSH 1
#include "../core/intrinsics.hpp"
#endif

#include "../core/vec16.hpp"

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

namespace detail {
#if defined(BGTQ_DETAIL_CLFLUSH)
// clflush of every 64-byte line of [p, p + bytes), no fence.
inline void clflush_lines(const std::uint8_t* p, std::size_t bytes) {
  for (std::size_t off = 0; off < bytes; off += 64) _mm_clflush(p + off);
  if (bytes > 0) _mm_clflush(p + bytes - 1);  // the last line when the range is not line-aligned
}
#else
// Stores over a 1 GiB scratch buffer (allocated on first use): displaces anything a cache
// of up to 1 GiB holds.
inline void displace_caches() {
  static std::vector<unsigned char> scratch(std::size_t{1} << 30);
  for (std::size_t i = 0; i < scratch.size(); i += 64) scratch[i] = static_cast<unsigned char>(scratch[i] + 1);
  do_not_optimize(scratch[0]);
}
#endif
}  // namespace detail

//! Evicts the bytes of `range` (e.g. kv_cache::pool()) from every level of the CPU caches, so the next reads of it come
//! from memory: a decode step as it runs in a model whose other layers' caches have
//! displaced this one's (the state the GPU benchmark sets by evicting its L2). x86:
//! clflush of each 64-byte line, then a fence. Elsewhere (no SSE2): stores over a 1 GiB scratch
//! buffer (allocated on first use), which displaces anything a cache of up to 1 GiB holds.
inline void flush_from_caches(std::span<const std::uint8_t> range) {
#if defined(BGTQ_DETAIL_CLFLUSH)
  detail::clflush_lines(range.data(), range.size());
  _mm_mfence();
#else
  (void)range;
  detail::displace_caches();
#endif
}

//! flush_from_caches over everything decode attention reads from `cache` for the sequences
//! `seqs` in `layer`: the page pool and each (sequence, KV head)'s fp16 window rows (sink
//! and recent tokens, which live in per-sequence buffers outside the pool).
//! @throws bgtq::error(not_found) for a sequence that is not live or a bad layer
template <class Cache>
void flush_decode_reads(const Cache& cache, std::span<const int> seqs, int layer) {
#if defined(BGTQ_DETAIL_CLFLUSH)
  const auto pool = cache.pool();
  detail::clflush_lines(pool.data(), pool.size());
  const std::size_t row_bytes = static_cast<std::size_t>(cache.config().head_dim) * sizeof(std::uint16_t);
  for (const int seq : seqs)
    for (int h = 0; h < cache.config().kv_heads; ++h) {
      const auto w = cache.window(seq, layer, h);
      for (std::int64_t i = 0; i < w.size(); ++i) {
        detail::clflush_lines(reinterpret_cast<const std::uint8_t*>(w.key(i)), row_bytes);
        detail::clflush_lines(reinterpret_cast<const std::uint8_t*>(w.value(i)), row_bytes);
      }
    }
  _mm_mfence();
#else
  for (const int seq : seqs) (void)cache.window(seq, layer, 0);  // the same checks
  detail::displace_caches();
#endif
}

//! Single-thread memory-copy bandwidth in GB/s (bytes of the source per second, median
//! of `reps` copies of a buffer far larger than the caches). A copy also writes every
//! byte it reads (and, with write-allocate, reads the destination first), so a step that
//! only reads, such as cold decode attention, can read faster than this: see
//! read_bandwidth_gbps for that floor.
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

//! Single-thread read bandwidth in GB/s: bytes per second of a 16-lane vector sum (four
//! independent chains, as the decode kernels read their pages) over a float buffer far
//! larger than the caches, median of `reps` passes. The rate a single-thread step that
//! only reads memory can expect (cold decode attention): a memory-bound step comes near
//! it (one that reads several buffers at once, e.g. the pages of 8 KV heads, may pass it
//! somewhat, since more lines are in flight than one stream's prefetcher asks for).
inline double read_bandwidth_gbps(std::size_t bytes = std::size_t{256} << 20, int reps = 7) {
  const std::size_t n = std::max<std::size_t>(64, bytes / sizeof(float) / 64 * 64);
  std::vector<float> a(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<float>(i & 1023) * 0x1p-10f;  // not constant, sums stay small
  std::vector<double> t;
  float keep = 0.0f;
  for (int r = 0; r < reps; ++r) {
    simd::vf16 acc[4] = {simd::zero(), simd::zero(), simd::zero(), simd::zero()};
    const double t0 = now_s();
    for (std::size_t i = 0; i < n; i += 64)
      for (int j = 0; j < 4; ++j) acc[j] = simd::add(acc[j], simd::load(a.data() + i + 16 * static_cast<std::size_t>(j)));
    keep += simd::hsum(simd::add(simd::add(acc[0], acc[1]), simd::add(acc[2], acc[3])));
    t.push_back(now_s() - t0);
  }
  do_not_optimize(keep);
  return static_cast<double>(n * sizeof(float)) / median(t) * 1e-9;
}

//! Single-thread multiply-add throughput of the build's 16-lane vector (simd::vf16:
//! one zmm, two ymm or a scalar loop, as the attention kernels are compiled), in
//! 1e9 lane multiply-adds per second: the compute floor of decode attention, which
//! needs 2 * Hq * D of them per cached token (scores and values) however it decodes.
//! Median of `reps` timings of `iters` rounds over independent accumulator chains
//! (12 zmm or 6 x 2 ymm: more than FMA latency x FMA pipes on current x86 cores).
inline double fma_rate_gmacs(long iters = 2'000'000, int reps = 7) {
#if defined(BGTQ_SIMD_AVX512)
  constexpr int K = 12;
#else
  constexpr int K = 6;
#endif
  const simd::vf16 a = simd::set1(0.5f), b = simd::set1(1.0f);  // x -> x/2 + 1: stays near 2, no denormals
  std::vector<double> t;
  float keep = 0.0f;
  for (int r = 0; r < reps; ++r) {
    simd::vf16 acc[K];
    for (int i = 0; i < K; ++i) acc[i] = simd::set1(static_cast<float>(i + r));
    const double t0 = now_s();
    for (long n = 0; n < iters; ++n)
      for (int i = 0; i < K; ++i) acc[i] = simd::fma(acc[i], a, b);
    for (int i = 1; i < K; ++i) acc[0] = simd::add(acc[0], acc[i]);
    keep += simd::hsum(acc[0]);
    t.push_back(now_s() - t0);
  }
  do_not_optimize(keep);
  return static_cast<double>(K) * 16.0 * static_cast<double>(iters) / median(t) * 1e-9;
}

}  // namespace bgtq::bench
