#pragma once
//! @file allocate/distortion.hpp
//! The distortion law D(b), b = 0..8, that the bit allocators minimise against:
//! J(b) = sum_i s_i D(b_i). The paper's law is D(b) = 4^-b ("rate4"); the codebook's
//! measured unit-vector MSE table is the other law the library ships (see
//! docs/theory.md). Greedy allocation is optimal exactly when D is convex
//! (D(b) - D(b+1) non-increasing in b); `validate()` enforces that (`validate(false)`,
//! for the exact dynamic program, only the decrease).
//!
//! Naming note: the codebook family provides a *function* that returns the measured
//! table as a std::array. Should it be called `bgtq::distortion_table(kind, dim)` too,
//! the function hides this struct's name in any translation unit that sees both; then
//! write `struct bgtq::distortion_table` for the type (`bgtq::distortion_table::rate4()`
//! keeps working, since `X::` looks only for types and namespaces). The headers of
//! this family use the elaborated form internally so that they compile either way.

#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "../core/error.hpp"

namespace bgtq {
namespace detail {
//! A double for an error message: %.9g (std::to_string would print 1e-7 as 0.000000).
inline std::string alloc_num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
}  // namespace detail

//! A distortion table D(0..8). `d[b]` is the expected squared error of a unit vector
//! stored with b bits per coordinate; D(0) is the error of dropping it (1 for a unit
//! vector). Aggregate: `bgtq::distortion_table{arr}` wraps any std::array<double, 9>.
struct distortion_table {
  std::array<double, 9> d{};  //!< D(b) for b = 0..8

  //! The paper's law D(b) = 4^-b (exact in double: powers of two).
  static distortion_table rate4() noexcept {
    distortion_table t;
    double v = 1.0;
    for (int b = 0; b <= 8; ++b, v *= 0.25) t.d[static_cast<std::size_t>(b)] = v;
    return t;
  }

  //! Wraps `values` and validates it (see validate()).
  //! @throws bgtq::error(invalid_argument) naming the offending b.
  static distortion_table checked(const std::array<double, 9>& values) {
    struct distortion_table t{values};
    t.validate();
    return t;
  }

  //! Checks that the table is a valid law for the allocators: every entry finite and
  //! >= 0, D(0) > 0, non-increasing (D(b+1) <= D(b)), and (unless `require_convex` is
  //! false: the dynamic program's laws) convex: the gains D(b) - D(b+1) are
  //! non-increasing in b, up to an absolute slack of 1e-12 * D(0) for rounding in
  //! measured tables. Zero gains are allowed (a law that saturates).
  //! @throws bgtq::error(invalid_argument) naming the first offending b and values.
  void validate(bool require_convex = true) const {
    for (int b = 0; b <= 8; ++b) {
      const double v = d[static_cast<std::size_t>(b)];
      BGTQ_REQUIRE(std::isfinite(v) && v >= 0.0, errc::invalid_argument,
                   "distortion table: D(" + std::to_string(b) + ") = " + detail::alloc_num(v) +
                       " (must be finite and >= 0)");
    }
    BGTQ_REQUIRE(d[0] > 0.0, errc::invalid_argument, "distortion table: D(0) = 0 (must be > 0)");
    for (int b = 0; b < 8; ++b) {
      const double hi = d[static_cast<std::size_t>(b)], lo = d[static_cast<std::size_t>(b + 1)];
      BGTQ_REQUIRE(lo <= hi, errc::invalid_argument,
                   "distortion table is not decreasing at b = " + std::to_string(b) + ": D(" + std::to_string(b) +
                       ") = " + detail::alloc_num(hi) + " < D(" + std::to_string(b + 1) + ") = " + detail::alloc_num(lo));
    }
    if (!require_convex) return;
    const double slack = 1e-12 * d[0];
    for (int b = 0; b + 1 < 8; ++b) {
      const double g0 = gain(b), g1 = gain(b + 1);
      BGTQ_REQUIRE(g1 <= g0 + slack, errc::invalid_argument,
                   "distortion table is not convex at b = " + std::to_string(b + 1) + ": gain D(" +
                       std::to_string(b + 1) + ") - D(" + std::to_string(b + 2) + ") = " + detail::alloc_num(g1) +
                       " exceeds gain D(" + std::to_string(b) + ") - D(" + std::to_string(b + 1) + ") = " +
                       detail::alloc_num(g0) + " (greedy allocation is optimal only for convex laws)");
    }
  }

  //! D(b). @throws bgtq::error(invalid_argument) if b is outside 0..8.
  double operator()(int b) const {
    BGTQ_REQUIRE(b >= 0 && b <= 8, errc::invalid_argument,
                 "distortion table: bit width " + std::to_string(b) + " is outside 0..8");
    return d[static_cast<std::size_t>(b)];
  }

  //! Marginal gain of the (b+1)-th bit: D(b) - D(b+1), for b in 0..7 (unchecked).
  double gain(int b) const noexcept { return d[static_cast<std::size_t>(b)] - d[static_cast<std::size_t>(b + 1)]; }

  friend bool operator==(const distortion_table&, const distortion_table&) = default;
};

}  // namespace bgtq
