#pragma once
//! @file codebook/codebook.hpp
//! Scalar codebooks for TurboQuant-MSE: after a random rotation each coordinate y of a
//! unit vector in R^n follows the sphere law f_n(y) ~ (1 - y^2)^((n-3)/2) (laws.hpp),
//! and each coordinate is replaced by the nearest of 2^b levels.
//!
//! - `codebook`: the levels (float), the decision thresholds (float) and the exact MSE
//!   of that quantizer under f_n. Value mapping only: it never touches packed bytes.
//! - Families (stateless policies, concept `codebook_family`): `sphere_lloyd_max`
//!   (optimal for f_n), `gaussian_lloyd_max` (optimal for N(0, 1/n) truncated to [-1, 1]),
//!   `uniform_levels` (equally spaced, step optimal for f_n).
//! - `get_codebook(kind, dim, bits)`: memoized, thread-safe access; `codebook_distortion`:
//!   D(b) for the bit allocator.
//!
//! Design method and tolerances: see lloyd_max.hpp and docs/codebooks.md.
//! Example (from tests/codebook/test_codebook.cpp):
//! @code
//! const bgtq::codebook& cb = bgtq::get_codebook(bgtq::codebook_kind::sphere, 128, 3);
//! std::uint8_t idx = cb.quantize(0.05f);   // cell index in [0, 8)
//! float level = cb.centroids()[idx];
//! double n_mse = cb.mse();                 // ~0.03397 = 128 * E[(y - Q(y))^2]
//! @endcode

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "../config.hpp"
#include "../core/error.hpp"
#include "concepts.hpp"
#include "kind.hpp"
#include "laws.hpp"
#include "lloyd_max.hpp"
#include "quantize.hpp"

namespace bgtq {

//! Smallest and largest dimension n and bit width b a codebook is defined for.
inline constexpr int codebook_min_dim = 2;
inline constexpr int codebook_max_dim = 65536;
inline constexpr int codebook_min_bits = 1;
inline constexpr int codebook_max_bits = 8;

namespace detail {
inline void check_codebook_args(int dim, int bits, const char* where) {
  BGTQ_REQUIRE(dim >= codebook_min_dim && dim <= codebook_max_dim, errc::invalid_argument,
               std::string(where) + ": dim must be in [2, 65536], got " + std::to_string(dim));
  BGTQ_REQUIRE(bits >= codebook_min_bits && bits <= codebook_max_bits, errc::invalid_argument,
               std::string(where) + ": bits must be in [1, 8], got " + std::to_string(bits));
}

//! Largest float <= the exact midpoint (a + b)/2 of two finite floats. The sum is carried
//! exactly as a double-double (TwoSum), and 2f - s is exact near s (Sterbenz), so the
//! comparisons below are exact for any pair of floats.
inline float midpoint_round_down(float a, float b) noexcept {
  const double x = a, y = b;
  const double s = x + y;
  const double bv = s - x;
  const double e = (x - (s - bv)) + (y - bv);  // s + e == x + y exactly
  auto above = [&](float f) { return 2.0 * static_cast<double>(f) - s > e; };  // f > (a + b)/2
  float f = static_cast<float>(0.5 * s);
  while (above(f)) f = std::nextafter(f, -INFINITY);
  while (!above(std::nextafter(f, INFINITY))) f = std::nextafter(f, INFINITY);
  return f;
}
}  // namespace detail

//! A b-bit scalar codebook for one coordinate of a unit vector in R^dim.
//!
//! Invariants: size() = 2^bits levels, strictly ascending, inside [-1, 1];
//! thresholds()[k] is the largest float <= (c_k + c_{k+1})/2 computed exactly, so
//! quantize(y) returns exactly the nearest centroid of every float y (ties to the lower
//! index); mse() = dim * E[(y - c(q(y)))^2] under the sphere law f_dim, evaluated in
//! closed form for these float levels and float thresholds (relative accuracy ~1e-11
//! at 8 bits, ~1e-13 at 4 bits).
class codebook {
 public:
  //! Builds a codebook from ascending levels (rounded to float) and computes its
  //! thresholds and MSE under f_dim.
  //! @throws bgtq::error(invalid_argument) for dim/bits out of range, a level count other
  //! than 2^bits, or levels that are not finite, not inside [-1, 1] or not strictly
  //! ascending after rounding to float.
  codebook(codebook_kind kind, int dim, int bits, std::span<const double> levels) : kind_(kind), dim_(dim), bits_(bits) {
    detail::check_codebook_args(dim, bits, "codebook");
    const std::size_t K = std::size_t{1} << bits;
    BGTQ_REQUIRE(levels.size() == K, errc::invalid_argument,
                 "codebook: " + std::to_string(bits) + " bits need " + std::to_string(K) + " levels, got " +
                     std::to_string(levels.size()));
    centroids_.resize(K);
    for (std::size_t k = 0; k < K; ++k) {
      BGTQ_REQUIRE(std::isfinite(levels[k]) && std::fabs(levels[k]) <= 1.0, errc::invalid_argument,
                   "codebook: level " + std::to_string(k) + " = " + std::to_string(levels[k]) + " is not in [-1, 1]");
      centroids_[k] = static_cast<float>(levels[k]);
      BGTQ_REQUIRE(k == 0 || centroids_[k] > centroids_[k - 1], errc::invalid_argument,
                   "codebook: levels are not strictly ascending at index " + std::to_string(k));
    }
    thresholds_.resize(K - 1);
    for (std::size_t k = 0; k + 1 < K; ++k) thresholds_[k] = detail::midpoint_round_down(centroids_[k], centroids_[k + 1]);
    std::vector<double> c(centroids_.begin(), centroids_.end()), t(thresholds_.begin(), thresholds_.end());
    mse_ = dim * detail::quantizer_mse(sphere_law(dim), c, t);
  }

