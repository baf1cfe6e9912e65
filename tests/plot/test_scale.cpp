// Scales and ticks: log axes put their majors on exact powers of ten (or 1-2-5 values on
// short axes), linear ticks are nice and exact, labels read as expected.
#include <bgtq/plot/chart.hpp>
#include <bgtq/plot/scale.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common.hpp"

using namespace bgtq::plot;

static bool near(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(std::abs(a), std::abs(b)); }

static void check_values(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("tick " << i << ": " << got[i] << " vs " << want[i]);
    CHECK(near(got[i], want[i]));
  }
}

TEST_CASE("log_domain widens to whole decades", "[plot][scale]") {
  auto d = log_domain(3e-4, 250);
  CHECK(near(d.first, 1e-4));
  CHECK(near(d.second, 1e3));
  d = log_domain(1e-3, 1e2);  // exact decades stay
  CHECK(near(d.first, 1e-3));
  CHECK(near(d.second, 1e2));
  d = log_domain(5, 5);  // at least one decade
  CHECK(near(d.first, 1));
  CHECK(near(d.second, 10));
  CHECK_THROWS_AS(log_domain(0, 1), bgtq::error);
  CHECK_THROWS_AS(log_domain(-1, 1), bgtq::error);
  CHECK_THROWS_AS(log_domain(2, 1), bgtq::error);
  CHECK_THROWS_AS(log_domain(1, INFINITY), bgtq::error);
}

TEST_CASE("log_domain_125 widens to the nearest 1-2-5 values", "[plot][scale]") {
  auto d = log_domain_125(1.6, 12);
  CHECK(near(d.first, 1));
  CHECK(near(d.second, 20));
  d = log_domain_125(0.03, 0.45);
  CHECK(near(d.first, 0.02));
  CHECK(near(d.second, 0.5));
  d = log_domain_125(5.5e-4, 7);
  CHECK(near(d.first, 5e-4));
  CHECK(near(d.second, 10));
  d = log_domain_125(2, 2);  // degenerate: next 1-2-5 value up
  CHECK(near(d.first, 2));
  CHECK(near(d.second, 5));
  d = log_domain_125(5, 5);
  CHECK(near(d.second, 10));
}

TEST_CASE("log domains stay finite and positive at the ends of the double range", "[plot][scale]") {
  // 1.7e308 rounds up past the largest double: the domain ends at the data instead of Inf
  auto d = log_domain_125(1e-300, 1.7e308);
  CHECK(near(d.first, 1e-300));
  CHECK(d.second == 1.7e308);
  // the padded form (the figures' margins): 1.7e308 * 1.1 and 1e-300 / 1.15 would be Inf and
  // fine, 5e-324 / 1.15 would be 0
  d = log_domain_padded(1e-300, 1.7e308, 1.15, 1.1);
  CHECK(std::isfinite(d.second));
  CHECK(d.second >= 1.7e308);
  CHECK(d.first > 0);
  CHECK(d.first <= 1e-300 / 1.15);
  d = log_domain_padded(5e-324, 1.0, 1.15, 1.1);
  CHECK(d.first > 0);
  CHECK(d.first <= 5e-324);
  CHECK(near(d.second, 2));
  const auto t = log_ticks(d.first, 1e308);
  CHECK(t.major.size() <= 9u);  // thinned to at most max_major + 1 labels over 600+ decades
  CHECK(!t.major.empty());
}

TEST_CASE("log ticks: majors are the powers of ten inside, minors 2..9 between", "[plot][scale]") {
  const auto t = log_ticks(1e-4, 1e2);
  check_values(t.major, {1e-4, 1e-3, 1e-2, 1e-1, 1, 10, 100});
  REQUIRE(t.minor.size() == 6u * 8u);
  CHECK(near(t.minor.front(), 2e-4));
  CHECK(near(t.minor.back(), 90));
  // a domain that does not start on a decade: only the values inside
  const auto u = log_ticks(3e-3, 4e1);
  check_values(u.major, {1e-2, 1e-1, 1, 10});
  CHECK(near(u.minor.front(), 3e-3));
  CHECK(near(u.minor.back(), 40));
}

TEST_CASE("log ticks thin out over many decades", "[plot][scale]") {
  const auto t = log_ticks(1e-12, 1e12, 8);  // 25 decades, at most 8 labels
  REQUIRE(t.major.size() <= 8u);
  REQUIRE(t.major.size() >= 5u);
  for (std::size_t i = 1; i < t.major.size(); ++i) CHECK(near(t.major[i] / t.major[i - 1], t.major[1] / t.major[0]));
  CHECK(near(t.major.front(), 1e-12));
  CHECK(t.minor.empty());
}

TEST_CASE("log ticks on a short axis use 1-2-5 majors", "[plot][scale]") {
  const auto t = log_ticks(1, 20);
  check_values(t.major, {1, 2, 5, 10, 20});
  check_values(t.minor, {3, 4, 6, 7, 8, 9});
  const auto u = log_ticks(0.02, 0.5);
  check_values(u.major, {0.02, 0.05, 0.1, 0.2, 0.5});
}

