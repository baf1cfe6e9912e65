#pragma once
//! @file bit_tight.hpp
//! Bit-tight packing of b-bit codes, b = 1..8.
//!
//! Layout: `// [code j] occupies stream bits [j*b, (j+1)*b), LSB-first; stream bit k is
//! bit (k % 8) of byte k / 8.` n codes take exactly ceil(n*b/8) bytes; a 3-bit code costs
//! 3 bits. Functions here never see floats (value mapping lives in codebook/).
//! Every accessor is `BGTQ_HOST_DEVICE` and never touches a byte past
//! `bit_tight::bytes(n, b)`.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../config.hpp"

#if defined(BGTQ_BMI2)
#include "../core/intrinsics.hpp"
#endif

namespace bgtq {

//! Packing policy: bit-tight, LSB-first (see the file comment for the layout).
struct bit_tight {
  static constexpr const char* name = "bit_tight";

  //! Bytes taken by n codes of b bits.
  BGTQ_HOST_DEVICE static constexpr std::size_t bytes(std::size_t n, int b) {
    return (n * static_cast<std::size_t>(b) + 7u) / 8u;
  }

  //! Code j of a stream of b-bit codes starting at bit `bit_offset` of `in`.
  BGTQ_HOST_DEVICE static std::uint32_t get(const std::uint8_t* in, std::size_t j, int b, std::size_t bit_offset = 0) {
    const std::size_t p = bit_offset + j * static_cast<std::size_t>(b);
    const std::size_t byte = p >> 3;
    const unsigned sh = static_cast<unsigned>(p & 7u);
    std::uint32_t w = in[byte];
    if (sh + static_cast<unsigned>(b) > 8u) w |= static_cast<std::uint32_t>(in[byte + 1]) << 8;
    return (w >> sh) & ((1u << b) - 1u);
  }

  //! Writes code j (only its low b bits), leaving every other bit unchanged.
  BGTQ_HOST_DEVICE static void set(std::uint8_t* out, std::size_t j, int b, std::uint32_t code, std::size_t bit_offset = 0) {
    const std::size_t p = bit_offset + j * static_cast<std::size_t>(b);
    const std::size_t byte = p >> 3;
    const unsigned sh = static_cast<unsigned>(p & 7u);
    const std::uint32_t mask = ((1u << b) - 1u) << sh;
    const std::uint32_t v = (code << sh) & mask;
    out[byte] = static_cast<std::uint8_t>((out[byte] & ~mask) | v);
    if (sh + static_cast<unsigned>(b) > 8u) {
      out[byte + 1] = static_cast<std::uint8_t>((out[byte + 1] & ~(mask >> 8)) | (v >> 8));
    }
  }

  //! Packs n codes (one per byte, low b bits used) at `bit_offset`. Bits outside
  //! [bit_offset, bit_offset + n*b) are left unchanged.
  BGTQ_HOST_DEVICE static void pack(const std::uint8_t* codes, std::size_t n, int b, std::uint8_t* out,
                                    std::size_t bit_offset = 0) {
    std::size_t j = 0;
    if ((bit_offset & 7u) == 0) {
      // whole groups of 8 codes fill exactly b bytes: assemble them in a 64-bit word
      std::uint8_t* base = out + (bit_offset >> 3);
      const std::uint32_t cmask = (1u << b) - 1u;
      for (; j + 8 <= n; j += 8) {
        const std::uint64_t w = join8(codes + j, b, cmask);
        std::uint8_t* dst = base + (j / 8) * static_cast<std::size_t>(b);
        for (int k = 0; k < b; ++k) dst[k] = static_cast<std::uint8_t>(w >> (8 * k));
      }
    }
    for (; j < n; ++j) set(out, j, b, codes[j], bit_offset);
  }

  //! The low b bits (cmask = 2^b - 1) of 8 codes, one per byte, side by side: code k at
  //! bits [k*b, (k+1)*b) of the result.
  BGTQ_HOST_DEVICE static std::uint64_t join8(const std::uint8_t* codes, [[maybe_unused]] int b, std::uint32_t cmask) {
#if defined(BGTQ_BMI2)
    std::uint64_t bytes;
    std::memcpy(&bytes, codes, 8);
    return _pext_u64(bytes, 0x0101010101010101ull * cmask);
#else
    std::uint64_t w = 0;
    for (int k = 0; k < 8; ++k) w |= static_cast<std::uint64_t>(codes[k] & cmask) << (k * b);
    return w;
#endif
  }

