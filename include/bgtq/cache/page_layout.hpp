#pragma once
//! @file cache/page_layout.hpp
//! How the b-bit codes of n coordinates for the P tokens of one cache page are placed in
//! a page region. Both layouts are bit-tight in total size (a 3-bit code costs 3 bits);
//! they differ in what is contiguous.
//!
//! - `bit_plane_layout` (default, fast): coordinate-major bit planes.
//!   `// [coord j][plane k][P/8 bytes]: bit t of plane (j, k) = bit k of token t's code at j`
//!   Sixteen tokens' codes for one coordinate are b 16-bit loads, which become lane
//!   masks: the CPU kernels build 64 byte codes with one bit-matrix transpose (GFNI)
//!   or b masked byte adds (AVX-512 without GFNI), 32 with b byte shuffles and compares
//!   (AVX2), and a GPU warp reads one 32-bit word per plane for 32 tokens.
//!   Requires P % 64 == 0.
//! - `token_major_layout`: each token's n codes are one bit_tight row.
//!   `// [token t][ceil(n*b/8) bytes, bit_tight LSB-first]` (simple, slower to score).
//!
//! A layout is a stateless policy; codecs call `bytes`, `store`, `load` and `load16`.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "../config.hpp"
#include "../core/error.hpp"
#include "../core/vec16.hpp"
#include "../pack/bit_tight.hpp"

namespace bgtq {

//! Coordinate-major bit planes (see the file comment).
struct bit_plane_layout {
  static constexpr const char* name = "bit_plane";
  //! Page sizes must be a multiple of this.
  static constexpr int page_multiple = 64;

  //! The byte of token t in coordinate j's first plane (planes are `plane` = P/8 bytes
  //! apart, b per coordinate); the one address computation of every load and store below.
  template <class Byte>
  BGTQ_HOST_DEVICE static Byte* plane_byte(Byte* region, int j, int b, std::size_t plane, int t) {
    return region + static_cast<std::size_t>(j) * static_cast<std::size_t>(b) * plane + static_cast<std::size_t>(t >> 3);
  }
  //! Bytes of a region holding n coordinates of b bits for P tokens.
  BGTQ_HOST_DEVICE static constexpr std::size_t bytes(int n, int b, int P) {
    return static_cast<std::size_t>(n) * static_cast<std::size_t>(b) * static_cast<std::size_t>(P / 8);
  }
  //! Writes token t's n codes (one per byte).
  BGTQ_HOST_DEVICE static void store(std::uint8_t* region, int n, int b, int P, int t, const std::uint8_t* codes) {
    const std::size_t plane = static_cast<std::size_t>(P / 8);
    const std::uint8_t bit = static_cast<std::uint8_t>(1u << (t & 7));
    for (int j = 0; j < n; ++j) {
      std::uint8_t* base = plane_byte(region, j, b, plane, t);
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
    const std::uint8_t* base = plane_byte(region, j, b, plane, t);
    std::uint32_t c = 0;
    for (int k = 0; k < b; ++k) c |= static_cast<std::uint32_t>((base[static_cast<std::size_t>(k) * plane] >> (t & 7)) & 1u) << k;
    return c;
  }
  //! Codes of tokens [t0, t0+16) at coordinate j as 16 lanes (t0 % 16 == 0).
  template <int B>
  BGTQ_FORCEINLINE static simd::vi16 load16(const std::uint8_t* region, int n, int P, int t0, int j) {
    (void)n;
    const std::size_t plane = static_cast<std::size_t>(P / 8);
    const std::uint8_t* base = plane_byte(region, j, B, plane, t0);
    simd::vi16 idx = simd::izero();
    for (int k = 0; k < B; ++k) {
      std::uint16_t m;
      std::memcpy(&m, base + static_cast<std::size_t>(k) * plane, 2);
      idx = simd::or_masked(idx, m, 1 << k);
    }
    return idx;
  }

#if defined(BGTQ_SIMD_GFNI)
  //! Codes of tokens [t0, t0+64) at coordinate j as 64 bytes, byte i = token t0+i
  //! (t0 % 64 == 0). The B plane qwords are loaded into one register, vpermb groups
  //! byte g of every plane into qword g (plane k at byte 7-k), and gf2p8affineqb with
  //! the unit vectors transposes each 8x8 bit block: byte i of qword g gets bit i of
  //! each plane, i.e. the code of token 8g+i. Page64: the caller knows P == 64 (the
  //! default page), so the planes are adjacent qwords and one masked load fetches them;
  //! otherwise they are P/8 bytes apart and P == 64 is a run-time test (a gather if not).
  template <int B, bool Page64 = false>
  BGTQ_FORCEINLINE static simd::vi16 load64(const std::uint8_t* region, int P, int t0, int j) {
    const std::size_t plane = Page64 ? 8u : static_cast<std::size_t>(P / 8);
    const std::uint8_t* base = plane_byte(region, j, B, plane, t0);
    const __mmask8 m = static_cast<__mmask8>((1u << B) - 1u);
    __m512i planes;
    if (Page64 || plane == 8) {
      planes = _mm512_maskz_loadu_epi64(m, base);
    } else {
      const __m512i off = _mm512_mullo_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi64(static_cast<long long>(plane)));
      planes = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), m, off, base, 1);
    }
    const __m512i perm = _mm512_set_epi8(7, 15, 23, 31, 39, 47, 55, 63, 6, 14, 22, 30, 38, 46, 54, 62, 5, 13, 21, 29, 37, 45, 53, 61, 4, 12, 20, 28, 36, 44, 52, 60, 3, 11, 19, 27, 35, 43, 51, 59, 2, 10, 18, 26, 34, 42, 50, 58, 1, 9, 17, 25, 33, 41, 49, 57, 0, 8, 16, 24, 32, 40, 48, 56);
    const __m512i a = _mm512_permutexvar_epi8(perm, planes);
    return {_mm512_gf2p8affine_epi64_epi8(_mm512_set1_epi64(static_cast<long long>(0x8040201008040201ull)), a, 0)};
  }
