#pragma once
//! @file allocate/concepts.hpp
//! The `bit_allocator` concept: scores + budget -> integer widths.

#include <concepts>

#include "request.hpp"

namespace bgtq {

//! A bit allocator is a stateless policy with a static `allocate(request)` returning an
//! `allocation` and a `name`. Every allocator validates the request the same way
//! (non-empty finite non-negative scores whose objective sum_i s_i D(b_min) stays
//! finite, 0 <= b_min <= b_max <= 8, a valid distortion table (convex, except for the
//! dynamic program), B >= L * b_min, capping above L * b_max) and returns widths in
//! [b_min, b_max] whose sum is the (capped) budget.
//! @tparam A e.g. bgtq::uniform_allocator, bgtq::greedy_allocator, bgtq::dp_allocator
template <class A>
concept bit_allocator = requires(const allocation_request& r) {
  { A::allocate(r) } -> std::same_as<allocation>;
  { A::name } -> std::convertible_to<const char*>;
};

}  // namespace bgtq
