#pragma once
//! @file rotation/any_rotation.hpp
//! `any_rotation`: run-time choice among the four rotation policies (what a plan
//! stores is a kind and a seed per group, not a type).

#include <cstddef>
#include <cstdint>
#include <utility>
#include <variant>

#include "../core/error.hpp"
#include "concepts.hpp"
#include "haar.hpp"
#include "hadamard.hpp"
#include "identity.hpp"
#include "kind.hpp"
#include "structured.hpp"

namespace bgtq {

//! A rotation whose policy is chosen at run time. Copyable (copies share the
//! immutable matrix / sign storage), satisfies `rotation`. Each call dispatches with
//! one switch on the kind; for a hot loop over many vectors prefer `apply_batch`
//! or `visit`, which hands the concrete policy to a generic callable once.
class any_rotation {
 public:
  //! Builds the policy `kind` of dimension n from seed (identity ignores the seed).
  //! @throws bgtq::error(invalid_argument) for a bad n (see each policy; hadamard needs
  //!         a power of two) or an unknown kind
  any_rotation(rotation_kind kind, int n, std::uint64_t seed) : v_(make(kind, n, seed)) {}
  //! Wraps an existing policy object.
  any_rotation(identity_rotation r) : v_(std::move(r)) {}
  any_rotation(haar_rotation r) : v_(std::move(r)) {}
  any_rotation(hadamard_rotation r) : v_(std::move(r)) {}
  any_rotation(structured_rotation r) : v_(std::move(r)) {}

  //! Calls f(policy) with the concrete policy object and returns its result.
  //! @tparam F a callable accepting each of the four policy types by const reference
  template <class F>
  decltype(auto) visit(F&& f) const {
    switch (v_.index()) {
      case 0: return std::forward<F>(f)(*std::get_if<0>(&v_));
      case 1: return std::forward<F>(f)(*std::get_if<1>(&v_));
      case 2: return std::forward<F>(f)(*std::get_if<2>(&v_));
      default: return std::forward<F>(f)(*std::get_if<3>(&v_));
    }
  }
  //! The policy held.
  rotation_kind kind() const noexcept { return static_cast<rotation_kind>(v_.index()); }
  //! The dimension n.
  int dim() const noexcept {
    return visit([](const auto& r) { return r.dim(); });
  }
  //! out = P·in (in == out allowed).
  void apply(const float* in, float* out) const noexcept {
    visit([&](const auto& r) { r.apply(in, out); });
  }
  //! out = Pᵀ·in (in == out allowed).
  void apply_transpose(const float* in, float* out) const noexcept {
    visit([&](const auto& r) { r.apply_transpose(in, out); });
  }
  //! apply() on `count` contiguous vectors of n floats (in == out allowed), one dispatch.
  void apply_batch(const float* in, float* out, std::size_t count) const noexcept {
    visit([&](const auto& r) { r.apply_batch(in, out, count); });
  }
  //! apply_transpose() on `count` contiguous vectors of n floats, one dispatch.
  void apply_transpose_batch(const float* in, float* out, std::size_t count) const noexcept {
    visit([&](const auto& r) { r.apply_transpose_batch(in, out, count); });
  }

 private:
  // Alternative order equals the rotation_kind values, so kind() is the index.
  using variant = std::variant<identity_rotation, haar_rotation, hadamard_rotation, structured_rotation>;
  static_assert(std::is_same_v<std::variant_alternative_t<static_cast<int>(rotation_kind::haar), variant>, haar_rotation>);
  static_assert(std::is_same_v<std::variant_alternative_t<static_cast<int>(rotation_kind::structured), variant>,
                               structured_rotation>);
  static variant make(rotation_kind kind, int n, std::uint64_t seed) {
    switch (kind) {
      case rotation_kind::identity: return identity_rotation(n);
      case rotation_kind::haar: return haar_rotation(n, seed);
      case rotation_kind::hadamard: return hadamard_rotation(n, seed);
      case rotation_kind::structured: return structured_rotation(n, seed);
    }
    fail(errc::invalid_argument,
         "any_rotation: unknown rotation kind " + std::to_string(static_cast<int>(kind)));
  }
  variant v_;
};

}  // namespace bgtq
