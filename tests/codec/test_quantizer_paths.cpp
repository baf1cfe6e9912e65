// The quantizer's SIMD loops (AVX-512: 16 coordinates, AVX2: 8, then a scalar tail)
// against the scalar definitions, exactly: cell indices against detail::quantize_sorted
// (the same comparisons, so tolerance 0), decoded coordinates against centroid x radius,
// and the canonical sum of squares against its scalar order. Every width 1..8 and
// lengths around every vector width, on random values and on every threshold, its two
// float neighbours, +-0, +-Inf and NaN. Built in the default, AVX2 and scalar variants.
#include <catch2/catch.hpp>

#include <bgtq/codec/tq_quantizer.hpp>
#include <bgtq/core/rng.hpp>
#include <bgtq/core/simd.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace {

std::vector<int> awkward_lengths() {
  std::vector<int> n;
  for (int i = 2; i <= 40; ++i) n.push_back(i);
  for (int i : {63, 66, 100, 126, 130, 255, 1024}) n.push_back(i);
  return n;
}

bgtq::tq_quantizer identity_quantizer(int n, int bits) {
  bgtq::tq_params p;
  p.dim = n;
  p.bits = bits;
  p.rotation = bgtq::rotation_kind::identity;
  return bgtq::tq_quantizer(p);
}

}  // namespace

TEST_CASE("quantize_rotated equals quantize_sorted on every coordinate, width and tail", "[codec][simd]") {
  const float inf = std::numeric_limits<float>::infinity();
  for (int bits = 1; bits <= 8; ++bits) {
    // the values that decide cells: each threshold and its float neighbours, plus specials
    const auto probe = identity_quantizer(2, bits);
    std::vector<float> special = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e-30f, -1e-30f};
    for (int i = 0; i + 1 < (1 << bits); ++i) {
      const float t = probe.thresholds()[i];
      special.insert(special.end(), {t, std::nextafter(t, inf), std::nextafter(t, -inf)});
    }
    bgtq::counter_rng r(static_cast<std::uint64_t>(bits));
    std::int64_t checked = 0;
    for (int n : awkward_lengths()) {
      const auto q = identity_quantizer(n, bits);
      for (int rep = 0; rep < 3; ++rep) {
        std::vector<float> y(static_cast<std::size_t>(n));
        for (int j = 0; j < n; ++j) {
          // a third of the coordinates special (at every lane position across reps)
          const bool pick = (j + rep) % 3 == 0;
          y[static_cast<std::size_t>(j)] =
              pick ? special[r.below(static_cast<std::uint32_t>(special.size()))] : static_cast<float>(r.normal() / std::sqrt(n));
        }
        std::vector<std::uint8_t> codes(static_cast<std::size_t>(n), 0xEE);
        q.quantize_rotated(y.data(), codes.data());
        for (int j = 0; j < n; ++j) {
          const int want = bgtq::detail::quantize_sorted(y[static_cast<std::size_t>(j)], q.thresholds(), bits);
          INFO("bits=" << bits << " n=" << n << " j=" << j << " y=" << y[static_cast<std::size_t>(j)]);
          REQUIRE(codes[static_cast<std::size_t>(j)] == want);
          ++checked;
        }
      }
    }
    CHECK(checked > 3000);
  }
}

TEST_CASE("dequantize equals centroid x radius on every coordinate, width and tail", "[codec][simd]") {
  for (int bits = 1; bits <= 8; ++bits) {
    bgtq::counter_rng r(100 + static_cast<std::uint64_t>(bits));
    for (int n : awkward_lengths()) {
      const auto q = identity_quantizer(n, bits);
      std::vector<std::uint8_t> codes(static_cast<std::size_t>(n));
      for (auto& c : codes) c = static_cast<std::uint8_t>(r.below(1u << bits));
      codes[0] = 0;
      codes[static_cast<std::size_t>(n - 1)] = static_cast<std::uint8_t>((1 << bits) - 1);  // both table ends
      const float radius = static_cast<float>(0.5 + 3.0 * r.uniform());
      std::vector<float> x(static_cast<std::size_t>(n), NAN);
      q.dequantize(codes.data(), radius, x.data());
      for (int j = 0; j < n; ++j) {
        const float want = q.centroids()[codes[static_cast<std::size_t>(j)]] * radius;
        INFO("bits=" << bits << " n=" << n << " j=" << j);
        REQUIRE(std::memcmp(&x[static_cast<std::size_t>(j)], &want, sizeof want) == 0);
      }
    }
  }
}

TEST_CASE("sum_squares equals its scalar canonical order bit for bit", "[codec][simd]") {
  bgtq::counter_rng r(7);
  for (int n = 1; n <= 300; ++n) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x) v = static_cast<float>(3.0 * r.normal());
    const float got = bgtq::detail::sum_squares(x.data(), n), want = bgtq::detail::sum_squares_scalar(x.data(), n);
    INFO("n=" << n);
    REQUIRE(std::memcmp(&got, &want, sizeof got) == 0);
  }
}
