#pragma once
//! @file allocate/allocate.hpp
//! Bit allocation family (Theorem 1): given block scores s_i, a distortion law D(b)
//! and a budget B, choose integer widths b_min <= b_i <= b_max with sum b_i = B that
//! minimise sum_i s_i D(b_i).
//! @code
//! std::vector<double> s = {8, 1, 1, 1};
//! bgtq::allocation_request req{.scores = s, .budget = bgtq::budget_for(2.0, 4)};
//! bgtq::allocation a = bgtq::greedy_allocator::allocate(req);  // a.bits == {3, 2, 2, 1}
//! @endcode
//! Policies: uniform_allocator (baseline), greedy_allocator (the paper, optimal for a
//! convex decreasing D), dp_allocator (exact reference), and allocate_pooled (one
//! budget for several heads). docs/theory.md has the proof.

#include "concepts.hpp"
#include "distortion.hpp"
#include "dp.hpp"
#include "greedy.hpp"
#include "request.hpp"
#include "uniform.hpp"

namespace bgtq {
static_assert(bit_allocator<uniform_allocator>);
static_assert(bit_allocator<greedy_allocator>);
static_assert(bit_allocator<dp_allocator>);
}  // namespace bgtq
