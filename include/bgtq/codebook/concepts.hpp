#pragma once
//! @file codebook/concepts.hpp
//! Concepts of the codebook family: a scalar codebook (levels and decision thresholds
//! for one coordinate of a rotated unit vector) and a codebook family (a stateless
//! policy that builds one for a given dimension and bit width).

#include <concepts>
#include <cstdint>
#include <span>

#include "kind.hpp"

namespace bgtq {

//! A b-bit scalar quantizer for one coordinate of a unit vector in R^dim.
//! Guarantees expected of a model: `size() == 1 << bits()`; `centroids()` holds size()
//! ascending levels; `thresholds()` holds size()-1 ascending decision boundaries;
//! `quantize(y)` = number of thresholds t with y > t (ties go to the lower cell);
//! `mse()` = dim * E[(y - centroid(quantize(y)))^2] for y distributed as one coordinate
//! of a uniformly random unit vector in R^dim.
template <class C>
concept scalar_codebook = requires(const C& c, float y) {
  { c.kind() } -> std::same_as<codebook_kind>;
  { c.dim() } -> std::same_as<int>;
  { c.bits() } -> std::same_as<int>;
  { c.size() } -> std::same_as<int>;
  { c.centroids() } -> std::convertible_to<std::span<const float>>;
  { c.thresholds() } -> std::convertible_to<std::span<const float>>;
  { c.mse() } -> std::same_as<double>;
  { c.quantize(y) } -> std::same_as<std::uint8_t>;
};

//! A stateless policy that designs codebooks: `F::kind` names it and
//! `F::build(dim, bits)` returns a fresh scalar codebook (not memoized; see get_codebook).
template <class F>
concept codebook_family = requires(int dim, int bits) {
  { F::kind } -> std::convertible_to<codebook_kind>;
  { F::build(dim, bits) } -> scalar_codebook;
};

}  // namespace bgtq
