#pragma once
// Helpers shared by the allocate tests: random instances from counter_rng, the
// exhaustive enumerator (the ground truth for small L) and a relative comparison.
#include <bgtq/allocate/allocate.hpp>
#include <bgtq/core/rng.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace alloc_test {

//! |a - b| <= rel * max(|a|, |b|), and exact equality when both are zero.
inline bool rel_close(double a, double b, double rel = 1e-12) {
  return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b));
}

//! Smallest J over every integer vector in [b_min, b_max]^L with sum == budget,
//! enumerated recursively with pruning on the remaining budget. J is summed in index
//! order, exactly as bgtq::allocation_objective does.
struct exhaustive {
  exhaustive(const std::vector<double>& scores, const bgtq::distortion_table& table, int lo, int hi)
      : s(scores), d(table), b_min(lo), b_max(hi) {}
  const std::vector<double>& s;
  const bgtq::distortion_table& d;
  int b_min, b_max;
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> cur, arg;
  long leaves = 0;

  void rec(std::size_t i, std::int64_t left, double partial) {
    const auto n = static_cast<std::int64_t>(s.size());
    const std::int64_t rest = n - static_cast<std::int64_t>(i);
    if (rest == 0) {
      ++leaves;
      if (left == 0 && partial < best) {
        best = partial;
        arg = cur;
      }
      return;
    }
    for (int b = b_min; b <= b_max; ++b) {
      const std::int64_t after = left - b;
      if (after < (rest - 1) * b_min || after > (rest - 1) * b_max) continue;
      cur[i] = b;
      rec(i + 1, after, partial + s[i] * d.d[static_cast<std::size_t>(b)]);
    }
  }
  double solve(std::int64_t budget) {
    cur.assign(s.size(), 0);
    rec(0, budget, 0.0);
    return best;
  }
};

//! Log-uniform score in [1e-6, 1e6].
inline double log_uniform_score(bgtq::counter_rng& rng) {
  return std::exp(std::log(1e-6) + rng.uniform() * (std::log(1e6) - std::log(1e-6)));
}

//! A random convex decreasing table: D(8) >= 0 random, gains g_0 >= g_1 >= ... >= g_7 >= 0
//! (sorted random decrements, some repeated and some zero to create exact ties),
//! D(b) = D(b+1) + g_b.
inline bgtq::distortion_table random_convex_table(bgtq::counter_rng& rng) {
  std::array<double, 8> g{};
  for (double& x : g) {
    const double u = rng.uniform();
    x = u < 0.1 ? 0.0 : std::exp(-12.0 * rng.uniform());
  }
  if (rng.below(4) == 0) g[3] = g[2];  // repeated decrement: equal gains at different b
  std::sort(g.begin(), g.end(), [](double a, double b) { return a > b; });
  if (g[0] == 0.0) g[0] = 1.0;
  bgtq::distortion_table t;
  t.d[8] = rng.below(3) == 0 ? 0.0 : 1e-4 * rng.uniform();
  for (int b = 7; b >= 0; --b) t.d[static_cast<std::size_t>(b)] = t.d[static_cast<std::size_t>(b + 1)] + g[static_cast<std::size_t>(b)];
  return t;
}

//! One random small instance.
struct instance {
  std::vector<double> s;
  int b_min = 0, b_max = 0;
  std::int64_t budget = 0;
};

//! L in [1, max_L], random b_min <= b_max in 0..8, budget uniform over the feasible
//! range [L b_min, L b_max], log-uniform scores; one instance in four gets exact ties
//! (a few repeated scores) and one in six some zero scores.
inline instance random_instance(bgtq::counter_rng& rng, int max_L) {
  instance in;
  const int L = 1 + static_cast<int>(rng.below(static_cast<std::uint32_t>(max_L)));
  int a = static_cast<int>(rng.below(9)), b = static_cast<int>(rng.below(9));
  if (a > b) std::swap(a, b);
  in.b_min = a;
  in.b_max = b;
  in.s.resize(static_cast<std::size_t>(L));
  for (double& x : in.s) x = log_uniform_score(rng);
  if (rng.below(4) == 0) {
    const double v = in.s[0];
    for (double& x : in.s)
      if (rng.below(2) == 0) x = v;
  }
  if (rng.below(6) == 0)
    for (double& x : in.s)
      if (rng.below(3) == 0) x = 0.0;
  const std::int64_t lo = static_cast<std::int64_t>(L) * a, hi = static_cast<std::int64_t>(L) * b;
  in.budget = lo + static_cast<std::int64_t>(rng.below(static_cast<std::uint32_t>(hi - lo + 1)));
  return in;
}

//! The widths are in range and sum to the budget.
inline bool valid_bits(const std::vector<int>& bits, int b_min, int b_max, std::int64_t budget) {
  std::int64_t sum = 0;
  for (int b : bits) {
    if (b < b_min || b > b_max) return false;
    sum += b;
  }
  return sum == budget;
}

}  // namespace alloc_test
