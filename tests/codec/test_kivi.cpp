// KIVI's flat round trip (bgtq eval's baseline and the cache's page codecs' math) against
// its error bound, element by element, at every width 1..8, asymmetric and symmetric,
// with a partial final key group: a decoded element is within half a quantization step
// of the original, plus what the fp16 rounding of the step and the zero point can move
// the grid (2^-11 relative each, times the largest level).
#include <catch2/catch.hpp>

#include <bgtq/codec/kivi.hpp>
#include <bgtq/core/rng.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

// The quantization step of a group spanning [lo, hi] at `bits`, and the largest error
// KIVI may make on one of its elements.
struct kivi_limit {
  double step, bound;
};
kivi_limit kivi_bound(float lo, float hi, int bits, bool symmetric) {
  const double levels = (1 << bits) - 1;
  const double span = symmetric ? 2.0 * std::max(std::fabs(lo), std::fabs(hi)) : static_cast<double>(hi) - lo;
  const double step = span / levels;
  const double u = std::ldexp(1.0, -11);  // fp16 unit roundoff
  // half a step (of the rounded step), the grid's ends moved by the rounding of the zero
  // point (|lo| u) and of the step (levels times step u), and fp32 slack
  return {step, 0.5 * step * (1 + u) + u * (std::fabs(lo) + std::fabs(hi)) + levels * step * u + 1e-6 * (std::fabs(lo) + std::fabs(hi))};
}

}  // namespace

TEST_CASE("KIVI round trips stay within half a step (plus fp16 parameter rounding) at every width", "[codec][kivi]") {
  const int T = 100, D = 7;  // 100 = 3 full 32-token key groups and a partial one of 4
  bgtq::counter_rng r(12);
  std::vector<float> x(static_cast<std::size_t>(T) * D), y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)  // per-channel offsets and scales, as keys have
    x[i] = static_cast<float>(0.5 * static_cast<double>(i % D) - 1.0 + (1.0 + static_cast<double>(i % D)) * r.normal());
  for (int bits = 1; bits <= 8; ++bits)
    for (const bool symmetric : {false, true}) {
      INFO("bits=" << bits << (symmetric ? " symmetric" : " asymmetric"));
      bgtq::kivi_options o;
      o.bits = bits;
      o.symmetric = symmetric;
      double worst_step_fraction = 0;  // the largest error in steps: near 0.5 when the bound is tight
      // keys: per channel over groups of 32 tokens
      bgtq::kivi_keys_roundtrip(x.data(), T, D, o, y.data());
      for (int t0 = 0; t0 < T; t0 += 32)
        for (int j = 0; j < D; ++j) {
          float lo = INFINITY, hi = -INFINITY;
          for (int t = t0; t < std::min(T, t0 + 32); ++t) {
            lo = std::min(lo, x[static_cast<std::size_t>(t) * D + j]);
            hi = std::max(hi, x[static_cast<std::size_t>(t) * D + j]);
          }
          const auto [step, bound] = kivi_bound(lo, hi, bits, symmetric);
          for (int t = t0; t < std::min(T, t0 + 32); ++t) {
            const std::size_t i = static_cast<std::size_t>(t) * D + j;
            const double e = std::fabs(static_cast<double>(y[i]) - x[i]);
            INFO("key t=" << t << " j=" << j << " x=" << x[i] << " y=" << y[i] << " bound=" << bound);
            REQUIRE(e <= bound);
            worst_step_fraction = std::max(worst_step_fraction, e / step);
          }
        }
      CHECK(worst_step_fraction > 0.4);  // the codes are not finer than the width allows
      // values: per token over its D coordinates
      worst_step_fraction = 0;
      bgtq::kivi_values_roundtrip(x.data(), T, D, o, y.data());
      for (int t = 0; t < T; ++t) {
        const float* row = x.data() + static_cast<std::size_t>(t) * D;
        const float lo = *std::min_element(row, row + D), hi = *std::max_element(row, row + D);
        const auto [step, bound] = kivi_bound(lo, hi, bits, symmetric);
        for (int j = 0; j < D; ++j) {
          const double e = std::fabs(static_cast<double>(y[static_cast<std::size_t>(t) * D + j]) - row[j]);
          INFO("value t=" << t << " j=" << j << " bound=" << bound);
          REQUIRE(e <= bound);
          worst_step_fraction = std::max(worst_step_fraction, e / step);
        }
      }
      CHECK(worst_step_fraction > 0.4);
    }
}

TEST_CASE("KIVI keeps a constant group exact and the group's extremes on its grid", "[codec][kivi]") {
  // a constant channel: scale 0, every element decodes to the fp16 zero point
  std::vector<float> x(40, 0.3f), y(40);
  bgtq::kivi_options o;
  o.bits = 3;
  bgtq::kivi_keys_roundtrip(x.data(), 40, 1, o, y.data());
  for (float v : y) REQUIRE(v == bgtq::stored_half(0.3f));
  // asymmetric: the minimum decodes to the zero point (code 0), the maximum to code 2^b - 1
  const float row[4] = {-1.0f, 0.25f, 0.5f, 2.0f};
  float out[4];
  for (int bits = 1; bits <= 8; ++bits) {
    o.bits = bits;
    bgtq::kivi_values_roundtrip(row, 1, 4, o, out);
    INFO("bits=" << bits);
    CHECK(out[0] == -1.0f);
    CHECK(std::fabs(out[3] - 2.0f) <= 2.0f * ((1 << bits) - 1) * std::ldexp(3.0f / ((1 << bits) - 1), -11) + 1e-6f);
  }
  // symmetric (scale-only): the grid is centred on 0 whatever the row's range, scale =
  // fp16(2 max|x| / (2^b - 1)) and zero = -(2^b - 1) / 2 * scale, so every decoded element
  // is zero + c * scale for an integer code c. The round-trip bound above is looser for
  // symmetric than for asymmetric, so a symmetric option that fell back to the
  // asymmetric grid passed it; this row's range [-1, 2] is not centred and shows it
  o.symmetric = true;
  for (int bits = 1; bits <= 8; ++bits) {
    o.bits = bits;
    bgtq::kivi_values_roundtrip(row, 1, 4, o, out);
    const int levels = (1 << bits) - 1;
    const float scale = bgtq::stored_half(2.0f * 2.0f / static_cast<float>(levels));
    const float zero = -0.5f * static_cast<float>(levels) * scale;
    for (int j = 0; j < 4; ++j) {
      INFO("symmetric bits=" << bits << " j=" << j << " out=" << out[j]);
      bool on_grid = false;
      for (int c = 0; c <= levels; ++c) on_grid = on_grid || out[j] == zero + scale * static_cast<float>(c);
      CHECK(on_grid);
    }
    CHECK(out[3] == zero + scale * static_cast<float>(levels));  // the largest |x| is the top level
  }
  o.bits = 1;  // one bit: two levels, -2 and 2
  bgtq::kivi_values_roundtrip(row, 1, 4, o, out);
  CHECK(out[0] == -2.0f);
  CHECK(out[1] == 2.0f);
  CHECK(out[3] == 2.0f);
}
