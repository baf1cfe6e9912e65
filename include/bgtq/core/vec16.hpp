#pragma once
//! @file core/vec16.hpp
//! A 16-lane float / int32 vector with one definition per ISA (AVX-512: one zmm;
//! AVX2: two ymm; scalar: plain arrays), so the attention kernels are written once.
//! Lane l of a vector always holds token (or coordinate) l of a 16-wide chunk.
//! Only what the kernels need is here; everything is force-inlined.

#include <cstdint>
#include <cstring>

#include "../config.hpp"
#include "half.hpp"
#include "simd.hpp"

#if defined(BGTQ_SIMD_AVX2) || defined(BGTQ_SIMD_AVX512)
#include "intrinsics.hpp"
#endif

namespace bgtq::simd {

#if defined(BGTQ_SIMD_AVX512)

struct vf16 {
  __m512 v;
};
struct vi16 {
  __m512i v;
};

BGTQ_FORCEINLINE vf16 zero() { return {_mm512_setzero_ps()}; }
BGTQ_FORCEINLINE vf16 set1(float x) { return {_mm512_set1_ps(x)}; }
BGTQ_FORCEINLINE vf16 load(const float* p) { return {_mm512_loadu_ps(p)}; }
BGTQ_FORCEINLINE void store(float* p, vf16 a) { _mm512_storeu_ps(p, a.v); }
BGTQ_FORCEINLINE vf16 add(vf16 a, vf16 b) { return {_mm512_add_ps(a.v, b.v)}; }
BGTQ_FORCEINLINE vf16 sub(vf16 a, vf16 b) { return {_mm512_sub_ps(a.v, b.v)}; }
BGTQ_FORCEINLINE vf16 mul(vf16 a, vf16 b) { return {_mm512_mul_ps(a.v, b.v)}; }
BGTQ_FORCEINLINE vf16 fma(vf16 a, vf16 b, vf16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
BGTQ_FORCEINLINE vf16 max(vf16 a, vf16 b) { return {_mm512_max_ps(a.v, b.v)}; }
// Horizontal reductions in the order of GCC's _mm512_reduce_{add,max}_ps, of the AVX2
// path and of core/simd.hpp's canonical tree_reduce16 (256-bit halves, then 128-bit
// halves, then lanes {0,1}+{2,3}, then 0+1): bit-identical sums; maxima identical except
// which of +0 / -0 a tie returns (immaterial to softmax).
// Written with the zero-masked shuffle/extract forms (all lanes kept; the same
// instructions are emitted): GCC 12 warns "__Y is used uninitialized", a false positive
// from _mm512_undefined_ps, wherever the unmasked forms or _mm512_reduce_* are inlined.
BGTQ_FORCEINLINE float hsum(vf16 a) {
  __m512 t = _mm512_add_ps(a.v, _mm512_maskz_shuffle_f32x4(0xffff, a.v, a.v, _MM_SHUFFLE(1, 0, 3, 2)));
  t = _mm512_add_ps(t, _mm512_maskz_shuffle_f32x4(0xffff, t, t, _MM_SHUFFLE(2, 3, 0, 1)));
  __m128 x = _mm512_maskz_extractf32x4_ps(0xf, t, 0);
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}
BGTQ_FORCEINLINE float hmax(vf16 a) {
  // (max_ps returns its second operand for NaN or +-0 ties: operands in GCC's order)
  __m512 t = _mm512_max_ps(_mm512_maskz_shuffle_f32x4(0xffff, a.v, a.v, _MM_SHUFFLE(1, 0, 3, 2)), a.v);
  t = _mm512_max_ps(_mm512_maskz_shuffle_f32x4(0xffff, t, t, _MM_SHUFFLE(2, 3, 0, 1)), t);
  __m128 x = _mm512_maskz_extractf32x4_ps(0xf, t, 0);
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}
//! Lanes whose bit in `valid` is 0 become `fill`.
BGTQ_FORCEINLINE vf16 select_valid(vf16 a, std::uint32_t valid, float fill) {
  return {_mm512_mask_blend_ps(static_cast<__mmask16>(valid), _mm512_set1_ps(fill), a.v)};
}
//! 16 fp16 values (little-endian bits) to float.
BGTQ_FORCEINLINE vf16 load_half(const std::uint8_t* p) {
  return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
}
BGTQ_FORCEINLINE vi16 izero() { return {_mm512_setzero_si512()}; }
BGTQ_FORCEINLINE vi16 iload(const std::int32_t* p) { return {_mm512_loadu_si512(p)}; }
//! idx |= bit where the lane's bit in mask16 is set.
BGTQ_FORCEINLINE vi16 or_masked(vi16 idx, std::uint32_t mask16, int bit) {
  return {_mm512_mask_or_epi32(idx.v, static_cast<__mmask16>(mask16), idx.v, _mm512_set1_epi32(bit))};
}
//! table[idx] per lane; table has at least 2^Bits entries (padded to 256 in practice).
template <int Bits>
BGTQ_FORCEINLINE vf16 lookup(const float* table, vi16 idx) {
  if constexpr (Bits <= 4) {
    return {_mm512_permutexvar_ps(idx.v, _mm512_loadu_ps(table))};
  } else if constexpr (Bits == 5) {
    return {_mm512_permutex2var_ps(_mm512_loadu_ps(table), idx.v, _mm512_loadu_ps(table + 16))};
  } else {
    return {_mm512_i32gather_ps(idx.v, table, 4)};
  }
}
//! Integer lanes to float.
BGTQ_FORCEINLINE vf16 to_float(vi16 a) { return {_mm512_cvtepi32_ps(a.v)}; }
//! Lanes shifted right by N bits (logical).
template <int N>
BGTQ_FORCEINLINE vi16 shift_right(vi16 a) {
  return {_mm512_srli_epi32(a.v, N)};
}
//! Lanes & m.
BGTQ_FORCEINLINE vi16 and_lanes(vi16 a, std::int32_t m) { return {_mm512_and_si512(a.v, _mm512_set1_epi32(m))}; }
//! lookup<Bits> reads only the low Bits of each index lane for Bits up to this (vpermps,
//! vpermt2ps); wider tables are gathered, whose indices must be clean.
inline constexpr int lookup_reads_low_bits_max = 5;
namespace detail {
//! Each vector's 16 lanes as a 4 x 4 matrix, transposed (lane 4c + m <- lane 4m + c).
BGTQ_FORCEINLINE void transpose_lanes16(vf16 (&v)[4]) {
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  for (auto& x : v) x.v = _mm512_permutexvar_ps(idx, x.v);
}
//! The 4 x 4 transpose of the 128-bit lanes across the four vectors (lane k of v[c] <->
//! lane c of v[k]). Zero-masked forms: see hsum.
BGTQ_FORCEINLINE void transpose_quads(vf16 (&v)[4]) {
  const __m512 a01 = _mm512_maskz_shuffle_f32x4(0xffff, v[0].v, v[1].v, _MM_SHUFFLE(1, 0, 1, 0));
  const __m512 a23 = _mm512_maskz_shuffle_f32x4(0xffff, v[2].v, v[3].v, _MM_SHUFFLE(1, 0, 1, 0));
  const __m512 b01 = _mm512_maskz_shuffle_f32x4(0xffff, v[0].v, v[1].v, _MM_SHUFFLE(3, 2, 3, 2));
  const __m512 b23 = _mm512_maskz_shuffle_f32x4(0xffff, v[2].v, v[3].v, _MM_SHUFFLE(3, 2, 3, 2));
  v[0].v = _mm512_maskz_shuffle_f32x4(0xffff, a01, a23, _MM_SHUFFLE(2, 0, 2, 0));
  v[1].v = _mm512_maskz_shuffle_f32x4(0xffff, a01, a23, _MM_SHUFFLE(3, 1, 3, 1));
  v[2].v = _mm512_maskz_shuffle_f32x4(0xffff, b01, b23, _MM_SHUFFLE(2, 0, 2, 0));
  v[3].v = _mm512_maskz_shuffle_f32x4(0xffff, b01, b23, _MM_SHUFFLE(3, 1, 3, 1));
}
}  // namespace detail
//! 64 values in order (v[k] lane i = value 16k + i) rearranged so that v[c] lane d =
//! value 4d + c: the token order of bit_plane_layout::strided16. A 4x4 transpose inside
//! each 128-bit lane, then one of the 128-bit lanes across the four vectors (12 shuffles).
BGTQ_FORCEINLINE void transpose_stride4(vf16 (&v)[4]) {
  detail::transpose_lanes16(v);
  detail::transpose_quads(v);
}
//! The inverse of transpose_stride4 (both steps are their own inverses: the other order).
BGTQ_FORCEINLINE void untranspose_stride4(vf16 (&v)[4]) {
  detail::transpose_quads(v);
  detail::transpose_lanes16(v);
}

#elif defined(BGTQ_SIMD_AVX2)

struct vf16 {
  __m256 lo, hi;
};
struct vi16 {
  __m256i lo, hi;
};

BGTQ_FORCEINLINE vf16 zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
BGTQ_FORCEINLINE vf16 set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
BGTQ_FORCEINLINE vf16 load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
BGTQ_FORCEINLINE void store(float* p, vf16 a) {
  _mm256_storeu_ps(p, a.lo);
  _mm256_storeu_ps(p + 8, a.hi);
}
BGTQ_FORCEINLINE vf16 add(vf16 a, vf16 b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
BGTQ_FORCEINLINE vf16 sub(vf16 a, vf16 b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
BGTQ_FORCEINLINE vf16 mul(vf16 a, vf16 b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
BGTQ_FORCEINLINE vf16 fma(vf16 a, vf16 b, vf16 c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
BGTQ_FORCEINLINE vf16 max(vf16 a, vf16 b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
BGTQ_FORCEINLINE float hmax(vf16 a) {
  __m256 m = _mm256_max_ps(a.lo, a.hi);
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  x = _mm_max_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}
BGTQ_FORCEINLINE float hsum(vf16 a) {
  __m256 s = _mm256_add_ps(a.lo, a.hi);
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}
namespace detail {
BGTQ_FORCEINLINE __m256i lane_mask8(std::uint32_t m8) {
  const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256i b = _mm256_set1_epi32(static_cast<int>(m8));
  return _mm256_cmpeq_epi32(_mm256_and_si256(b, bits), bits);
}
}  // namespace detail
BGTQ_FORCEINLINE vf16 select_valid(vf16 a, std::uint32_t valid, float fill) {
  const __m256 f = _mm256_set1_ps(fill);
  return {_mm256_blendv_ps(f, a.lo, _mm256_castsi256_ps(detail::lane_mask8(valid & 0xffu))),
          _mm256_blendv_ps(f, a.hi, _mm256_castsi256_ps(detail::lane_mask8((valid >> 8) & 0xffu)))};
}
BGTQ_FORCEINLINE vf16 load_half(const std::uint8_t* p) {
  return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)))};
}
BGTQ_FORCEINLINE vi16 izero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
BGTQ_FORCEINLINE vi16 iload(const std::int32_t* p) {
  return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8))};
}
BGTQ_FORCEINLINE vi16 or_masked(vi16 idx, std::uint32_t mask16, int bit) {
  const __m256i b = _mm256_set1_epi32(bit);
  return {_mm256_or_si256(idx.lo, _mm256_and_si256(detail::lane_mask8(mask16 & 0xffu), b)),
          _mm256_or_si256(idx.hi, _mm256_and_si256(detail::lane_mask8((mask16 >> 8) & 0xffu), b))};
}
namespace detail {
//! table[idx & (2^Bits - 1)] for 8 lanes, Bits <= 6: 8-entry vpermps lookups joined by
//! blends on bits 3.., each bit moved to the sign bit by a shift (higher bits shift out).
template <int Bits>
BGTQ_FORCEINLINE __m256 permute_lookup8(const float* table, __m256i idx) {
  if constexpr (Bits <= 3) {
    return _mm256_permutevar8x32_ps(_mm256_loadu_ps(table), idx);
  } else {
    const __m256 lo = permute_lookup8<Bits - 1>(table, idx);
    const __m256 hi = permute_lookup8<Bits - 1>(table + (1 << (Bits - 1)), idx);
    return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 32 - Bits)));
  }
}
}  // namespace detail
//! table[idx] per lane: permutes and blends up to 6 bits (64 entries: 8 vpermps, 7
//! blends per 8 lanes, still cheaper than vgatherdps on most AVX2 cores), gathers above.
template <int Bits>
BGTQ_FORCEINLINE vf16 lookup(const float* table, vi16 idx) {
  if constexpr (Bits <= 6) {
    return {detail::permute_lookup8<Bits>(table, idx.lo), detail::permute_lookup8<Bits>(table, idx.hi)};
  } else {
    return {_mm256_i32gather_ps(table, idx.lo, 4), _mm256_i32gather_ps(table, idx.hi, 4)};
  }
}
BGTQ_FORCEINLINE vf16 to_float(vi16 a) { return {_mm256_cvtepi32_ps(a.lo), _mm256_cvtepi32_ps(a.hi)}; }
template <int N>
BGTQ_FORCEINLINE vi16 shift_right(vi16 a) {
  return {_mm256_srli_epi32(a.lo, N), _mm256_srli_epi32(a.hi, N)};
}
BGTQ_FORCEINLINE vi16 and_lanes(vi16 a, std::int32_t m) {
  const __m256i v = _mm256_set1_epi32(m);
  return {_mm256_and_si256(a.lo, v), _mm256_and_si256(a.hi, v)};
}
//! lookup<Bits> reads only the low Bits of each index lane for Bits up to this (vpermps
//! and sign-bit blends, permute_lookup8); wider tables are gathered.
inline constexpr int lookup_reads_low_bits_max = 6;
//! 16 bytes p[0..16) zero-extended to int lanes.
BGTQ_FORCEINLINE vi16 load_u8(const std::uint8_t* p) {
  return {_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))),
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)))};
}
//! 16 bytes p[0..16) sign-extended to int lanes.
BGTQ_FORCEINLINE vi16 load_s8(const std::uint8_t* p) {
  return {_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))),
          _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)))};
}
//! table[i] of a 2^Bits-entry table antisymmetric about its middle (table[2^Bits-1-i] ==
//! -table[i]) from folded codes (fold_codes32: lane = i below the middle, else
//! 0x80 | (2^Bits-1-i) sign-extended): the lower half looked up (one permute level less
//! than lookup<Bits>), negated in the marked (negative) lanes. Bits 4..7 (below 4 the
//! half table would be under 8 entries, which a vpermps does not mask the index to).
template <int Bits>
BGTQ_FORCEINLINE vf16 lookup_folded(const float* table, vi16 folded) {
  static_assert(Bits >= 4 && Bits <= 7, "folded lookups need 4..7 bits");
  const vf16 v = lookup<Bits - 1>(table, folded);
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  return {_mm256_xor_ps(v.lo, _mm256_castsi256_ps(_mm256_and_si256(folded.lo, sign))),
          _mm256_xor_ps(v.hi, _mm256_castsi256_ps(_mm256_and_si256(folded.hi, sign)))};
}
//! Folds 32 code bytes of Bits bits (Bits 4..7) for lookup_folded: codes c >= 2^(Bits-1)
//! become 0x80 | (c ^ (2^(Bits-1) - 1)), whose low Bits-1 bits are the mirror index
//! 2^Bits-1-c; codes below the middle stay as they are.
template <int Bits>
BGTQ_FORCEINLINE __m256i fold_codes32(__m256i codes) {
  static_assert(Bits >= 4 && Bits <= 7, "folded lookups need 4..7 bits");
  constexpr int low = (1 << (Bits - 1)) - 1;
  const __m256i upper = _mm256_cmpgt_epi8(codes, _mm256_set1_epi8(static_cast<char>(low)));
  return _mm256_xor_si256(codes, _mm256_and_si256(upper, _mm256_set1_epi8(static_cast<char>(0x80 | low))));
}
namespace detail {
//! 32 values y[j] lane i = value 8j + i (a 8 x 4 matrix M[r][c] = value 4r + c, two rows
//! per register) to their columns in place: y[c] lane d = value 4d + c. A 4 x 4 transpose
//! inside each 128-bit lane (rows 0, 2, 4, 6 in the low lanes, 1, 3, 5, 7 in the high
//! ones), then one vpermps per column to interleave the two halves (12 shuffles).
BGTQ_FORCEINLINE void columns_of_rows32(__m256 (&y)[4]) {
  const __m256 t0 = _mm256_unpacklo_ps(y[0], y[1]), t1 = _mm256_unpackhi_ps(y[0], y[1]);
  const __m256 t2 = _mm256_unpacklo_ps(y[2], y[3]), t3 = _mm256_unpackhi_ps(y[2], y[3]);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  y[0] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), order);
  y[1] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)), order);
  y[2] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), order);
  y[3] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2)), order);
}
}  // namespace detail
//! 64 values in order (v[k] lane i = value 16k + i) rearranged so that v[c] lane d =
//! value 4d + c, as the AVX-512 transpose_stride4 does (bit_plane_layout::strided16's token
//! order): values 0-31 give the low halves, 32-63 the high ones (24 shuffles). (No
//! untranspose_stride4 here: the AVX2 key pass scores in token order.)
BGTQ_FORCEINLINE void transpose_stride4(vf16 (&v)[4]) {
  __m256 a[4] = {v[0].lo, v[0].hi, v[1].lo, v[1].hi}, b[4] = {v[2].lo, v[2].hi, v[3].lo, v[3].hi};
  detail::columns_of_rows32(a);
  detail::columns_of_rows32(b);
  for (int c = 0; c < 4; ++c) v[c] = {a[c], b[c]};
}