  //! pack() for a compile-time width at bit offset 0: whole groups of 8 codes become
  //! exactly B bytes with fixed-size stores (the encoder's hot path).
  template <int B>
  BGTQ_HOST_DEVICE static void pack_b(const std::uint8_t* codes, std::size_t n, std::uint8_t* out) {
    constexpr std::uint32_t cmask = (1u << B) - 1u;
    std::size_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const std::uint64_t w = join8(codes + j, B, cmask);
      std::uint8_t* dst = out + (j / 8) * static_cast<std::size_t>(B);
      for (int k = 0; k < B; ++k) dst[k] = static_cast<std::uint8_t>(w >> (8 * k));
    }
    for (; j < n; ++j) set(out, j, B, codes[j]);
  }

  //! Unpacks n codes starting at `bit_offset` into one byte each.
  BGTQ_HOST_DEVICE static void unpack(const std::uint8_t* in, std::size_t n, int b, std::uint8_t* codes,
                                      std::size_t bit_offset = 0) {
    std::size_t j = 0;
    if (bit_offset == 0) {
      // 8 codes = b whole bytes: load them into a 64-bit word
      const std::uint64_t mask = (1ull << b) - 1ull;
      for (; j + 8 <= n; j += 8) {
        const std::uint8_t* src = in + (j / 8) * static_cast<std::size_t>(b);
        std::uint64_t w = 0;
        for (int k = 0; k < b; ++k) w |= static_cast<std::uint64_t>(src[k]) << (8 * k);
#if defined(BGTQ_BMI2)
        const std::uint64_t bytes = _pdep_u64(w, 0x0101010101010101ull * mask);
        std::memcpy(codes + j, &bytes, 8);
#else
        for (int k = 0; k < 8; ++k) codes[j + k] = static_cast<std::uint8_t>((w >> (k * b)) & mask);
#endif
      }
    }
    for (; j < n; ++j) codes[j] = static_cast<std::uint8_t>(get(in, j, b, bit_offset));
  }

};

//! Packing policy for fast device decode: 32-bit little-endian words, each holding
//! floor(32/b) codes LSB-first; a code never straddles a word.
//! Layout: `// word w = bytes [4w, 4w+4); code j in word j / cpw at bit (j % cpw)*b`.
//! Equal to bit_tight for b in {1, 2, 4, 8} when n fills whole words; for b = 3 it
//! spends 32 bits per 10 codes (6.7% over bit-tight).
struct word_aligned {
  static constexpr const char* name = "word_aligned";

  //! Codes per 32-bit word.
  BGTQ_HOST_DEVICE static constexpr int codes_per_word(int b) { return 32 / b; }
  //! Bytes taken by n codes of b bits (whole words).
  BGTQ_HOST_DEVICE static constexpr std::size_t bytes(std::size_t n, int b) {
    const std::size_t cpw = static_cast<std::size_t>(codes_per_word(b));
    return 4u * ((n + cpw - 1u) / cpw);
  }
  BGTQ_HOST_DEVICE static std::uint32_t load_word(const std::uint8_t* in, std::size_t w) {
    const std::uint8_t* p = in + 4 * w;
    return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
           (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
  }
  //! Code j (bit_offset must be 0 for this layout; the parameter keeps the policy shape).
  BGTQ_HOST_DEVICE static std::uint32_t get(const std::uint8_t* in, std::size_t j, int b, std::size_t bit_offset = 0) {
    (void)bit_offset;
    const std::size_t cpw = static_cast<std::size_t>(codes_per_word(b));
    const std::uint32_t w = load_word(in, j / cpw);
    return (w >> ((j % cpw) * static_cast<std::size_t>(b))) & ((1u << b) - 1u);
  }
  //! Packs n codes; whole words are written, unused bits are zero.
  BGTQ_HOST_DEVICE static void pack(const std::uint8_t* codes, std::size_t n, int b, std::uint8_t* out,
                                    std::size_t bit_offset = 0) {
    (void)bit_offset;
    const std::size_t cpw = static_cast<std::size_t>(codes_per_word(b));
    const std::uint32_t cmask = (1u << b) - 1u;
    for (std::size_t w = 0; w * cpw < n; ++w) {
      std::uint32_t v = 0;
      for (std::size_t k = 0; k < cpw && w * cpw + k < n; ++k) v |= (codes[w * cpw + k] & cmask) << (k * static_cast<std::size_t>(b));
      out[4 * w + 0] = static_cast<std::uint8_t>(v);
      out[4 * w + 1] = static_cast<std::uint8_t>(v >> 8);
      out[4 * w + 2] = static_cast<std::uint8_t>(v >> 16);
      out[4 * w + 3] = static_cast<std::uint8_t>(v >> 24);
    }
  }
  BGTQ_HOST_DEVICE static void unpack(const std::uint8_t* in, std::size_t n, int b, std::uint8_t* codes,
                                      std::size_t bit_offset = 0) {
    (void)bit_offset;
    for (std::size_t j = 0; j < n; ++j) codes[j] = static_cast<std::uint8_t>(get(in, j, b));
  }
};

}  // namespace bgtq
