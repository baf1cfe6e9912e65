#pragma once
//! @file rotation/concepts.hpp
//! The `rotation` concept (an orthogonal map of a fixed dimension and its transpose),
//! the family-wide size limit, and `dense_matrix`, which materialises any rotation.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kind.hpp"

namespace bgtq {

//! Largest dimension any rotation policy accepts. Policies that need scratch space
//! (dense in-place products, permutations) keep it on the stack, so `apply` never
//! allocates; 4096 floats = 16 KiB of stack at most.
inline constexpr int max_rotation_dim = 4096;

//! A rotation is a fixed orthogonal n x n matrix P (PᵀP = I up to float rounding).
//! Guarantees of every model:
//! - `dim()` is n (>= 1);
//! - `apply(in, out)` writes out = P·in, `apply_transpose(in, out)` writes out = Pᵀ·in;
//!   `in` and `out` each hold n floats and are either the same pointer (in place) or do
//!   not overlap; in-place and out-of-place results are bit-identical;
//! - both are const, thread-safe (no mutable state) and allocation-free;
//! - the matrix is a deterministic function of the constructor arguments (n, seed),
//!   built from `bgtq::counter_rng` only, identical on every compiler and platform.
//! @tparam R a rotation policy (identity_rotation, haar_rotation, hadamard_rotation,
//!           structured_rotation, any_rotation)
template <class R>
concept rotation = requires(const R& r, const float* in, float* out) {
  { r.dim() } -> std::same_as<int>;
  { r.apply(in, out) } -> std::same_as<void>;            // out = P·in ; in == out allowed
  { r.apply_transpose(in, out) } -> std::same_as<void>;  // out = Pᵀ·in ; in == out allowed
};

//! The matrix of a rotation, row-major n x n: element (i, j) is P_ij, so column j is
//! P·e_j. Used for the GPU upload of dense rotations and by tests. O(n) applies.
//! @tparam R any model of `rotation`
template <rotation R>
std::vector<float> dense_matrix(const R& r) {
  const int n = r.dim();
  const std::size_t un = static_cast<std::size_t>(n);
  std::vector<float> m(un * un), e(un, 0.0f), col(un);
  for (std::size_t j = 0; j < un; ++j) {
    e[j] = 1.0f;
    r.apply(e.data(), col.data());
    e[j] = 0.0f;
    for (std::size_t i = 0; i < un; ++i) m[i * un + j] = col[i];
  }
  return m;
}

namespace detail {
//! The counter_rng stream each rotation kind draws from; the seed is the Philox key.
//! Distinct streams keep, e.g., haar and hadamard of the same seed independent.
constexpr std::uint64_t rotation_rng_stream(rotation_kind k) {
  return 0x524F544100000000ull | static_cast<std::uint64_t>(k);  // "ROTA" << 32 | kind
}
}  // namespace detail

}  // namespace bgtq
