#pragma once
//! @file plot/scale.hpp
//! Axis scales and ticks: a linear scale with "nice" 1-2-5 ticks and a base-10 log scale
//! whose major ticks are exact powers of ten (1-2-5 multiples when the domain spans less
//! than a decade) with 2..9 minor ticks. Tick values are computed from integers
//! (k * step, 10^k) so that 0.3 prints as 0.3, not 0.30000000000000004.

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <string>
#include <vector>

#include "../core/error.hpp"

namespace bgtq::plot {

//! Maps a data interval [lo, hi] linearly onto pixels [px0, px1] (px1 < px0 is fine:
//! a y axis grows upwards).
struct linear_scale {
  double lo = 0, hi = 1;    //!< data domain (lo != hi)
  double px0 = 0, px1 = 1;  //!< pixel range
  //! Pixel position of v (values outside the domain map outside the range).
  double operator()(double v) const noexcept { return px0 + (v - lo) / (hi - lo) * (px1 - px0); }
};

//! Maps a data interval [lo, hi] (0 < lo < hi) onto pixels by log10.
struct log_scale {
  double lo = 1, hi = 10;   //!< data domain, positive
  double px0 = 0, px1 = 1;  //!< pixel range
  //! Pixel position of v > 0; v <= 0 maps to px0 (the floor of the axis).
  double operator()(double v) const noexcept {
    if (!(v > 0)) return px0;
    return px0 + (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) * (px1 - px0);
  }
};

//! The 1-2-5 step (times a power of ten) that gives about `target` intervals over `span`.
inline double nice_step(double span, int target = 5) {
  if (!(span > 0) || !std::isfinite(span)) return 1.0;
  const double raw = span / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double m = f <= 1.5 ? 1.0 : f <= 3.0 ? 2.0 : f <= 7.0 ? 5.0 : 10.0;
  const double st = m * mag;
  return st > 0 && std::isfinite(st) ? st : span;  // (a subnormal span: 10^floor(log10) underflows to 0)
}

//! Linear domain rounded outwards to multiples of nice_step; a degenerate interval
//! (lo == hi) is widened around its value.
inline std::pair<double, double> nice_domain(double lo, double hi, int target = 5) {
  if (!(hi > lo)) {
    const double d = lo == 0 ? 1.0 : std::abs(lo) * 0.5;
    lo -= d;
    hi += d;
  }
  const double st = nice_step(hi - lo, target);
  // near double's range a bound rounded out to the step's multiple overflows (hi = 1.7e308,
  // step 5e307: 4 x 5e307 = inf, and every point fell on the axis): the bound itself then
  const double a = std::floor(lo / st + 1e-9) * st, b = std::ceil(hi / st - 1e-9) * st;
  return {std::isfinite(a) ? a : lo, std::isfinite(b) ? b : hi};
}

//! Ticks at multiples of nice_step(hi - lo, target) inside [lo, hi] (inclusive, with a
//! relative tolerance of 1e-9 of the step).
inline std::vector<double> linear_ticks(double lo, double hi, int target = 5) {
  std::vector<double> t;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return t;
  const double st = nice_step(hi - lo, target);
  const double a = std::ceil(lo / st - 1e-9), b = std::floor(hi / st + 1e-9);
  // no integer grid of ticks (an axis far from 0 relative to its span, or an overflow):
  // none, rather than an out-of-range conversion
  if (!(std::abs(a) <= 1e15 && std::abs(b) <= 1e15)) return t;
  const long long k0 = static_cast<long long>(a), k1 = static_cast<long long>(b);
  for (long long k = k0; k <= k1 && t.size() < 1000; ++k) {
    const double v = static_cast<double>(k) * st;
    t.push_back(std::abs(v) < st * 1e-9 ? 0.0 : v);
  }
  return t;
}

//! Log domain widened to whole decades: [10^floor(log10 lo), 10^ceil(log10 hi)], at
//! least one decade wide.
//! @throws bgtq::error(invalid_argument) unless 0 < lo <= hi are finite
inline std::pair<double, double> log_domain(double lo, double hi) {
  BGTQ_REQUIRE(std::isfinite(lo) && std::isfinite(hi) && lo > 0 && hi >= lo, errc::invalid_argument,
               "log_domain: needs 0 < lo <= hi, got [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  int e0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  int e1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  if (e1 <= e0) e1 = e0 + 1;
  return {std::pow(10.0, e0), std::pow(10.0, e1)};
}

//! Log domain widened to the nearest 1, 2 or 5 times a power of ten on each side
//! (tighter than whole decades): [1.6, 12] becomes [1, 20].
//! @throws bgtq::error(invalid_argument) unless 0 < lo <= hi are finite
inline std::pair<double, double> log_domain_125(double lo, double hi) {
  BGTQ_REQUIRE(std::isfinite(lo) && std::isfinite(hi) && lo > 0 && hi >= lo, errc::invalid_argument,
               "log_domain_125: needs 0 < lo <= hi, got [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  const double tol = 1e-9;
  const int e0 = static_cast<int>(std::floor(std::log10(lo)));
  double a = std::pow(10.0, e0);
  for (int m : {2, 5, 10})
    if (m * std::pow(10.0, e0) <= lo * (1 + tol)) a = m * std::pow(10.0, e0);
  const int e1 = static_cast<int>(std::floor(std::log10(hi)));
  double b = 10 * std::pow(10.0, e1);
  for (int m : {5, 2, 1})
    if (m * std::pow(10.0, e1) >= hi * (1 - tol)) b = m * std::pow(10.0, e1);
  if (!(b > a)) {  // lo == hi on a 1-2-5 value: the next 1-2-5 value up
    const double p = std::pow(10.0, std::floor(std::log10(a) + tol));
    const long m = std::lround(a / p);
    b = (m == 1 ? 2.0 : m == 2 ? 5.0 : 10.0) * p;
  }
  if (!std::isfinite(b)) b = std::max(hi, 1e308);  // the next 1-2-5 value above ~1.8e308 overflows
  if (!(a > 0)) a = std::min(lo, std::numeric_limits<double>::min());
  return {a, b};
}

//! log_domain_125 of [lo / down, hi * up] (a margin around the data, down, up >= 1),
//! the margins saturating at the smallest normal and the largest finite double instead
//! of reaching 0 or Inf for extreme data.
inline std::pair<double, double> log_domain_padded(double lo, double hi, double down, double up) {
  constexpr double tiny = std::numeric_limits<double>::min(), huge = std::numeric_limits<double>::max();
  const double l = lo / down, h = hi * up;
  return log_domain_125(std::min(lo, l < tiny ? tiny : l), std::max(hi, h > huge ? huge : h));
}

//! Ticks of a log axis.
struct log_tick_set {
  std::vector<double> major;  //!< labelled ticks, ascending
  std::vector<double> minor;  //!< unlabelled ticks (2..9 times a power of ten), ascending
};

//! Ticks inside [lo, hi] (0 < lo < hi): majors at 10^k, every `step` decades so that at
//! most `max_major` are labelled, and minor ticks at m*10^k (m = 2..9) when the majors
//! are consecutive decades and the domain spans at most 12 decades. When fewer than
//! three powers of ten fall inside (a short axis), majors at 1, 2 and 5 times powers of
//! ten and minors at the other multiples 3, 4, 6, 7, 8, 9.
inline log_tick_set log_ticks(double lo, double hi, int max_major = 8) {
  log_tick_set t;
  if (!(lo > 0) || !(hi > lo) || !std::isfinite(hi)) return t;
  const double tol = 1e-9;
  const int e0 = static_cast<int>(std::floor(std::log10(lo)));
  const int e1 = static_cast<int>(std::ceil(std::log10(hi)));
  auto inside = [&](double v) { return v >= lo * (1 - tol) && v <= hi * (1 + tol); };
  std::vector<int> decades;
  for (int e = e0; e <= e1; ++e)
    if (inside(std::pow(10.0, e))) decades.push_back(e);
  if (decades.size() >= 3) {
    const int n = static_cast<int>(decades.size());
    const int step = std::max(1, (n + std::max(1, max_major) - 1) / std::max(1, max_major));
    for (int i = 0; i < n; ++i)
      if ((decades[static_cast<std::size_t>(i)] - decades.front()) % step == 0)
        t.major.push_back(std::pow(10.0, decades[static_cast<std::size_t>(i)]));
    if (step == 1 && e1 - e0 <= 12)
      for (int e = e0; e <= e1; ++e)
        for (int m = 2; m <= 9; ++m) {
          const double v = m * std::pow(10.0, e);
          if (inside(v)) t.minor.push_back(v);
        }
    return t;
  }
  for (int e = e0; e <= e1; ++e)
    for (int m = 1; m <= 9; ++m) {
      const double v = m * std::pow(10.0, e);
      if (!inside(v)) continue;
      (m == 1 || m == 2 || m == 5 ? t.major : t.minor).push_back(v);
    }
  return t;
}

//! Label of a linear tick: as many decimals as the step needs ("0.25", "40", "-1.5");
//! for steps below 1e-6 in scientific notation with as many digits as the step needs
//! ("1.5e-13": fixed notation with at most 12 decimals wrote every such tick as "0").
inline std::string linear_tick_label(double v, double step) {
  if (step > 0 && step < 1e-6 && v != 0.0) {
    const int sig = static_cast<int>(std::floor(std::log10(std::abs(v)))) - static_cast<int>(std::floor(std::log10(step)));
    const int extra = std::abs(step / std::pow(10.0, std::floor(std::log10(step))) - 2.5) < 1e-9 ? 1 : 0;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*e", std::clamp(sig + extra, 0, 15), v);
    std::string s(buf);  // "1.50e-13": strip the exponent's leading zeros and '+'
    const std::size_t e = s.find('e');
    std::string mant = s.substr(0, e), ex = s.substr(e + 1);
    const bool neg = ex[0] == '-';
    ex = ex.substr(1);
    ex.erase(0, std::min(ex.find_first_not_of('0'), ex.size() - 1));
    return mant + "e" + (neg ? "-" : "") + ex;
  }
  int dec = 0;
  if (step > 0 && step < 1) dec = static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  if (step > 0 && std::abs(step / std::pow(10.0, std::floor(std::log10(step))) - 2.5) < 1e-9) ++dec;  // 0.25 steps
  dec = std::clamp(dec, 0, 12);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", dec, v);
  const std::string s(buf);
  return s.find_first_not_of("-0.") == std::string::npos ? std::string(1, '0') : s;  // no "-0"
}

//! A log tick's label split for typesetting: `mantissa` and, when the value is written
//! as a power of ten, `exponent` (mantissa "10", exponent "-3" for 0.001; mantissa
//! "2×10", exponent "-3" for 0.002). Values in [0.01, 1000) are written plainly
//! ("0.05", "1", "200") with an empty exponent.
struct log_label {
  std::string mantissa;
  std::string exponent;
};
inline log_label log_tick_label(double v) {
  if (!(v > 0) || !std::isfinite(v)) return {"0", ""};
  int e = static_cast<int>(std::floor(std::log10(v) + 1e-9));
  int mi = static_cast<int>(std::lround(v / std::pow(10.0, e)));
  if (mi >= 10) {  // 9.9999.. rounded up
    mi = 1;
    ++e;
  }
  char buf[64];
  if (e >= -2 && e <= 2) {
    std::snprintf(buf, sizeof buf, "%.*f", e < 0 ? -e : 0, mi * std::pow(10.0, e));
    return {buf, ""};
  }
  if (mi == 1) return {"10", std::to_string(e)};
  std::snprintf(buf, sizeof buf, "%d\xC3\x97" "10", mi);  // U+00D7 multiplication sign
  return {buf, std::to_string(e)};
}

}  // namespace bgtq::plot
