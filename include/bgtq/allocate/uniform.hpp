#pragma once
//! @file allocate/uniform.hpp
//! The uniform baseline: every block gets the same width (plain TurboQuant-MSE when
//! B = b * L).

#include <cstdint>

#include "request.hpp"

namespace bgtq {

//! Uniform allocation, ignoring the scores. With the (capped) budget B and L blocks,
//! every block gets q = floor(B / L) bits and the remaining B mod L bits go one each to
//! blocks 0, 1, ..., (B mod L) - 1. Since L * b_min <= B <= L * b_max, q lies in
//! [b_min, b_max] and q + 1 is only used when q < b_max, so no clamping is ever needed.
//! When B = b * L this is the uniform TQ baseline: every block at b bits.
struct uniform_allocator {
  static constexpr const char* name = "uniform";

  //! @throws bgtq::error as described for bit_allocator (concepts.hpp).
  static allocation allocate(const allocation_request& r) {
    const detail::resolved_budget rb = detail::validate_request(r);
    const auto L = static_cast<std::int64_t>(r.scores.size());
    const std::int64_t q = rb.budget / L, rem = rb.budget % L;
    allocation a;
    a.bits.resize(r.scores.size());
    for (std::int64_t i = 0; i < L; ++i) a.bits[static_cast<std::size_t>(i)] = static_cast<int>(q + (i < rem ? 1 : 0));
    detail::finish_allocation(a, r.scores, r.distortion, rb);
    return a;
  }
};

}  // namespace bgtq
