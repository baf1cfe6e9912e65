#include <catch2/catch.hpp>

#include <bgtq/core/half.hpp>

#include <cmath>
#include <cstring>
#include <limits>

namespace {
// Reference: the half value nearest to f (ties to even), found by exhaustive search over
// all finite halves that bracket it. Slow, obviously correct.
float ref_round_to_half(float f) {
  if (std::isnan(f)) return f;
  if (std::fabs(f) >= 65520.0f) return std::copysign(std::numeric_limits<float>::infinity(), f);
  double best = 0;
  double best_err = 1e300;
  std::uint16_t best_bits = 0;
  for (std::uint32_t h = 0; h < 0x7c00u; ++h) {
    const double v = bgtq::half_bits_to_float(static_cast<std::uint16_t>(h));
    const double err = std::fabs(v - std::fabs(static_cast<double>(f)));
    if (err < best_err || (err == best_err && (h & 1u) == 0 && (best_bits & 1u))) {
      best = v;
      best_err = err;
      best_bits = static_cast<std::uint16_t>(h);
    }
  }
  return static_cast<float>(std::copysign(best, f));
}
}  // namespace

TEST_CASE("every half round-trips through float exactly", "[core][half]") {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = bgtq::half_bits_to_float(static_cast<std::uint16_t>(h));
    const std::uint16_t back = bgtq::float_to_half_bits(f);
    if (std::isnan(f)) {
      REQUIRE(std::isnan(bgtq::half_bits_to_float(back)));
    } else {
      REQUIRE(back == h);
    }
  }
}

TEST_CASE("float to half rounds to nearest even", "[core][half]") {
  // Midpoints between adjacent halves must round to the even one; values just off
  // the midpoint must round to the nearer one.
  for (std::uint32_t h = 0x0001; h < 0x7bffu; h += 37) {
    const float a = bgtq::half_bits_to_float(static_cast<std::uint16_t>(h));
    const float b = bgtq::half_bits_to_float(static_cast<std::uint16_t>(h + 1));
    const float mid = 0.5f * (a + b);  // exact in float
    const std::uint16_t r = bgtq::float_to_half_bits(mid);
    REQUIRE(r == ((h & 1u) ? h + 1 : h));
    REQUIRE(bgtq::float_to_half_bits(std::nextafter(mid, a)) == h);
    REQUIRE(bgtq::float_to_half_bits(std::nextafter(mid, b)) == h + 1);
    REQUIRE(bgtq::float_to_half_bits(-mid) == (r | 0x8000u));
  }
}

TEST_CASE("float to half agrees with a brute-force reference on awkward values", "[core][half]") {
  const float vals[] = {0.0f, 1e-8f, 2.98e-8f, 5.96e-8f, 6e-8f, 1e-7f, 6.1e-5f, 6.104e-5f, 0.1f, 0.333333f,
                        1.0f, 1.0009765625f, 2049.0f, 65503.0f, 65504.0f, 65519.0f, 65520.0f, 1e6f};
  for (float v : vals) {
    INFO("v = " << v);
    REQUIRE(bgtq::half_bits_to_float(bgtq::float_to_half_bits(v)) == ref_round_to_half(v));
    REQUIRE(bgtq::half_bits_to_float(bgtq::float_to_half_bits(-v)) == ref_round_to_half(-v));
  }
  REQUIRE(std::isinf(bgtq::half_bits_to_float(bgtq::float_to_half_bits(std::numeric_limits<float>::infinity()))));
  REQUIRE(std::isnan(bgtq::half_bits_to_float(bgtq::float_to_half_bits(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("bfloat16 conversion rounds to nearest even", "[core][half]") {
  REQUIRE(bgtq::bf16_bits_to_float(bgtq::float_to_bf16_bits(1.0f)) == 1.0f);
  // 1 + 2^-8 is the midpoint between 1 and 1 + 2^-7: ties to even (1.0)
  REQUIRE(bgtq::bf16_bits_to_float(bgtq::float_to_bf16_bits(1.0f + 1.0f / 256)) == 1.0f);
  REQUIRE(bgtq::bf16_bits_to_float(bgtq::float_to_bf16_bits(1.0f + 3.0f / 256)) == 1.0f + 4.0f / 256);
  REQUIRE(std::isnan(bgtq::bf16_bits_to_float(bgtq::float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
  // every bfloat16 but NaN round-trips exactly: both signs, subnormals, both infinities
  // (an Inf must not be taken for a NaN)
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    if ((h & 0x7fffu) > 0x7f80u) continue;
    INFO("bits " << h);
    REQUIRE(bgtq::float_to_bf16_bits(bgtq::bf16_bits_to_float(static_cast<std::uint16_t>(h))) == h);
  }
  REQUIRE(bgtq::float_to_bf16_bits(-1.0f - 3.0f / 256) == 0xbf82u);  // ties to even below zero too
  REQUIRE(bgtq::float_to_bf16_bits(std::numeric_limits<float>::max()) == 0x7f80u);  // beyond the last bf16 + half an ulp
  // a NaN whose payload sits only in the low 16 bits (a signalling NaN) stays a NaN, of
  // either sign, instead of truncating to an Inf
  for (const std::uint32_t nan_bits : {0x7f800001u, 0xff800001u, 0x7f80ffffu, 0x7fc00000u}) {
    float f;
    std::memcpy(&f, &nan_bits, sizeof f);
    INFO("NaN bits " << nan_bits);
    REQUIRE(std::isnan(bgtq::bf16_bits_to_float(bgtq::float_to_bf16_bits(f))));
    REQUIRE((bgtq::float_to_bf16_bits(f) & 0x8000u) == ((nan_bits >> 16) & 0x8000u));
  }
}

TEST_CASE("saturate_half clamps to the finite fp16 range, beyond_half flags exactly what it changes", "[core][half]") {
  using bgtq::beyond_half;
  using bgtq::half_max;
  using bgtq::saturate_half;
  const float inf = std::numeric_limits<float>::infinity();
  const float above = std::nextafter(half_max, inf);  // the first float beyond the range
  // static_asserts: both are usable in constant expressions (and so in device code)
  static_assert(saturate_half(1e6f) == 65504.0f && saturate_half(-1e6f) == -65504.0f);
  static_assert(!beyond_half(65504.0f) && beyond_half(65505.0f));
  const float vals[] = {0.0f, -0.0f, 1e-30f, 1.0f, -2.5f, 65503.0f, half_max, -half_max, above, -above,
                        65519.0f, 65520.0f, 1e6f, -1e6f, std::numeric_limits<float>::max(), inf, -inf};
  for (float v : vals) {
    INFO("v = " << v);
    const float s = saturate_half(v);
    const bool inside = std::fabs(v) <= half_max;
    CHECK(beyond_half(v) == !inside);
    CHECK(s == (inside ? v : std::copysign(half_max, v)));
    CHECK(std::signbit(s) == std::signbit(v));
    // and stored as fp16 it stays finite (65504 < v < 65520 would round down anyway; beyond, Inf)
    CHECK(std::isfinite(bgtq::half_bits_to_float(bgtq::float_to_half_bits(s))));
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(saturate_half(nan)));  // NaN is not a clamp: callers reject it before
  CHECK_FALSE(beyond_half(nan));
}
