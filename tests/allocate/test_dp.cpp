// Greedy against the exact dynamic program at realistic sizes (L = 64, a D = 128 head),
// and pooled greedy against the DP over the concatenated pools.
#include <catch2/catch.hpp>

#include "alloc_test_util.hpp"

#include <bgtq/allocate/allocate.hpp>
#include <bgtq/core/rng.hpp>

#include <span>
#include <vector>

using alloc_test::rel_close;

TEST_CASE("dp equals exhaustive enumeration on small instances", "[allocate][dp]") {
  bgtq::counter_rng rng(31337);
  for (int t = 0; t < 1000; ++t) {
    const bgtq::distortion_table d =
        (t % 2) ? bgtq::distortion_table::rate4() : alloc_test::random_convex_table(rng);
    const alloc_test::instance in = alloc_test::random_instance(rng, 5);
    bgtq::allocation_request req{.scores = in.s, .budget = in.budget, .b_min = in.b_min, .b_max = in.b_max,
                                 .distortion = d};
    const bgtq::allocation p = bgtq::dp_allocator::allocate(req);
    alloc_test::exhaustive ex{in.s, d, in.b_min, in.b_max};
    INFO("instance " << t);
    REQUIRE(alloc_test::valid_bits(p.bits, in.b_min, in.b_max, in.budget));
    REQUIRE(rel_close(p.objective, ex.solve(in.budget)));
  }
}

TEST_CASE("greedy equals dp on random L = 64 heads over the whole budget range", "[allocate][dp]") {
  bgtq::counter_rng rng(2024);
  const int L = 64;
  for (int t = 0; t < 120; ++t) {
    const bgtq::distortion_table d =
        (t % 3 == 0) ? alloc_test::random_convex_table(rng) : bgtq::distortion_table::rate4();
    int a = static_cast<int>(rng.below(9)), b = static_cast<int>(rng.below(9));
    if (a > b) std::swap(a, b);
    std::vector<double> s(L);
    for (double& x : s) x = alloc_test::log_uniform_score(rng);
    if (t % 4 == 1)
      for (int i = 0; i < L; i += 3) s[static_cast<std::size_t>(i)] = s[0];  // exact ties
    if (t % 5 == 2)
      for (int i = 1; i < L; i += 4) s[static_cast<std::size_t>(i)] = 0.0;
    // budgets at both ends and in between
    const std::int64_t lo = std::int64_t{L} * a, hi = std::int64_t{L} * b;
    const std::int64_t B = (t % 7 == 0) ? lo : (t % 7 == 1) ? hi : lo + rng.below(static_cast<std::uint32_t>(hi - lo + 1));
    bgtq::allocation_request req{.scores = s, .budget = B, .b_min = a, .b_max = b, .distortion = d};
    const bgtq::allocation g = bgtq::greedy_allocator::allocate(req);
    const bgtq::allocation p = bgtq::dp_allocator::allocate(req);
    INFO("instance " << t << " b_min = " << a << " b_max = " << b << " B = " << B);
    REQUIRE(alloc_test::valid_bits(g.bits, a, b, B));
    REQUIRE(alloc_test::valid_bits(p.bits, a, b, B));
    REQUIRE(rel_close(g.objective, p.objective));
    // greedy is never worse than uniform
    const bgtq::allocation u = bgtq::uniform_allocator::allocate(req);
    REQUIRE(g.objective <= u.objective * (1 + 1e-12));
  }
}

TEST_CASE("pooled greedy equals dp over the concatenated pools", "[allocate][dp][pooled]") {
  bgtq::counter_rng rng(555);
  for (int t = 0; t < 40; ++t) {
    const int heads = 1 + static_cast<int>(rng.below(4));
    std::vector<std::vector<double>> store(static_cast<std::size_t>(heads));
    std::vector<std::span<const double>> pools;
    std::vector<double> all;
    for (auto& h : store) {
      h.resize(8 + rng.below(25));  // pools of different sizes (awkward: 8..32 blocks)
      const double scale = std::ldexp(1.0, static_cast<int>(rng.below(20)) - 10);  // heads differ in energy
      for (double& x : h) x = scale * alloc_test::log_uniform_score(rng);
      pools.emplace_back(h);
      all.insert(all.end(), h.begin(), h.end());
    }
    const int b_min = static_cast<int>(rng.below(3)), b_max = 4 + static_cast<int>(rng.below(5));
    const auto N = static_cast<std::int64_t>(all.size());
    const std::int64_t B = N * b_min + rng.below(static_cast<std::uint32_t>(N * (b_max - b_min) + 1));
    const bgtq::distortion_table d = bgtq::distortion_table::rate4();
    const auto res = bgtq::allocate_pooled(pools, B, b_min, b_max, d);
    REQUIRE(res.size() == pools.size());
    std::vector<int> cat;
    double j = 0.0;
    std::int64_t tot = 0;
    for (std::size_t p = 0; p < res.size(); ++p) {
      REQUIRE(res[p].bits.size() == pools[p].size());
      REQUIRE(res[p].objective == bgtq::allocation_objective(pools[p], res[p].bits, d));
      cat.insert(cat.end(), res[p].bits.begin(), res[p].bits.end());
      j += res[p].objective;
      tot += res[p].total_bits;
    }
    REQUIRE(alloc_test::valid_bits(cat, b_min, b_max, B));
    REQUIRE(tot == B);
    // same as greedy over the concatenation, bit for bit
    bgtq::allocation_request req{.scores = all, .budget = B, .b_min = b_min, .b_max = b_max};
    REQUIRE(bgtq::greedy_allocator::allocate(req).bits == cat);
    const bgtq::allocation p = bgtq::dp_allocator::allocate(req);
    INFO("instance " << t << " heads = " << heads << " N = " << N << " B = " << B);
    REQUIRE(rel_close(bgtq::allocation_objective(all, cat, d), p.objective));
    REQUIRE(rel_close(j, p.objective, 1e-11));  // per-pool sums add in a different order
  }
}

TEST_CASE("pooled allocation moves bits between heads, per-head allocation cannot", "[allocate][pooled]") {
  // head 0 has all the energy: pooled gives it more than its share, per-head cannot
  std::vector<double> h0 = {100, 100, 100, 100}, h1 = {1e-3, 1e-3, 1e-3, 1e-3};
  std::vector<std::span<const double>> pools = {h0, h1};
  const auto res = bgtq::allocate_pooled(pools, 2 * bgtq::budget_for(3.0, 4), 1, 8, bgtq::distortion_table::rate4());
  REQUIRE(res[0].total_bits > 12);
  REQUIRE(res[1].total_bits < 12);
  REQUIRE(res[0].total_bits + res[1].total_bits == 24);
  // a single pool is the plain greedy allocation
  std::vector<std::span<const double>> one = {h0};
  const auto single = bgtq::allocate_pooled(one, 10, 1, 8, bgtq::distortion_table::rate4());
  bgtq::allocation_request req{.scores = h0, .budget = 10};
  const auto g = bgtq::greedy_allocator::allocate(req);
  REQUIRE(single.at(0).bits == g.bits);
  REQUIRE(single.at(0).objective == g.objective);
}
