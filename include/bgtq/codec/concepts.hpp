#pragma once
//! @file codec/concepts.hpp
//! The `vector_codec` concept: encode/decode one head vector to/from a flat record.

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "../core/error.hpp"

namespace bgtq {

//! A codec that turns one float vector of `dim()` values into exactly `bytes()` bytes
//! and back. Guarantees: `encode` returns errc::non_finite (and writes nothing) for
//! NaN/Inf input, errc::ok otherwise; a zero vector decodes to exactly zero; encode is
//! deterministic (same input and parameters give the same bytes on every path);
//! `decode` never reads past `bytes()`. Codecs are immutable after construction and
//! safe to share between threads.
//! @tparam C the codec type (e.g. bgtq::tq_mse_codec, bgtq::block_gtq_codec, bgtq::fp16_codec)
template <class C>
concept vector_codec = requires(const C& c, const float* x, std::uint8_t* out, const std::uint8_t* in, float* y) {
  { c.dim() } -> std::same_as<int>;
  { c.bytes() } -> std::same_as<std::size_t>;
  { c.encode(x, out) } -> std::same_as<errc>;
  { c.decode(in, y) } -> std::same_as<void>;
};

}  // namespace bgtq
