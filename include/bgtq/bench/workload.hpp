#pragma once
//! @file bench/workload.hpp
//! What the decode benchmarks (`bgtq bench attention`, bench/bench_attention.cpp) time,
//! shared so both time the same thing: the synthetic calibration Block-GTQ is planned
//! from, and the filling of a cache.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../core/rng.hpp"

namespace bgtq::bench {

//! Block energies shaped like real keys: log-linear decay across the L RoPE blocks with a
//! 100x spread, the low-frequency end strongest, heads differing by up to 20%;
//! [layer][head][block] as build_plan takes them.
inline std::vector<double> spread_energies(int layers, int heads, int L) {
  std::vector<double> s;
  for (int i = 0; i < layers * heads; ++i)
    for (int b = 0; b < L; ++b) s.push_back(std::pow(100.0, static_cast<double>(b) / (L - 1)) * (1.0 + 0.1 * (i % 3)));
  return s;
}

//! Appends T tokens of layer 0 to each of S new sequences of `cache` (random normal keys
//! and values, the same 1024-token block repeated) and returns the first sequence's id.
//! S = 1: one prefill in 1024-token chunks, so the pages are contiguous in the pool.
//! S > 1: 64 tokens at a time to sequences drawn at random, so each sequence's pages are
//! spread over an S-times larger pool, as in a serving engine.
template <class Cache>
int fill_sequences(Cache& cache, int T, int S = 1) {
  const auto& cfg = cache.config();
  std::vector<int> seqs;
  for (int i = 0; i < S; ++i) seqs.push_back(cache.add_sequence());
  const int chunk = S > 1 ? 64 : 1024;
  std::vector<float> k(static_cast<std::size_t>(chunk) * cfg.kv_heads * cfg.head_dim), v(k.size());
  counter_rng r(3);
  for (float& x : k) x = static_cast<float>(r.normal());
  for (float& x : v) x = static_cast<float>(r.normal());
  std::vector<int> left(static_cast<std::size_t>(S), T);
  for (int remaining = S; remaining > 0;) {
    const int i = S > 1 ? static_cast<int>(r.below(static_cast<std::uint32_t>(S))) : 0;
    if (left[static_cast<std::size_t>(i)] == 0) continue;
    const int n = std::min(chunk, left[static_cast<std::size_t>(i)]);
    cache.append(seqs[static_cast<std::size_t>(i)], 0, k.data(), v.data(), n);
    if ((left[static_cast<std::size_t>(i)] -= n) == 0) --remaining;
  }
  return seqs[0];
}

}  // namespace bgtq::bench
