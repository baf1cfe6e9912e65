#pragma once
//! @file io/checksum.hpp
//! CRC-32C (Castagnoli), the checksum of blockgtq's binary files (plan files).
//!
//! Parameters (the "CRC-32C" / "CRC-32/ISCSI" of the CRC catalogue): reflected
//! polynomial 0x82F63B78 (normal form 0x1EDC6F41), initial value 0xFFFFFFFF, input and
//! output reflected, final XOR 0xFFFFFFFF. Check value: crc32c("123456789") = 0xE3069283.
//! A CRC-32 detects every error burst of up to 32 bits, so any change confined to four
//! consecutive bytes of the covered range is always detected.
//!
//! Portable table-driven software implementation (one 256-entry table built at compile
//! time); no hardware instructions, identical results on every platform.

#include <array>
#include <cstddef>
#include <cstdint>

namespace bgtq {

namespace detail {
//! The 256-entry byte table of the reflected CRC-32C polynomial.
inline constexpr std::array<std::uint32_t, 256> make_crc32c_table() noexcept {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : (c >> 1);
    t[i] = c;
  }
  return t;
}
inline constexpr std::array<std::uint32_t, 256> crc32c_table = make_crc32c_table();
}  // namespace detail

//! Continues a CRC-32C over `size` more bytes. Start with `crc = 0` (the CRC of the empty
//! message); `crc32c_update(crc32c_update(0, a, n), b, m)` equals the CRC of a||b.
inline std::uint32_t crc32c_update(std::uint32_t crc, const void* data, std::size_t size) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
  for (std::size_t i = 0; i < size; ++i) c = detail::crc32c_table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return ~c;
}

//! CRC-32C of `size` bytes at `data` (`data` may be null when `size` is 0).
inline std::uint32_t crc32c(const void* data, std::size_t size) noexcept { return crc32c_update(0u, data, size); }

}  // namespace bgtq
