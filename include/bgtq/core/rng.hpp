#pragma once
//! @file rng.hpp
//! Deterministic, portable random numbers: Philox-4x32-10 (Salmon et al., SC'11), a
//! counter-based generator. The same (seed, stream, counter) gives the same bits on
//! every compiler, platform and on the device. Gaussian samples use the polar method
//! with our own `portable_log` built from IEEE-exact operations only (+ - * / sqrt), so
//! they too are bit-identical everywhere, as long as the translation unit does not
//! contract multiply-adds (the project builds with -ffp-contract=off for this reason;
//! see docs/integration.md). Never use std::normal_distribution for anything that
//! defines a rotation or synthetic data.

#include <cstdint>

#include "../config.hpp"

namespace bgtq {

//! Four 32-bit words: a Philox counter or output.
struct u32x4 {
  std::uint32_t v[4];
};

namespace detail {
BGTQ_HOST_DEVICE void mulhilo32(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}
}  // namespace detail

//! Philox-4x32 with 10 rounds: a bijection of the 128-bit counter keyed by 64 bits.
BGTQ_HOST_DEVICE u32x4 philox4x32(u32x4 ctr, std::uint32_t k0, std::uint32_t k1) {
  constexpr std::uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr std::uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, lo0, hi1, lo1;
    detail::mulhilo32(M0, ctr.v[0], hi0, lo0);
    detail::mulhilo32(M1, ctr.v[2], hi1, lo1);
    u32x4 n;
    n.v[0] = hi1 ^ ctr.v[1] ^ k0;
    n.v[1] = lo1;
    n.v[2] = hi0 ^ ctr.v[3] ^ k1;
    n.v[3] = lo0;
    ctr = n;
    k0 += W0;
    k1 += W1;
  }
  return ctr;
}

namespace detail {
//! Natural log from + - * / only (frexp-style reduction by bit manipulation, then the
//! atanh series), accurate to a few ulp of double and bit-identical on every IEEE
//! platform. Argument must be finite and > 0.
BGTQ_HOST_DEVICE double portable_log(double x) {
  // reduce x = m * 2^e with m in [sqrt(1/2), sqrt(2))
  int e = 0;
  while (x >= 1.4142135623730951) {
    x *= 0.5;
    ++e;
  }
  while (x < 0.7071067811865476) {
    x *= 2.0;
    --e;
  }
  const double s = (x - 1.0) / (x + 1.0);  // |s| <= 0.1716
  const double s2 = s * s;
  // 2*atanh(s) = 2*(s + s^3/3 + s^5/5 + ...); 0.1716^2 ~ 0.0295 -> 12 terms reach 1e-19
  double term = s;
  double sum = 0.0;
  for (int k = 1; k <= 25; k += 2) {
    sum += term / k;
    term *= s2;
  }
  constexpr double ln2 = 0.6931471805599453;
  return 2.0 * sum + e * ln2;
}
}  // namespace detail

//! A stream of random numbers: Philox keyed by `seed`, counter = (index, stream).
//! Cheap to copy; two generators with different `stream` never overlap.
class counter_rng {
 public:
  BGTQ_HOST_DEVICE explicit counter_rng(std::uint64_t seed, std::uint64_t stream = 0)
      : k0_(static_cast<std::uint32_t>(seed)), k1_(static_cast<std::uint32_t>(seed >> 32)), stream_(stream) {}

  //! Next 32 uniformly random bits.
  BGTQ_HOST_DEVICE std::uint32_t next_u32() {
    if (used_ == 4) refill();
    return buf_.v[used_++];
  }
  //! Next 64 uniformly random bits.
  BGTQ_HOST_DEVICE std::uint64_t next_u64() {
    const std::uint64_t hi = next_u32();
    return (hi << 32) | next_u32();
  }
  //! Uniform double in [0, 1) with 53 random bits.
  BGTQ_HOST_DEVICE double uniform() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
  //! Uniform double in (0, 1): never exactly zero.
  BGTQ_HOST_DEVICE double uniform_open() { return (static_cast<double>(next_u64() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  //! Uniform integer in [0, n) (n >= 1), unbiased by rejection.
  BGTQ_HOST_DEVICE std::uint32_t below(std::uint32_t n) {
    const std::uint32_t limit = static_cast<std::uint32_t>(0xFFFFFFFFull - (0x100000000ull % n));
    std::uint32_t r;
    do {
      r = next_u32();
    } while (r > limit);
    return r % n;
  }
  //! +1.0f or -1.0f with equal probability.
  BGTQ_HOST_DEVICE float sign() { return (next_u32() & 1u) ? -1.0f : 1.0f; }
  //! Standard normal sample (Marsaglia polar method, portable log).
  BGTQ_HOST_DEVICE double normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    double u, v, s;
    do {
      u = 2.0 * uniform() - 1.0;
      v = 2.0 * uniform() - 1.0;
      s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double f = sqrt_(-2.0 * detail::portable_log(s) / s);
    spare_ = v * f;
    have_spare_ = true;
    return u * f;
  }

 private:
  BGTQ_HOST_DEVICE static double sqrt_(double x) {
    // IEEE sqrt is correctly rounded everywhere; __builtin_sqrt avoids <cmath> on the device pass.
    return __builtin_sqrt(x);
  }
  BGTQ_HOST_DEVICE void refill() {
    u32x4 c{{static_cast<std::uint32_t>(counter_), static_cast<std::uint32_t>(counter_ >> 32),
             static_cast<std::uint32_t>(stream_), static_cast<std::uint32_t>(stream_ >> 32)}};
    buf_ = philox4x32(c, k0_, k1_);
    ++counter_;
    used_ = 0;
  }
  std::uint32_t k0_, k1_;
  std::uint64_t stream_;
  std::uint64_t counter_ = 0;
  u32x4 buf_{};
  int used_ = 4;
  bool have_spare_ = false;
  double spare_ = 0.0;
};

//! Mixes two 64-bit values into a new seed (splitmix64 finaliser); used to derive
//! per-(layer, head, group) seeds from one plan seed.
BGTQ_HOST_DEVICE constexpr std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a + 0x9E3779B97F4A7C15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace bgtq
