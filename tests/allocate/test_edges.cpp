// Edge cases, tie-breaking, errors, budget rule, and the uniform baseline.
#include <catch2/catch.hpp>

#include "alloc_test_util.hpp"

#include <bgtq/allocate/allocate.hpp>
#include <bgtq/core/rng.hpp>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace {
using bits_t = std::vector<int>;

bgtq::allocation greedy(const std::vector<double>& s, std::int64_t B, int b_min = 1, int b_max = 8) {
  bgtq::allocation_request req{.scores = s, .budget = B, .b_min = b_min, .b_max = b_max};
  return bgtq::greedy_allocator::allocate(req);
}

// Runs f, requires a bgtq::error with `code` whose message contains every `needle`.
template <class F>
void require_error(F&& f, bgtq::errc code, std::initializer_list<const char*> needles) {
  try {
    f();
  } catch (const bgtq::error& e) {
    INFO("message: " << e.what());
    REQUIRE(e.code() == code);
    for (const char* n : needles) REQUIRE(std::string(e.what()).find(n) != std::string::npos);
    return;
  }
  FAIL("no bgtq::error thrown");
}
}  // namespace

TEST_CASE("the documented example: scores 8 1 1 1 at 2 bits", "[allocate]") {
  const auto a = greedy({8, 1, 1, 1}, bgtq::budget_for(2.0, 4));
  REQUIRE(a.bits == bits_t{3, 2, 2, 1});
  REQUIRE(a.objective == 0.5);  // 8/64 + 1/16 + 1/16 + 1/4, exact in binary
  REQUIRE(a.total_bits == 8);
  REQUIRE_FALSE(a.capped);
  REQUIRE(a.warning.empty());
}

TEST_CASE("ties go to the block with fewer bits, then the lowest index, deterministically", "[allocate][ties]") {
  // equal scores: extra bits go 0, 1, 2, 3, then 0 again
  REQUIRE(greedy({1, 1, 1, 1}, 6).bits == bits_t{2, 2, 1, 1});
  REQUIRE(greedy({1, 1, 1, 1}, 9).bits == bits_t{3, 2, 2, 2});
  // ties across widths: 4 * 4^-2 gain equals 1 * 4^-1 gain exactly (powers of two); the
  // block with fewer bits takes it
  REQUIRE(greedy({4, 1}, 4).bits == bits_t{2, 2});  // block 1 (1 bit) before block 0's 3rd bit
  REQUIRE(greedy({1, 4}, 4).bits == bits_t{2, 2});  // block 0 (1 bit) before block 1's 3rd bit
  REQUIRE(greedy({4, 1}, 5).bits == bits_t{3, 2});  // then block 0: its 3rd bit's gain beats block 1's 2nd
  // all-zero scores: every gain is 0, so the bits go round (the uniform allocator's widths)
  REQUIRE(greedy({0, 0, 0}, 4, 0, 8).bits == bits_t{2, 1, 1});
  REQUIRE(greedy({0, 0, 0}, 10, 0, 8).bits == bits_t{4, 3, 3});
  for (const std::int64_t B : {8, 12, 24, 29, 64}) {
    const std::vector<double> zeros(8, 0.0);
    const bgtq::allocation_request req{.scores = zeros, .budget = B, .b_min = 1, .b_max = 8};
    INFO("B = " << B);
    REQUIRE(bgtq::greedy_allocator::allocate(req).bits == bgtq::uniform_allocator::allocate(req).bits);
  }
  // zero scores mixed with positive ones: zeros get nothing beyond b_min
  REQUIRE(greedy({0, 1, 0, 1}, 8).bits == bits_t{1, 3, 1, 3});
  // repeated runs give identical results
  bgtq::counter_rng rng(9);
  std::vector<double> s(97);
  for (double& x : s) x = std::ldexp(1.0, static_cast<int>(rng.below(6)));  // many exact ties
  const auto a = greedy(s, 3 * 97), b = greedy(s, 3 * 97);
  REQUIRE(a.bits == b.bits);
  // among blocks with equal score, widths never increase with the index
  for (std::size_t i = 0; i < s.size(); ++i)
    for (std::size_t j = i + 1; j < s.size(); ++j)
      if (s[i] == s[j]) REQUIRE(a.bits[i] >= a.bits[j]);
}

TEST_CASE("budget at the ends of the feasible range", "[allocate]") {
  const std::vector<double> s = {5, 0.1, 3, 7, 1e-6};
  for (int b_min = 0; b_min <= 8; ++b_min) {
    for (int b_max = b_min; b_max <= 8; ++b_max) {
      const auto lo = greedy(s, 5 * b_min, b_min, b_max);
      REQUIRE(lo.bits == bits_t(5, b_min));
      const auto hi = greedy(s, 5 * b_max, b_min, b_max);
      REQUIRE(hi.bits == bits_t(5, b_max));
      REQUIRE_FALSE(hi.capped);
    }
  }
}