TEST_CASE("log_scale maps decades to equal pixel steps", "[plot][scale]") {
  const log_scale s{1e-3, 1e2, 300, 0};  // y axis: 300 px at the bottom
  CHECK(s(1e-3) == Approx(300));
  CHECK(s(1e2) == Approx(0));
  CHECK(s(1e-1) == Approx(180));  // two of five decades up
  CHECK(s(1) - s(10) == Approx(s(10) - s(100)));
  CHECK(s(0) == Approx(300));   // zero: at the floor
  CHECK(s(-5) == Approx(300));
  const auto ticks = make_ticks(s);
  int labelled = 0;
  for (const auto& t : ticks) {
    CHECK(t.px >= -1e-9);
    CHECK(t.px <= 300 + 1e-9);
    labelled += t.minor ? 0 : 1;
  }
  CHECK(labelled == 6);
}

TEST_CASE("linear ticks are nice multiples and exact", "[plot][scale]") {
  CHECK(nice_step(10, 5) == Approx(2));
  CHECK(nice_step(1, 5) == Approx(0.2));
  CHECK(nice_step(0.7, 5) == Approx(0.1));
  CHECK(nice_step(100, 5) == Approx(20));
  CHECK(nice_step(0, 5) == Approx(1));
  check_values(linear_ticks(0, 1, 5), {0, 0.2, 0.4, 0.6, 0.8, 1.0});
  check_values(linear_ticks(0.75, 1.0, 5), {0.75, 0.8, 0.85, 0.9, 0.95, 1.0});
  check_values(linear_ticks(-1, 1, 4), {-1, -0.5, 0, 0.5, 1});
  // spans no step can tile (found by the eval_json fuzz target): no ticks, defined behaviour
  CHECK(linear_ticks(1.0, 1.0 + 1e-300, 5).empty());
  CHECK(linear_ticks(-1e300, 1e300, 5).size() <= 1000u);
  CHECK(linear_ticks(1e20, 1e20 + 65536.0, 5).empty());  // step 1e4, tick index 1e16: beyond an exact grid
  CHECK(linear_ticks(-std::numeric_limits<double>::infinity(), 0.0, 5).empty());
  CHECK(nice_step(4e-320, 5) > 0.0);
  CHECK(linear_ticks(1, 1).empty());
  auto d = nice_domain(0.13, 0.67, 5);
  CHECK(d.first == Approx(0.1));
  CHECK(d.second == Approx(0.7));
  d = nice_domain(3, 3, 5);
  CHECK(d.first < 3);
  CHECK(d.second > 3);
  // near the end of double's range the rounded-out bound overflowed to inf (step 5e307:
  // 4 x 5e307), which left no ticks and every point on the axis; the bound itself then
  for (const double hi : {1.5e308, 1.7e308, std::numeric_limits<double>::max()}) {
    INFO(hi);
    d = nice_domain(0, hi, 5);
    CHECK(std::isfinite(d.second));
    CHECK(d.second >= hi);
    CHECK(linear_ticks(d.first, d.second, 5).size() >= 3u);
    d = nice_domain(-hi, 0, 5);
    CHECK(std::isfinite(d.first));
    CHECK(d.first <= -hi);
  }
}

TEST_CASE("tick labels", "[plot][scale]") {
  CHECK(linear_tick_label(0.6000000000000001, 0.2) == "0.6");
  CHECK(linear_tick_label(40, 20) == "40");
  CHECK(linear_tick_label(-0.0, 0.5) == "0");
  CHECK(linear_tick_label(0.85, 0.05) == "0.85");
  CHECK(linear_tick_label(0.000005, 0.000001) == "0.000005");
  // steps below 1e-6 in scientific notation: fixed notation (at most 12 decimals) wrote
  // every tick of a 1e-13 step as "0"
  CHECK(linear_tick_label(1e-13, 5e-14) == "1.0e-13");
  CHECK(linear_tick_label(1.5e-13, 5e-14) == "1.5e-13");
  CHECK(linear_tick_label(2e-13, 1e-13) == "2e-13");
  CHECK(linear_tick_label(-3e-7, 1e-7) == "-3e-7");
  CHECK(linear_tick_label(7.5e-9, 2.5e-9) == "7.5e-9");
  CHECK(linear_tick_label(5e-9, 2.5e-9) == "5.0e-9");
  CHECK(linear_tick_label(0.0, 5e-14) == "0");
  {
    std::vector<std::string> seen;
    for (double v : linear_ticks(1e-13, 3e-13, 5)) seen.push_back(linear_tick_label(v, nice_step(2e-13, 5)));
    REQUIRE(seen.size() >= 3u);
    for (std::size_t i = 1; i < seen.size(); ++i) CHECK(seen[i] != seen[i - 1]);
  }
  auto l = log_tick_label(1e-3);
  CHECK(l.mantissa == "10");
  CHECK(l.exponent == "-3");
  l = log_tick_label(2e-5);
  CHECK(l.mantissa == "2\xC3\x97" "10");
  CHECK(l.exponent == "-5");
  l = log_tick_label(0.05);
  CHECK(l.mantissa == "0.05");
  CHECK(l.exponent.empty());
  CHECK(log_tick_label(1).mantissa == "1");
  CHECK(log_tick_label(200).mantissa == "200");
  l = log_tick_label(1e4);
  CHECK(l.mantissa == "10");
  CHECK(l.exponent == "4");
  l = log_tick_label(9.9999999999e5);  // rounds up to the next decade
  CHECK(l.mantissa == "10");
  CHECK(l.exponent == "6");
}
