#pragma once
//! @file pack/pack.hpp
//! Packing layouts: bgtq::bit_tight (the storage default) and bgtq::word_aligned.
#include "bit_tight.hpp"
#include "concepts.hpp"

namespace bgtq {
static_assert(packing_layout<bit_tight>);
static_assert(packing_layout<word_aligned>);
}  // namespace bgtq
