#pragma once
//! @file allocate/greedy.hpp
//! Greedy marginal-gain allocation (Theorem 1 of the paper) per block set, and the
//! pooled variant that shares one budget across several heads.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "request.hpp"

namespace bgtq {
namespace detail {

//! Greedy core without validation. Sets bits[i] = b_min for all i, then `extra` times
//! gives one bit to the block with the largest gain s_i * (D(b_i) - D(b_i + 1)) among
//! blocks below b_max; equal gains go to the block with fewer bits, then to the lower
//! index (so all-zero scores, where every gain is 0, get the uniform widths). Requires
//! 0 <= extra <= n * (b_max - b_min), 0 <= b_min <= b_max <= 8, finite scores.
//! O(n + extra * log n) time, O(n) extra memory (one heap of (gain, index) pairs).
//! Optimal when D is convex (docs/theory.md); exposed for tests that show what happens
//! when it is not.
inline void greedy_fill(const double* scores, std::size_t n, std::int64_t extra, int b_min, int b_max,
                        const struct distortion_table& d, int* bits) {
  for (std::size_t i = 0; i < n; ++i) bits[i] = b_min;
  if (extra <= 0 || b_min == b_max || n == 0) return;
  struct entry {
    double gain;
    std::size_t index;
  };
  // Binary max-heap [0, size): the root is the next block to serve. `first(a, b)`: a is
  // served before b (larger gain; equal gains: fewer bits, then lower index).
  const auto first = [bits](const entry& a, const entry& b) {
    if (a.gain != b.gain) return a.gain > b.gain;
    const int ba = bits[a.index], bb = bits[b.index];
    return ba < bb || (ba == bb && a.index < b.index);
  };
  std::vector<entry> heap(n);
  std::size_t size = n;
  const auto sift_down = [&](std::size_t i) {
    const entry e = heap[i];
    for (;;) {
      std::size_t c = 2 * i + 1;
      if (c >= size) break;
      if (c + 1 < size && first(heap[c + 1], heap[c])) ++c;
      if (!first(heap[c], e)) break;
      heap[i] = heap[c];
      i = c;
    }
    heap[i] = e;
  };
  const double g0 = d.gain(b_min);
  for (std::size_t i = 0; i < n; ++i) heap[i] = entry{scores[i] * g0, i};
  for (std::size_t i = n / 2; i-- > 0;) sift_down(i);
  for (std::int64_t step = 0; step < extra && size > 0; ++step) {
    const std::size_t i = heap[0].index;
    const int b = ++bits[i];
    if (b < b_max) {
      heap[0].gain = scores[i] * d.gain(b);  // a fall (or, at an equal gain, its extra bit) sifts down; a rise (non-convex D) keeps it the root
    } else {
      heap[0] = heap[--size];  // block i is full
    }
    sift_down(0);
  }
}

}  // namespace detail

//! Greedy allocation: start every block at b_min and hand out the B - L * b_min
//! remaining bits one at a time to the block whose next bit lowers J the most
//! (gain s_i (D(b_i) - D(b_i + 1))), skipping blocks at b_max; equal gains go to the
//! block with fewer bits, then to the lowest block index, so the result is deterministic
//! and blocks that tie stay as even as the budget allows (all-zero scores: the uniform
//! widths, one group instead of several). For a convex decreasing D this
//! is an optimal solution (Theorem 1; proof in docs/theory.md), in O(L + B log L).
struct greedy_allocator {
  static constexpr const char* name = "greedy";

  //! @throws bgtq::error as described for bit_allocator (concepts.hpp).
  static allocation allocate(const allocation_request& r) {
    const detail::resolved_budget rb = detail::validate_request(r);
    const std::size_t n = r.scores.size();
    allocation a;
    a.bits.resize(n);
    const std::int64_t extra = rb.budget - static_cast<std::int64_t>(n) * r.b_min;
    detail::greedy_fill(r.scores.data(), n, extra, r.b_min, r.b_max, r.distortion, a.bits.data());
    detail::finish_allocation(a, r.scores, r.distortion, rb);
    return a;
  }
};

//! Pooled greedy allocation: one budget shared by several score sets (e.g. all KV heads
//! of a layer, or every head of the model). It is the greedy allocation of the
//! concatenation pools[0] ++ pools[1] ++ ... (ties: fewer bits, then pool order and block
//! index), so it
//! is optimal for the pooled problem by the same theorem. Returns one allocation per
//! pool with that pool's bits, objective and total_bits; `capped` and `warning`
//! describe the shared budget and are the same in every element.
//! @param pools        score sets, each non-empty, finite and >= 0
//! @param total_budget bits for all blocks of all pools together (e.g. budget_for(avg, sum of sizes))
//! @param b_min        smallest width of any block, 0..8 (0 lets a block be dropped)
//! @param b_max        largest width of any block, b_min..8
//! @param d            the distortion law D(b), a valid convex table
//!                     (distortion_table::validate)
//! @throws bgtq::error(invalid_argument) for no pools, an empty pool, a bad width range
//! or table, a negative score (naming pool and index); non_finite for NaN/Inf scores;
//! infeasible if total_budget < (total blocks) * b_min.
inline std::vector<allocation> allocate_pooled(std::span<const std::span<const double>> pools,
                                               std::int64_t total_budget, int b_min, int b_max,
                                               const struct distortion_table& d) {
  BGTQ_REQUIRE(!pools.empty(), errc::invalid_argument, "pooled allocation: no pools");
  detail::check_width_range(b_min, b_max);
  d.validate();
  std::size_t total = 0;
  for (std::size_t p = 0; p < pools.size(); ++p) {
    BGTQ_REQUIRE(!pools[p].empty(), errc::invalid_argument,
                 "pooled allocation: pool " + std::to_string(p) + " has no scores");
    for (std::size_t i = 0; i < pools[p].size(); ++i)
      detail::check_score(pools[p][i], "pool " + std::to_string(p) + " ", i);
    detail::check_objective_finite(pools[p], d.d[static_cast<std::size_t>(b_min)], "pool " + std::to_string(p) + ": ");
    total += pools[p].size();
  }
  const detail::resolved_budget rb = detail::resolve_budget(total_budget, total, b_min, b_max);
  std::vector<double> all;
  all.reserve(total);
  for (const auto& pool : pools) all.insert(all.end(), pool.begin(), pool.end());
  std::vector<int> bits(total);
  detail::greedy_fill(all.data(), total, rb.budget - static_cast<std::int64_t>(total) * b_min, b_min, b_max, d,
                      bits.data());
  std::vector<allocation> out(pools.size());
  std::size_t off = 0;
  for (std::size_t p = 0; p < pools.size(); ++p) {
    const std::size_t n = pools[p].size();
    out[p].bits.assign(bits.begin() + static_cast<std::ptrdiff_t>(off), bits.begin() + static_cast<std::ptrdiff_t>(off + n));
    detail::finish_allocation(out[p], pools[p], d, rb);
    off += n;
  }
  return out;
}

}  // namespace bgtq