#elif defined(BGTQ_SIMD_AVX512)
  //! AVX-512 without GFNI / VBMI (Skylake-SP, Cascade Lake). Codes of tokens [t0, t0+64)
  //! at coordinate j as 64 bytes, byte i = token t0+i (t0 % 64 == 0): each plane qword is
  //! loaded as a 64-lane byte mask and adds bit k to the bytes of its set lanes (one
  //! mask load and one masked vpaddb per plane). Page64 as in the GFNI load64.
  template <int B, bool Page64 = false>
  BGTQ_FORCEINLINE static simd::vi16 load64(const std::uint8_t* region, int P, int t0, int j) {
    const std::size_t plane = Page64 ? 8u : static_cast<std::size_t>(P / 8);
    const std::uint8_t* base = plane_byte(region, j, B, plane, t0);
    const auto mask = [&](int k) {
      std::uint64_t m;
      std::memcpy(&m, base + static_cast<std::size_t>(k) * plane, 8);
      return _cvtu64_mask64(m);
    };
    __m512i codes = _mm512_maskz_mov_epi8(mask(0), _mm512_set1_epi8(1));
    for (int k = 1; k < B; ++k) codes = _mm512_mask_add_epi8(codes, mask(k), codes, _mm512_set1_epi8(static_cast<char>(1 << k)));
    return {codes};
  }
#endif
#if defined(BGTQ_SIMD_AVX2_ONLY)
  //! Codes of tokens [t0, t0+32) at coordinate j as 32 bytes, byte i = token t0+i
  //! (t0 % 32 == 0). Per plane: the 4 plane bytes are broadcast, vpshufb copies plane
  //! byte i/8 to byte i, and a test against bit i%8 gives 0xff / 0 that selects bit k.
  template <int B>
  BGTQ_FORCEINLINE static __m256i load32(const std::uint8_t* region, int P, int t0, int j) {
    const std::size_t plane = static_cast<std::size_t>(P / 8);
    const std::uint8_t* base = plane_byte(region, j, B, plane, t0);
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    __m256i codes = _mm256_setzero_si256();
    for (int k = 0; k < B; ++k) {
      std::int32_t w;
      std::memcpy(&w, base + static_cast<std::size_t>(k) * plane, 4);
      const __m256i x = _mm256_shuffle_epi8(_mm256_set1_epi32(w), spread);
      const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(x, bit), bit);
      codes = _mm256_or_si256(codes, _mm256_and_si256(set, _mm256_set1_epi8(static_cast<char>(1 << k))));
    }
    return codes;
  }

  //! Codes of tokens [t0, t0+64) at coordinate j (t0 % 64 == 0): tokens t0 .. t0+31 in
  //! lo, t0+32 .. t0+63 in hi. Page64: the caller knows P == 64 (the plane stride becomes
  //! a constant), as in the GFNI load64.
  template <int B, bool Page64 = false>
  BGTQ_FORCEINLINE static simd::vi16 load64(const std::uint8_t* region, int P, int t0, int j) {
    if constexpr (Page64) P = 64;
    return {load32<B>(region, P, t0, j), load32<B>(region, P, t0 + 32, j)};
  }

#endif
#if defined(BGTQ_SIMD_CODES64)
  //! 64 codes as bytes in the registers of a simd::vi16 (load64), byte i = token t0+i.
  using codes64 = simd::vi16;

  //! Dword indices of tokens 4d + C (lane d = 0..15) of a 64-token code block: each dword
  //! holds the codes of tokens 4d .. 4d+3, so a right shift by 8C bits brings token 4d+C
  //! to the low byte. simd::lookup<B> reads only the low B bits of a lane up to
  //! simd::lookup_reads_low_bits_max bits (5 on AVX-512, 6 on AVX2); wider codes are
  //! masked for the gather. No shuffle per chunk (widening 16 bytes to dwords took a
  //! vpermb on AVX-512, an extract and two vpmovzxbd on AVX2): the packed kernels read
  //! their codes only this way, the value passes with their weights stored in this order
  //! (simd::transpose_stride4 in fill_weights_radii), the AVX-512 key pass with its scores
  //! put back in token order once per block (simd::untranspose_stride4).
  template <int B, int C>
  BGTQ_FORCEINLINE static simd::vi16 strided16(codes64 bytes) {
    static_assert(C >= 0 && C < 4);
    if constexpr (C > 0) bytes = simd::shift_right<8 * C>(bytes);
    if constexpr (B > simd::lookup_reads_low_bits_max && C < 3) bytes = simd::and_lanes(bytes, 0xff);
    return bytes;
  }
#endif
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

//! Throws bgtq::error(invalid_argument) unless pages of `page_tokens` tokens fit Layout: a
//! multiple of Layout::page_multiple (and, when `block` > 0, of a codec's block of tokens),
//! at most 4096. `who` leads the message ("cache_config").
template <class Layout>
void check_page_tokens(int page_tokens, int block, const std::string& who) {
  BGTQ_REQUIRE(page_tokens >= Layout::page_multiple && page_tokens % Layout::page_multiple == 0 &&
                   (block <= 0 || page_tokens % block == 0) && page_tokens <= 4096,
               errc::invalid_argument,
               who + ": page_tokens " + std::to_string(page_tokens) + " must be a multiple of " +
                   std::to_string(Layout::page_multiple) + " (layout " + Layout::name + ")" +
                   (block > 0 ? " and of " + std::to_string(block) : std::string()) + ", at most 4096");
}

}  // namespace bgtq
