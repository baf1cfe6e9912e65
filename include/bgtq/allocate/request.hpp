#pragma once
//! @file allocate/request.hpp
//! What every bit allocator takes and returns, the budget rule B = floor(avg_bits * L),
//! the objective J = sum_i s_i D(b_i), and the request validation all allocators share.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "distortion.hpp"

namespace bgtq {

//! Total bit budget for `num_blocks` blocks at `avg_bits` bits each on average:
//! floor(avg_bits * num_blocks + guard), guard = max(1e-9, 8 DBL_EPSILON * avg_bits *
//! num_blocks). The guard lifts products such as 0.29 * 100 (28.999999999999996 in
//! double) or 2.3 * 1e8 that land a rounding error below an integer; its relative part
//! keeps that true at any size (the decimal avg_bits and the product round by at most
//! ~2.2e-16 of the product together; the guard is 8 times that), while a genuine fraction
//! (2.99 * 10, or 2.9999999999995 * 1e6, 5e-7 short of an integer) is still floored.
//! Fractional averages are allowed.
//! A product above 2^53 gives 2^53: every allocator caps a budget above L * b_max
//! (< 2^35 for an int L), so the result is the same capped allocation.
//! @throws bgtq::error(invalid_argument) if avg_bits is negative, NaN or infinite, or
//! num_blocks < 1.
inline std::int64_t budget_for(double avg_bits, int num_blocks) {
  BGTQ_REQUIRE(std::isfinite(avg_bits) && avg_bits >= 0.0, errc::invalid_argument,
               "avg_bits = " + detail::alloc_num(avg_bits) + " (must be finite and >= 0)");
  BGTQ_REQUIRE(num_blocks >= 1, errc::invalid_argument,
               "number of blocks = " + std::to_string(num_blocks) + " (must be >= 1)");
  constexpr double two53 = 9007199254740992.0;
  const double product = avg_bits * static_cast<double>(num_blocks);
  const double total = product + std::max(1e-9, 8.0 * std::numeric_limits<double>::epsilon() * product);
  if (!(total < two53)) return static_cast<std::int64_t>(two53);
  return static_cast<std::int64_t>(std::floor(total));
}

//! One allocation problem: minimise sum_i s_i D(b_i) over integers
//! b_min <= b_i <= b_max with sum_i b_i = budget.
struct allocation_request {
  std::span<const double> scores;  //!< s_i >= 0, finite; one per block (not owned)
  std::int64_t budget = 0;         //!< B, total bit-steps (see budget_for)
  int b_min = 1;                   //!< smallest width, 0..8 (0 lets a block be dropped)
  int b_max = 8;                   //!< largest width, b_min..8
  struct distortion_table distortion = distortion_table::rate4();  //!< the law D(b)
};

//! The result of an allocator.
struct allocation {
  std::vector<int> bits;         //!< b_i, one per block, each in [b_min, b_max]
  double objective = 0;          //!< sum_i s_i D(b_i), summed in block order
  std::int64_t total_bits = 0;   //!< sum_i b_i; equals the budget unless capped
  bool capped = false;           //!< the budget exceeded L * b_max and was lowered to it
  std::string warning;           //!< human-readable note (e.g. the cap), empty if none
};

//! J = sum_i s_i D(b_i), summed in index order (the value every allocator reports).
//! @throws bgtq::error(shape_mismatch) if the spans differ in length, or
//! bgtq::error(invalid_argument) for a width outside 0..8.
inline double allocation_objective(std::span<const double> scores, std::span<const int> bits,
                                   const struct distortion_table& d) {
  BGTQ_REQUIRE(scores.size() == bits.size(), errc::shape_mismatch,
               "objective: " + std::to_string(scores.size()) + " scores but " + std::to_string(bits.size()) +
                   " widths");
  double j = 0.0;
  for (std::size_t i = 0; i < scores.size(); ++i) j += scores[i] * d(bits[i]);
  return j;
}

namespace detail {

//! The budget an allocator actually spends, after validation and capping.
struct resolved_budget {
  std::int64_t budget = 0;  //!< min(B, L * b_max)
  bool capped = false;
  std::string warning;
};

//! Checks b_min/b_max (0..8, b_min <= b_max).
inline void check_width_range(int b_min, int b_max) {
  BGTQ_REQUIRE(b_min >= 0 && b_min <= 8, errc::invalid_argument,
               "b_min = " + std::to_string(b_min) + " is outside 0..8");
  BGTQ_REQUIRE(b_max >= 0 && b_max <= 8, errc::invalid_argument,
               "b_max = " + std::to_string(b_max) + " is outside 0..8");
  BGTQ_REQUIRE(b_min <= b_max, errc::invalid_argument,
               "b_min = " + std::to_string(b_min) + " exceeds b_max = " + std::to_string(b_max));
}

//! Checks one score; `where` names it ("score 3", "pool 1 score 3").
inline void check_score(double s, const std::string& where_prefix, std::size_t i) {
  if (!std::isfinite(s))
    fail(errc::non_finite, where_prefix + "score " + std::to_string(i) + " is " + detail::alloc_num(s) +
                               " (scores must be finite)");
  if (s < 0.0)
    fail(errc::invalid_argument, where_prefix + "score " + std::to_string(i) + " = " + detail::alloc_num(s) +
                                     " is negative (scores must be >= 0)");
}

//! Feasibility and capping of budget B for L blocks in [b_min, b_max].
//! @throws bgtq::error(infeasible) if B < L * b_min.
inline resolved_budget resolve_budget(std::int64_t budget, std::size_t num_blocks, int b_min, int b_max) {
  const auto L = static_cast<std::int64_t>(num_blocks);
  const std::int64_t lo = L * b_min, hi = L * b_max;
  if (budget < lo)
    fail(errc::infeasible, "bit budget B = " + std::to_string(budget) + " is infeasible: L = " + std::to_string(L) +
                               " blocks at b_min = " + std::to_string(b_min) + " need at least L * b_min = " +
                               std::to_string(lo) + " bits");
  resolved_budget r;
  r.budget = budget;
  if (budget > hi) {
    r.budget = hi;
    r.capped = true;
    r.warning = "bit budget B = " + std::to_string(budget) + " exceeds L * b_max = " + std::to_string(L) + " * " +
                std::to_string(b_max) + " = " + std::to_string(hi) + "; capped to " + std::to_string(hi) +
                " (every block at b_max)";
  }
  return r;
}

//! Checks that no objective sum_i s_i D(b_i) of widths in [b_min, ...] can overflow
//! double: its largest value is sum_i s_i D(b_min) (D is non-increasing). Finite scores
//! near DBL_MAX would otherwise make every cost +Inf, and an allocator comparing costs
//! could return widths that do not even spend the budget. `where` prefixes the message.
//! @throws bgtq::error(invalid_argument) naming the sum and what to do.
inline void check_objective_finite(std::span<const double> scores, double d_b_min, const std::string& where) {
  double worst = 0.0;
  for (double s : scores) worst += s * d_b_min;
  BGTQ_REQUIRE(std::isfinite(worst), errc::invalid_argument,
               where + "the scores are too large: sum of score x D(b_min) overflows double (scores up to " +
                   detail::alloc_num(*std::max_element(scores.begin(), scores.end())) +
                   "); divide them by a common factor, which does not change the allocation");
}

//! Validates a request (non-empty finite non-negative scores, width range, table,
//! feasibility, an objective that stays finite) and returns the budget to spend.
//! `require_convex` = false accepts a non-convex (still non-increasing) law: for the
//! exact dynamic program, which does not rely on convexity.
inline resolved_budget validate_request(const allocation_request& r, bool require_convex = true) {
  BGTQ_REQUIRE(!r.scores.empty(), errc::invalid_argument, "allocation request has no scores (no blocks)");
  check_width_range(r.b_min, r.b_max);
  r.distortion.validate(require_convex);
  for (std::size_t i = 0; i < r.scores.size(); ++i) check_score(r.scores[i], "", i);
  check_objective_finite(r.scores, r.distortion.d[static_cast<std::size_t>(r.b_min)], "");
  return resolve_budget(r.budget, r.scores.size(), r.b_min, r.b_max);
}

//! Fills the bookkeeping fields of `a` from its bits.
inline void finish_allocation(allocation& a, std::span<const double> scores, const struct distortion_table& d,
                              const resolved_budget& rb) {
  a.objective = allocation_objective(scores, a.bits, d);
  a.total_bits = 0;
  for (int b : a.bits) a.total_bits += b;
  a.capped = rb.capped;
  a.warning = rb.warning;
}

}  // namespace detail
}  // namespace bgtq