TEST_CASE("a budget above L * b_max is capped with a warning", "[allocate]") {
  const std::vector<double> s = {1, 2, 3};
  for (auto run : {+[](const bgtq::allocation_request& r) { return bgtq::greedy_allocator::allocate(r); },
                   +[](const bgtq::allocation_request& r) { return bgtq::dp_allocator::allocate(r); },
                   +[](const bgtq::allocation_request& r) { return bgtq::uniform_allocator::allocate(r); }}) {
    bgtq::allocation_request req{.scores = s, .budget = 20, .b_min = 1, .b_max = 4};
    const auto a = run(req);
    REQUIRE(a.capped);
    REQUIRE(a.total_bits == 12);
    REQUIRE(a.bits == bits_t{4, 4, 4});
    REQUIRE(a.warning.find("20") != std::string::npos);
    REQUIRE(a.warning.find("capped to 12") != std::string::npos);
  }
  // avg_bits 9 with b_max 8: capped at 8 bits everywhere
  const auto a = greedy({1, 1}, bgtq::budget_for(9.0, 2));
  REQUIRE(a.capped);
  REQUIRE(a.bits == bits_t{8, 8});
}

TEST_CASE("a budget below L * b_min is infeasible", "[allocate][errors]") {
  require_error([] { greedy({1, 2, 3, 4}, 7, 2, 8); }, bgtq::errc::infeasible, {"B = 7", "L = 4", "b_min = 2", "8"});
  require_error([] { greedy({1}, -1, 0, 8); }, bgtq::errc::infeasible, {"B = -1"});
  std::vector<double> s = {1, 2, 3, 4};
  bgtq::allocation_request req{.scores = s, .budget = 3};
  require_error([&] { bgtq::dp_allocator::allocate(req); }, bgtq::errc::infeasible, {"B = 3"});
  require_error([&] { bgtq::uniform_allocator::allocate(req); }, bgtq::errc::infeasible, {"B = 3"});
}

TEST_CASE("b_min = 0 lets low-energy blocks be dropped", "[allocate]") {
  const auto a = greedy({1, 1e-9}, bgtq::budget_for(1.0, 2), 0, 8);
  REQUIRE(a.bits == bits_t{2, 0});
  // J counts the dropped block at D(0) = 1
  REQUIRE(a.objective == 1.0 / 16 + 1e-9);
  // avg 0: everything dropped
  REQUIRE(greedy({3, 2, 1}, bgtq::budget_for(0.0, 3), 0, 8).bits == bits_t{0, 0, 0});
}

TEST_CASE("budget_for: fractional averages and the float guard", "[allocate][budget]") {
  REQUIRE(bgtq::budget_for(2.5, 3) == 7);
  REQUIRE(bgtq::budget_for(3.0, 64) == 192);
  REQUIRE(bgtq::budget_for(0.29, 100) == 29);    // 0.29 * 100 = 28.999999999999996 in double
  REQUIRE(bgtq::budget_for(4.35, 100) == 435);   // 434.99999999999994
  REQUIRE(bgtq::budget_for(2.3, 100) == 230);
  REQUIRE(bgtq::budget_for(2.99, 10) == 29);     // a genuine fraction is still floored
  REQUIRE(bgtq::budget_for(0.0, 5) == 0);
  const auto a = greedy({1, 4, 2}, bgtq::budget_for(2.5, 3));
  REQUIRE(a.total_bits == 7);
  REQUIRE(a.bits == bits_t{2, 3, 2});
  require_error([] { bgtq::budget_for(-0.5, 4); }, bgtq::errc::invalid_argument, {"avg_bits = -0.5"});
  require_error([] { bgtq::budget_for(std::numeric_limits<double>::quiet_NaN(), 4); }, bgtq::errc::invalid_argument,
                {"avg_bits"});
  require_error([] { bgtq::budget_for(std::numeric_limits<double>::infinity(), 4); }, bgtq::errc::invalid_argument,
                {"avg_bits"});
  require_error([] { bgtq::budget_for(3.0, 0); }, bgtq::errc::invalid_argument, {"blocks = 0"});
  // the guard is relative too: products near 1e8 are off by more than 1e-9
  REQUIRE(bgtq::budget_for(0.29, 100000000) == 29000000);   // 28999999.999999996
  REQUIRE(bgtq::budget_for(2.3, 100000000) == 230000000);   // 229999999.99999997
  REQUIRE(bgtq::budget_for(2.99, 100000000) == 299000000);
  REQUIRE(bgtq::budget_for(2.9999999, 100000000) == 299999990);  // a genuine fraction at that size
  REQUIRE(bgtq::budget_for(2.999999999, 100000000) == 299999999);
  // fractions a relative guard of 1e-12 lifted (a review): 5e-7, 5e-9 and 4.3e-3 short of an integer
  REQUIRE(bgtq::budget_for(2.9999999999995, 1000000) == 2999999);
  REQUIRE(bgtq::budget_for(0.9999999999995, 100000) == 99999);
  REQUIRE(bgtq::budget_for(3.999999999998, 2147483647) == 8589934587);
  // past 2^53 the budget is 2^53: the allocators cap it to L * b_max (errors row 9)
  REQUIRE(bgtq::budget_for(1e300, 4) == (std::int64_t{1} << 53));
  REQUIRE(bgtq::budget_for(1e9, 10000000) == (std::int64_t{1} << 53));
}

