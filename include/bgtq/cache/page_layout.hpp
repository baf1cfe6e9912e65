#pragma once
//! @file cache/page_layout.hpp
//! How the b-bit codes of n coordinates for the P tokens of one cache page are placed in
//! a page region. Both layouts are bit-tight in total size (a 3-bit code costs 3 bits);
//! they differ in what is contiguous.
//!
//! - `bit_plane_layout` (default, fast): coordinate-major bit planes.
//!   `// [coord j][plane k][P/8 bytes]: bit t of plane (j, k) = bit k of token t's code at j`
//!   Sixteen tokens' codes for one coordinate are b 16-bit loads, which become lane
//!   masks: the CPU kernels build 16 indices with b masked ORs, and a GPU warp reads
//!   one 32-bit word per plane for 32 tokens. Requires P % 64 == 0.
//! - `token_major_layout`: each token's n codes are one bit_tight row.
//!   `// [token t][ceil(n*b/8) bytes, bit_tight LSB-first]` (simple, slower to score).
//!
//! A layout is a stateless policy; codecs call `bytes`, `store`, `load` and `load16`.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../config.hpp"
#include "../core/vec16.hpp"
#include "../pack/bit_tight.hpp"

namespace bgtq {

//! Coordinate-major bit planes (see the file comment).
struct bit_plane_layout {
  static constexpr const char* name = "bit_plane";
  //! Page sizes must be a multiple of this.
  static constexpr int page_multiple = 64;

  //! Bytes of a region holding n coordinates of b bits for P tokens.
  BGTQ_HOST_DEVICE static constexpr std::size_t bytes(int n, int b, int P) {
    return static_cast<std::size_t>(n) * static_cast<std::size_t>(b) * static_cast<std::size_t>(P / 8);
  }
  //! Writes token t's n codes (one per byte).
  BGTQ_HOST_DEVICE static void store(std::uint8_t* region, int n, int b, int P, int t, const std::uint8_t* codes) {
    const std::size_t plane = static_cast<std::size_t>(P / 8);
    const std::size_t byte = static_cast<std::size_t>(t >> 3);
    const std::uint8_t bit = static_cast<std::uint8_t>(1u << (t & 7));
    for (int j = 0; j < n; ++j) {
      std::uint8_t* base = region + static_cast<std::size_t>(j) * static_cast<std::size_t>(b) * plane + byte;
      const unsigned c = codes[j];
      for (int k = 0; k < b; ++k) {
        std::uint8_t& x = base[static_cast<std::size_t>(k) * plane];
        x = static_cast<std::uint8_t>(((c >> k) & 1u) ? (x | bit) : (x & ~bit));
      }
    }
  }
  //! Code of token t at coordinate j.
  BGTQ_HOST_DEVICE static std::uint32_t load(const std::uint8_t* region, int n, int b, int P, int t, int j) {
    (void)n;
    const std::size_t plane = static_cast<std::size_t>(P / 8);
    const std::uint8_t* base = region + static_cast<std::size_t>(j) * static_cast<std::size_t>(b) * plane + (t >> 3);
    std::uint32_t c = 0;
    for (int k = 0; k < b; ++k) c |= static_cast<std::uint32_t>((base[static_cast<std::size_t>(k) * plane] >> (t & 7)) & 1u) << k;
    return c;
  }
  //! Codes of tokens [t0, t0+16) at coordinate j as 16 lanes (t0 % 16 == 0).
  template <int B>
  BGTQ_FORCEINLINE static simd::vi16 load16(const std::uint8_t* region, int n, int P, int t0, int j) {
    (void)n;
    const std::size_t plane = static_cast<std::size_t>(P / 8);
    const std::uint8_t* base = region + static_cast<std::size_t>(j) * B * plane + (t0 >> 3);
    simd::vi16 idx = simd::izero();
    for (int k = 0; k < B; ++k) {
      std::uint16_t m;
      std::memcpy(&m, base + static_cast<std::size_t>(k) * plane, 2);
      idx = simd::or_masked(idx, m, 1 << k);
    }
    return idx;
  }
};

//! Token-major bit_tight rows (see the file comment).
struct token_major_layout {
  static constexpr const char* name = "token_major";
  static constexpr int page_multiple = 16;

  BGTQ_HOST_DEVICE static constexpr std::size_t row_bytes(int n, int b) {
    return bit_tight::bytes(static_cast<std::size_t>(n), b);
  }
  BGTQ_HOST_DEVICE static constexpr std::size_t bytes(int n, int b, int P) {
    return static_cast<std::size_t>(P) * row_bytes(n, b);
  }
  BGTQ_HOST_DEVICE static void store(std::uint8_t* region, int n, int b, int P, int t, const std::uint8_t* codes) {
    (void)P;
    std::uint8_t* row = region + static_cast<std::size_t>(t) * row_bytes(n, b);
    for (std::size_t i = 0; i < row_bytes(n, b); ++i) row[i] = 0;
    bit_tight::pack(codes, static_cast<std::size_t>(n), b, row);
  }
  BGTQ_HOST_DEVICE static std::uint32_t load(const std::uint8_t* region, int n, int b, int P, int t, int j) {
    (void)P;
    return bit_tight::get(region + static_cast<std::size_t>(t) * row_bytes(n, b), static_cast<std::size_t>(j), b);
  }
  template <int B>
  BGTQ_FORCEINLINE static simd::vi16 load16(const std::uint8_t* region, int n, int P, int t0, int j) {
    alignas(64) std::int32_t c[16];
    for (int l = 0; l < 16; ++l) c[l] = static_cast<std::int32_t>(load(region, n, B, P, t0 + l, j));
    return simd::iload(c);
  }
};

}  // namespace bgtq