#else  // portable scalar

struct vf16 {
  float x[16];
};
struct vi16 {
  std::int32_t x[16];
};

BGTQ_FORCEINLINE vf16 zero() {
  vf16 r;
  for (int l = 0; l < 16; ++l) r.x[l] = 0.0f;
  return r;
}
BGTQ_FORCEINLINE vf16 set1(float v) {
  vf16 r;
  for (int l = 0; l < 16; ++l) r.x[l] = v;
  return r;
}
BGTQ_FORCEINLINE vf16 load(const float* p) {
  vf16 r;
  for (int l = 0; l < 16; ++l) r.x[l] = p[l];
  return r;
}
BGTQ_FORCEINLINE void store(float* p, vf16 a) {
  for (int l = 0; l < 16; ++l) p[l] = a.x[l];
}
#define BGTQ_VF16_BINOP(name, expr)                \
  BGTQ_FORCEINLINE vf16 name(vf16 a, vf16 b) {     \
    vf16 r;                                        \
    for (int l = 0; l < 16; ++l) r.x[l] = (expr);  \
    return r;                                      \
  }
BGTQ_VF16_BINOP(add, a.x[l] + b.x[l])
BGTQ_VF16_BINOP(sub, a.x[l] - b.x[l])
BGTQ_VF16_BINOP(mul, a.x[l] * b.x[l])
BGTQ_VF16_BINOP(max, a.x[l] > b.x[l] ? a.x[l] : b.x[l])
#undef BGTQ_VF16_BINOP
BGTQ_FORCEINLINE vf16 fma(vf16 a, vf16 b, vf16 c) {
  vf16 r;
  for (int l = 0; l < 16; ++l) r.x[l] = a.x[l] * b.x[l] + c.x[l];
  return r;
}
BGTQ_FORCEINLINE float hmax(vf16 a) {
  float m = a.x[0];
  for (int l = 1; l < 16; ++l) m = a.x[l] > m ? a.x[l] : m;
  return m;
}
BGTQ_FORCEINLINE float hsum(vf16 a) { return detail::tree_reduce16(a.x); }  // the SIMD paths' order
BGTQ_FORCEINLINE vf16 select_valid(vf16 a, std::uint32_t valid, float fill) {
  for (int l = 0; l < 16; ++l)
    if (!((valid >> l) & 1u)) a.x[l] = fill;
  return a;
}
BGTQ_FORCEINLINE vf16 load_half(const std::uint8_t* p) {
  vf16 r;
  for (int l = 0; l < 16; ++l) r.x[l] = half_bits_to_float(static_cast<std::uint16_t>(p[2 * l] | (p[2 * l + 1] << 8)));
  return r;
}
BGTQ_FORCEINLINE vi16 izero() {
  vi16 r;
  for (int l = 0; l < 16; ++l) r.x[l] = 0;
  return r;
}
BGTQ_FORCEINLINE vi16 iload(const std::int32_t* p) {
  vi16 r;
  for (int l = 0; l < 16; ++l) r.x[l] = p[l];
  return r;
}
BGTQ_FORCEINLINE vi16 or_masked(vi16 idx, std::uint32_t mask16, int bit) {
  for (int l = 0; l < 16; ++l)
    if ((mask16 >> l) & 1u) idx.x[l] |= bit;
  return idx;
}
template <int Bits>
BGTQ_FORCEINLINE vf16 lookup(const float* table, vi16 idx) {
  vf16 r;
  for (int l = 0; l < 16; ++l) r.x[l] = table[idx.x[l]];
  return r;
}
BGTQ_FORCEINLINE vf16 to_float(vi16 a) {
  vf16 r;
  for (int l = 0; l < 16; ++l) r.x[l] = static_cast<float>(a.x[l]);
  return r;
}