  //! The family that designed it.
  codebook_kind kind() const noexcept { return kind_; }
  //! Dimension n of the unit vectors whose coordinates it quantizes.
  int dim() const noexcept { return dim_; }
  //! Bits per coordinate, in [1, 8].
  int bits() const noexcept { return bits_; }
  //! Number of levels, 2^bits.
  int size() const noexcept { return 1 << bits_; }
  //! Levels for one coordinate, ascending, size() values.
  std::span<const float> centroids() const noexcept { return centroids_; }
  //! Decision boundaries, ascending, size()-1 values (see the class comment).
  std::span<const float> thresholds() const noexcept { return thresholds_; }
  //! dim * E[(y - c(q(y)))^2], y ~ f_dim, for every kind.
  double mse() const noexcept { return mse_; }
  //! Number of thresholds t with y > t: the index of the nearest level.
  std::uint8_t quantize(float y) const noexcept { return codebook_quantize(thresholds_.data(), bits_, y); }

 private:
  codebook_kind kind_;
  int dim_;
  int bits_;
  std::vector<float> centroids_;
  std::vector<float> thresholds_;
  double mse_ = 0.0;
};

static_assert(scalar_codebook<codebook>);

//! Lloyd-Max quantizer for the exact sphere law f_dim: the MSE-optimal codebook.
//! Newton's method on the centroid condition from the compander start (lloyd_max.hpp).
struct sphere_lloyd_max {
  static constexpr codebook_kind kind = codebook_kind::sphere;
  //! @throws bgtq::error(invalid_argument) for dim outside [2, 65536] or bits outside [1, 8].
  static codebook build(int dim, int bits) {
    detail::check_codebook_args(dim, bits, "sphere_lloyd_max");
    const sphere_law law(dim);
    const double alpha_c = (law.alpha() + 2.0) / 3.0;  // f^(1/3) ~ (1-y^2)^((alpha-1)/3)
    const sphere_law compander(2.0 * alpha_c + 1.0);
    const std::vector<double> c = detail::lloyd_max_symmetric(law, compander, bits, law.sigma());
    return codebook(kind, dim, bits, c);
  }
};

//! Lloyd-Max quantizer for N(0, 1/dim) truncated to [-1, 1] (the Gaussian approximation
//! of f_dim, clipped to the support of y). For dim >= 64 the truncated mass
//! 2 Phi(-sqrt(dim)) < 1e-15 and this is the plain Gaussian (Max 1960) codebook scaled by
//! 1/sqrt(dim). mse() is still evaluated under f_dim, so it is >= the sphere codebook's.
struct gaussian_lloyd_max {
  static constexpr codebook_kind kind = codebook_kind::gaussian;
  //! @throws bgtq::error(invalid_argument) for dim outside [2, 65536] or bits outside [1, 8].
  static codebook build(int dim, int bits) {
    detail::check_codebook_args(dim, bits, "gaussian_lloyd_max");
    const double sigma = 1.0 / std::sqrt(static_cast<double>(dim));
    const truncated_gaussian_law law(sigma);
    const truncated_gaussian_law compander(sigma * std::sqrt(3.0));  // f^(1/3) of N(0, s^2) ~ N(0, 3 s^2)
    const std::vector<double> c = detail::lloyd_max_symmetric(law, compander, bits, sigma);
    return codebook(kind, dim, bits, c);
  }
};

//! Equally spaced levels (k - (2^b - 1)/2) * step with midpoint thresholds (a symmetric
//! mid-rise uniform quantizer); `step` minimises the MSE under f_dim subject to the outer
//! levels lying in [-1, 1] (scan then bisection of dMSE/dstep; see best_uniform_step).
struct uniform_levels {
  static constexpr codebook_kind kind = codebook_kind::uniform;
  //! @throws bgtq::error(invalid_argument) for dim outside [2, 65536] or bits outside [1, 8].
  static codebook build(int dim, int bits) {
    detail::check_codebook_args(dim, bits, "uniform_levels");
    const sphere_law law(dim);
    const double step = detail::best_uniform_step(law, bits, law.sigma());
    const int K = 1 << bits;
    std::vector<double> c(K);
    for (int k = 0; k < K; ++k) c[k] = (k - 0.5 * (K - 1)) * step;
    return codebook(kind, dim, bits, c);
  }
};

static_assert(codebook_family<sphere_lloyd_max>);
static_assert(codebook_family<gaussian_lloyd_max>);
static_assert(codebook_family<uniform_levels>);

//! Builds a codebook of the given family (not memoized). @throws like the policies, and
//! bgtq::error(invalid_argument) for an unknown kind.
inline codebook build_codebook(codebook_kind kind, int dim, int bits) {
  switch (kind) {
    case codebook_kind::sphere: return sphere_lloyd_max::build(dim, bits);
    case codebook_kind::gaussian: return gaussian_lloyd_max::build(dim, bits);
    case codebook_kind::uniform: return uniform_levels::build(dim, bits);
  }
  fail(errc::invalid_argument, "unknown codebook kind " + std::to_string(static_cast<int>(kind)));
}

namespace detail {
struct codebook_cache {
  struct entry {
    std::once_flag once;
    std::unique_ptr<const codebook> value;
  };
  std::mutex mutex;
  std::map<std::tuple<int, int, int>, std::unique_ptr<entry>> entries;
};
//! The process-wide cache; deliberately never destroyed, so references stay valid
//! during static destruction too.
inline codebook_cache& global_codebook_cache() {
  static codebook_cache* cache = new codebook_cache();
  return *cache;
}
}  // namespace detail

//! The codebook of `kind` for (dim, bits), computed once per process (thread-safe:
//! concurrent first calls for the same key wait for one computation; different keys
//! compute in parallel). The reference stays valid for the program's lifetime.
//! Cost of a first call: ~1 ms for b <= 4, a few ms at b = 8 (see docs/codebooks.md).
//! @throws bgtq::error(invalid_argument) for dim outside [2, 65536], bits outside
//! [1, 8] or an unknown kind.
inline const codebook& get_codebook(codebook_kind kind, int dim, int bits) {
  detail::check_codebook_args(dim, bits, "get_codebook");
  BGTQ_REQUIRE(kind == codebook_kind::sphere || kind == codebook_kind::gaussian || kind == codebook_kind::uniform,
               errc::invalid_argument, "get_codebook: unknown codebook kind " + std::to_string(static_cast<int>(kind)));
  auto& cache = detail::global_codebook_cache();
  detail::codebook_cache::entry* e = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto& slot = cache.entries[{static_cast<int>(kind), dim, bits}];
    if (!slot) slot = std::make_unique<detail::codebook_cache::entry>();
    e = slot.get();
  }
  std::call_once(e->once, [&] { e->value = std::make_unique<const codebook>(build_codebook(kind, dim, bits)); });
  return *e->value;
}

