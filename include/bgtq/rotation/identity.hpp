#pragma once
//! @file rotation/identity.hpp
//! `identity_rotation`: P = I. The baseline that shows what rotating buys.

#include <cstddef>
#include <cstring>
#include <string>

#include "../core/error.hpp"
#include "concepts.hpp"
#include "kind.hpp"

namespace bgtq {

//! P = I on R^n. apply and apply_transpose copy (O(n), nothing when in == out).
//! Construction O(1); stores nothing but n.
class identity_rotation {
 public:
  //! @throws bgtq::error(invalid_argument) unless 1 <= n <= max_rotation_dim
  explicit identity_rotation(int n) : n_(n) {
    BGTQ_REQUIRE(n >= 1 && n <= max_rotation_dim, errc::invalid_argument,
                 "identity_rotation: dimension n = " + std::to_string(n) + " is outside [1, " +
                     std::to_string(max_rotation_dim) + "]");
  }
  //! The run-time kind of this policy.
  static constexpr rotation_kind kind() noexcept { return rotation_kind::identity; }
  //! The dimension n.
  int dim() const noexcept { return n_; }
  //! out = in.
  void apply(const float* in, float* out) const noexcept { copy(in, out); }
  //! out = in.
  void apply_transpose(const float* in, float* out) const noexcept { copy(in, out); }
  //! apply() on `count` contiguous vectors (in == out allowed).
  void apply_batch(const float* in, float* out, std::size_t count) const noexcept { copy(in, out, count); }
  //! apply_transpose() on `count` contiguous vectors (in == out allowed).
  void apply_transpose_batch(const float* in, float* out, std::size_t count) const noexcept { copy(in, out, count); }

 private:
  void copy(const float* in, float* out, std::size_t count = 1) const noexcept {
    if (in != out) std::memcpy(out, in, sizeof(float) * static_cast<std::size_t>(n_) * count);
  }
  int n_;
};

}  // namespace bgtq