#endif

//! exp(x) for x <= ~88, within 3 ulp of exp (worst measured over [-87, 88]: 2.7 ulp on
//! AVX2/AVX-512, 3.0 scalar), 0 for x < -87.3 (underflow), used for softmax weights.
//! Cody-Waite range reduction x = n ln2 + r, a degree-6 polynomial in r, and 2^n built in
//! the exponent bits. One definition per ISA, same arithmetic.
#if defined(BGTQ_SIMD_AVX512)
BGTQ_FORCEINLINE vf16 exp(vf16 x) {
  const __m512 lo = _mm512_set1_ps(-87.3f);
  const __mmask16 under = _mm512_cmp_ps_mask(x.v, lo, _CMP_LT_OQ);
  __m512 v = _mm512_min_ps(_mm512_max_ps(x.v, lo), _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), v);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return {_mm512_maskz_mul_ps(static_cast<__mmask16>(~under), p, _mm512_castsi512_ps(e))};
}
#elif defined(BGTQ_SIMD_AVX2)
namespace detail {
BGTQ_FORCEINLINE __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3f);
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  __m256 v = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), v);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}
}  // namespace detail
BGTQ_FORCEINLINE vf16 exp(vf16 x) { return {detail::exp8(x.lo), detail::exp8(x.hi)}; }
#else
BGTQ_FORCEINLINE vf16 exp(vf16 x) {
  vf16 out;
  for (int l = 0; l < 16; ++l) {
    float v = x.x[l];
    if (v < -87.3f) {
      out.x[l] = 0.0f;
      continue;
    }
    if (v != v) v = -87.3f;  // NaN: as the vector paths' max(x, -87.3); never a NaN-to-int cast
    if (v > 88.0f) v = 88.0f;
    const float n = __builtin_nearbyintf(v * 1.44269504088896341f);
    const float r = (v - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const std::uint32_t bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23;
    float s;
    std::memcpy(&s, &bits, 4);
    out.x[l] = p * s;
  }
  return out;
}
#endif

}  // namespace bgtq::simd
