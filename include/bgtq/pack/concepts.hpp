#pragma once
//! @file pack/concepts.hpp
//! The `packing_layout` concept: how b-bit codes sit in bytes. Layouts never see floats.

#include <concepts>
#include <cstddef>
#include <cstdint>

namespace bgtq {

//! A packing layout maps n codes of b bits (1..8) to `L::bytes(n, b)` bytes.
//! Guarantees: `unpack(pack(c)) == c` for every code value; `get(in, j, b)` equals the
//! j-th unpacked code and reads no byte at or past `bytes(j + 1, b)` rounded to the
//! layout's unit; all functions are usable on host and device.
//! @tparam L a stateless policy type (e.g. bgtq::bit_tight, bgtq::word_aligned)
template <class L>
concept packing_layout = requires(const std::uint8_t* in, std::uint8_t* out, const std::uint8_t* codes,
                                  std::uint8_t* codes_out, std::size_t n, int b, std::uint32_t code) {
  { L::bytes(n, b) } -> std::same_as<std::size_t>;
  { L::get(in, n, b) } -> std::same_as<std::uint32_t>;
  L::pack(codes, n, b, out);
  L::unpack(in, n, b, codes_out);
  { L::name } -> std::convertible_to<const char*>;
};

}  // namespace bgtq