TEST_CASE("bad scores are rejected with their index", "[allocate][errors]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  require_error([&] { greedy({1, 2, nan, 4}, 8); }, bgtq::errc::non_finite, {"score 2", "nan"});
  require_error([&] { greedy({1, inf}, 4); }, bgtq::errc::non_finite, {"score 1", "inf"});
  require_error([&] { greedy({1, 2, 3, -1e-7}, 8); }, bgtq::errc::invalid_argument, {"score 3", "-1e-07", "negative"});
  std::vector<double> empty;
  bgtq::allocation_request req{.scores = empty, .budget = 0};
  require_error([&] { bgtq::greedy_allocator::allocate(req); }, bgtq::errc::invalid_argument, {"no scores"});
  require_error([&] { bgtq::dp_allocator::allocate(req); }, bgtq::errc::invalid_argument, {"no scores"});
  // pooled: the error names the pool
  std::vector<double> ok = {1, 2}, bad = {1, nan};
  std::vector<std::span<const double>> pools = {ok, bad};
  require_error([&] { bgtq::allocate_pooled(pools, 8, 1, 8, bgtq::distortion_table::rate4()); }, bgtq::errc::non_finite,
                {"pool 1 score 1"});
  std::vector<std::span<const double>> with_empty = {ok, std::span<const double>{}};
  require_error([&] { bgtq::allocate_pooled(with_empty, 8, 1, 8, bgtq::distortion_table::rate4()); },
                bgtq::errc::invalid_argument, {"pool 1 has no scores"});
  require_error([&] { bgtq::allocate_pooled({}, 8, 1, 8, bgtq::distortion_table::rate4()); },
                bgtq::errc::invalid_argument, {"no pools"});
  std::vector<std::span<const double>> two = {ok, ok};
  require_error([&] { bgtq::allocate_pooled(two, 3, 1, 8, bgtq::distortion_table::rate4()); }, bgtq::errc::infeasible,
                {"B = 3", "L = 4"});
}

TEST_CASE("bad width ranges and bad tables are rejected", "[allocate][errors]") {
  require_error([] { greedy({1}, 1, -1, 8); }, bgtq::errc::invalid_argument, {"b_min = -1"});
  require_error([] { greedy({1}, 1, 0, 9); }, bgtq::errc::invalid_argument, {"b_max = 9"});
  require_error([] { greedy({1}, 1, 5, 4); }, bgtq::errc::invalid_argument, {"b_min = 5", "b_max = 4"});
  using T = bgtq::distortion_table;
  require_error([] { T{{1, 0.5, 0.6, 0.1, 0, 0, 0, 0, 0}}.validate(); }, bgtq::errc::invalid_argument,
                {"not decreasing at b = 1"});
  require_error([] { T{}.validate(); }, bgtq::errc::invalid_argument, {"D(0) = 0"});
  require_error([] { T{{1, 0.5, -0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -0.7}}.validate(); },
                bgtq::errc::invalid_argument, {"D(2)"});
  require_error([] { T{{1, 0.5, std::nan(""), 0, 0, 0, 0, 0, 0}}.validate(); }, bgtq::errc::invalid_argument,
                {"D(2) = nan"});
  require_error([] { T{{1, 0.5, 0.25, 0.2, 0.1, 0.05, 0.02, 0.01, 0}}.validate(); }, bgtq::errc::invalid_argument,
                {"not convex at b = 3"});  // gains 0.5 .25 .05 .1: the rise is at b = 3
  require_error([] { T::checked({1, 0.9, 0.1, 0, 0, 0, 0, 0, 0}); }, bgtq::errc::invalid_argument, {"not convex"});
  require_error([] { (void)T::rate4()(9); }, bgtq::errc::invalid_argument, {"9"});
  // valid laws: rate4, a law that saturates at zero, the large-n codebook MSE figures
  T::rate4().validate();
  REQUIRE(T::rate4()(3) == 1.0 / 64);
  T{{1, 0.5, 0.25, 0.125, 0, 0, 0, 0, 0}}.validate();
  T::checked({1.0, 0.3634, 0.1175, 0.03455, 0.009497, 0.0025, 0.00064, 0.00016, 0.00004});
  // a table that breaks convexity only by rounding (within 1e-12 D(0)) is accepted
  T{{1, 0.5, 0.25 + 1e-14, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625}}.validate();
}

