#pragma once
//! @file allocate/dp.hpp
//! Exact dynamic program: the reference the greedy allocator is tested against. It
//! needs no convexity, so it is also the allocator of choice for a law that is not
//! convex: it accepts any non-increasing table (distortion_table::validate(false)),
//! where greedy and uniform refuse a non-convex one.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "request.hpp"

namespace bgtq {

//! Exact allocation by dynamic programming over (block, extra bits used):
//! cost[i][k] = min over j in 0..b_max-b_min of cost[i-1][k-j] + s_i D(b_min + j).
//! O(L * K * (b_max - b_min + 1)) time with K = B - L * b_min, and L * (K + 1) bytes
//! for the back-pointers. Ties: each cost keeps the smallest j among equal ones
//! (strict `<`), and the widths are read back from the last block, so among optimal
//! solutions the later blocks get the smaller widths (scores (1, 1, 1) at 5 bits:
//! (2, 2, 1)); greedy may resolve ties differently, with the same objective.
struct dp_allocator {
  static constexpr const char* name = "dp";
  //! Largest back-pointer table (L * (K + 1) entries) the DP will allocate.
  static constexpr std::size_t max_cells = std::size_t{1} << 28;

  //! @throws bgtq::error as described for bit_allocator (concepts.hpp), and
  //! bgtq::error(unsupported) if L * (K + 1) > max_cells (use greedy_allocator).
  static allocation allocate(const allocation_request& r) {
    const detail::resolved_budget rb = detail::validate_request(r, /*require_convex=*/false);
    const std::size_t n = r.scores.size();
    const auto K = static_cast<std::size_t>(rb.budget - static_cast<std::int64_t>(n) * r.b_min);
    const int w = r.b_max - r.b_min;
    BGTQ_REQUIRE(n <= max_cells / (K + 1), errc::unsupported,
                 "dp allocator: " + std::to_string(n) + " blocks x " + std::to_string(K + 1) +
                     " budget states exceed its table limit; use the greedy allocator");
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<double> prev(K + 1, inf), cur(K + 1);
    std::vector<unsigned char> choice(n * (K + 1), 0);  // [block][extra bits used so far] -> j
    prev[0] = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const double s = r.scores[i];
      for (std::size_t k = 0; k <= K; ++k) {
        double best = inf;
        unsigned char arg = 0;
        for (int j = 0; j <= w && static_cast<std::size_t>(j) <= k; ++j) {
          const double c = prev[k - static_cast<std::size_t>(j)];
          if (c == inf) continue;
          const double v = c + s * r.distortion.d[static_cast<std::size_t>(r.b_min + j)];
          if (v < best) {
            best = v;
            arg = static_cast<unsigned char>(j);
          }
        }
        cur[k] = best;
        choice[i * (K + 1) + k] = arg;
      }
      prev.swap(cur);
    }
    allocation a;
    a.bits.resize(n);
    std::size_t k = K;
    for (std::size_t i = n; i-- > 0;) {
      const int j = choice[i * (K + 1) + k];
      a.bits[i] = r.b_min + j;
      k -= static_cast<std::size_t>(j);
    }
    detail::finish_allocation(a, r.scores, r.distortion, rb);
    return a;
  }
};

}  // namespace bgtq