//! Distortion table for the bit allocator: D[0] = 1 (a dropped block loses all its
//! energy) and D[b] = get_codebook(kind, dim, b).mse() for b = 1..8 (n-scaled MSE of a
//! unit vector, decreasing in b). @throws like get_codebook.
inline std::array<double, 9> codebook_distortion(codebook_kind kind, int dim) {
  std::array<double, 9> d{};
  d[0] = 1.0;
  for (int b = 1; b <= 8; ++b) d[b] = get_codebook(kind, dim, b).mse();
  return d;
}

//! High-resolution (Panter-Dite) approximation of the sphere Lloyd-Max n*MSE:
//! (n/12) (int f_n^(1/3))^3 4^-b, which tends to (sqrt(3) pi / 2) 4^-b as n grows.
//! Accurate for large b only; a reference printed next to measured values.
inline double high_resolution_mse(int dim, int bits) {
  detail::check_codebook_args(dim, bits, "high_resolution_mse");
  const sphere_law law(dim);
  const sphere_law compander(2.0 * (law.alpha() + 2.0) / 3.0 + 1.0);
  // int f^(1/3) = C^(1/3) / C' with C' the norm of (1-y^2)^((alpha-1)/3)
  const double r = law.norm() / std::pow(compander.norm(), 3.0);
  return dim / 12.0 * r * std::pow(4.0, -bits);
}

}  // namespace bgtq