TEST_CASE("a single block takes the whole budget", "[allocate]") {
  REQUIRE(greedy({3.5}, 5).bits == bits_t{5});
  REQUIRE(greedy({0.0}, 0, 0, 8).bits == bits_t{0});
  std::vector<double> s = {2.0};
  bgtq::allocation_request req{.scores = s, .budget = 6, .b_min = 2, .b_max = 7};
  REQUIRE(bgtq::dp_allocator::allocate(req).bits == bits_t{6});
  REQUIRE(bgtq::uniform_allocator::allocate(req).bits == bits_t{6});
  REQUIRE(bgtq::greedy_allocator::allocate(req).objective == 2.0 / 4096);
}

TEST_CASE("uniform allocator: floor(B/L) everywhere, remainder to the lowest indices", "[allocate][uniform]") {
  std::vector<double> s = {9, 1, 5, 0, 2};
  bgtq::allocation_request req{.scores = s, .budget = 15};
  REQUIRE(bgtq::uniform_allocator::allocate(req).bits == bits_t{3, 3, 3, 3, 3});
  req.budget = 12;
  const auto u = bgtq::uniform_allocator::allocate(req);
  REQUIRE(u.bits == bits_t{3, 3, 2, 2, 2});
  REQUIRE(u.objective == Approx(9.0 / 64 + 1.0 / 64 + 5.0 / 16 + 0 + 2.0 / 16).epsilon(1e-15));
  req.b_min = 0;
  req.budget = 3;
  REQUIRE(bgtq::uniform_allocator::allocate(req).bits == bits_t{1, 1, 1, 0, 0});
  // uniform equals greedy when all scores are equal and B is a multiple of L
  std::vector<double> eq(64, 0.7);
  bgtq::allocation_request r2{.scores = eq, .budget = bgtq::budget_for(3.0, 64)};
  REQUIRE(bgtq::uniform_allocator::allocate(r2).bits == bgtq::greedy_allocator::allocate(r2).bits);
}

TEST_CASE("the allocators model bit_allocator", "[allocate]") {
  STATIC_REQUIRE(bgtq::bit_allocator<bgtq::uniform_allocator>);
  STATIC_REQUIRE(bgtq::bit_allocator<bgtq::greedy_allocator>);
  STATIC_REQUIRE(bgtq::bit_allocator<bgtq::dp_allocator>);
  STATIC_REQUIRE_FALSE(bgtq::bit_allocator<int>);
  REQUIRE(std::string(bgtq::greedy_allocator::name) == "greedy");
  REQUIRE(std::string(bgtq::dp_allocator::name) == "dp");
  REQUIRE(std::string(bgtq::uniform_allocator::name) == "uniform");
}

TEST_CASE("objective helper checks its inputs", "[allocate][errors]") {
  std::vector<double> s = {1, 2};
  std::vector<int> b3 = {1, 2, 3}, bad = {1, 9};
  require_error([&] { bgtq::allocation_objective(s, b3, bgtq::distortion_table::rate4()); }, bgtq::errc::shape_mismatch,
                {"2 scores", "3 widths"});
  require_error([&] { bgtq::allocation_objective(s, bad, bgtq::distortion_table::rate4()); },
                bgtq::errc::invalid_argument, {"9"});
}

TEST_CASE("greedy at L = 4096, B = 3L is fast (sanity, not a timing assertion)", "[allocate][perf]") {
  bgtq::counter_rng rng(1);
  std::vector<double> s(4096);
  for (double& x : s) x = alloc_test::log_uniform_score(rng);
  const auto t0 = std::chrono::steady_clock::now();
  const auto a = greedy(s, bgtq::budget_for(3.0, 4096));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  WARN("greedy L = 4096, B = 12288: " << ms << " ms");
  REQUIRE(a.total_bits == 12288);
  REQUIRE(alloc_test::valid_bits(a.bits, 1, 8, 12288));
  // optimality certificate for a convex law: every gain taken >= every gain left over
  const auto d = bgtq::distortion_table::rate4();
  double min_taken = std::numeric_limits<double>::infinity(), max_left = 0.0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (a.bits[i] > 1) min_taken = std::min(min_taken, s[i] * d.gain(a.bits[i] - 1));
    if (a.bits[i] < 8) max_left = std::max(max_left, s[i] * d.gain(a.bits[i]));
  }
  REQUIRE(min_taken >= max_left);
}
