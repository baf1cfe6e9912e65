#pragma once
//! @file core/simd.hpp
//! Small vector kernels with one canonical arithmetic order, so that the AVX-512, AVX2,
//! scalar and CUDA paths give bit-identical results (codes must not depend on the ISA).
//!
//! Canonical reduction order for a sum over x[0..n): sixteen partial sums
//! s[l] = sum over j = l (mod 16), j ascending; then a pairwise tree
//! s[l] += s[l+8] (l<8), s[l] += s[l+4] (l<4), s[l] += s[l+2] (l<2), s[0] += s[1].
//! Products are never fused into adds (no FMA contraction), so every path rounds alike.

#include <cstddef>
#include <cstdint>

#include "../config.hpp"

#if defined(BGTQ_SIMD_AVX2) || defined(BGTQ_SIMD_AVX512)
#include "intrinsics.hpp"
#endif

namespace bgtq::detail {

//! Tree-reduces 16 partial sums in the canonical order.
BGTQ_HOST_DEVICE float tree_reduce16(float* s) {
  for (int l = 0; l < 8; ++l) s[l] = s[l] + s[l + 8];
  for (int l = 0; l < 4; ++l) s[l] = s[l] + s[l + 4];
  for (int l = 0; l < 2; ++l) s[l] = s[l] + s[l + 2];
  return s[0] + s[1];
}

//! Sum of x[j]^2 in the canonical order (portable reference, also the device path).
BGTQ_HOST_DEVICE float sum_squares_scalar(const float* x, int n) {
  float s[16] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int j = 0; j < n; ++j) {
    const float p = x[j] * x[j];
    s[j & 15] = s[j & 15] + p;
  }
  return tree_reduce16(s);
}

#if defined(BGTQ_SIMD_AVX512)
inline float tree_reduce16(__m512 v) {
  alignas(64) float s[16];
  _mm512_store_ps(s, v);
  return tree_reduce16(s);
}
#elif defined(BGTQ_SIMD_AVX2)
inline float tree_reduce16(__m256 lo, __m256 hi) {
  alignas(32) float s[16];
  _mm256_store_ps(s, lo);
  _mm256_store_ps(s + 8, hi);
  return tree_reduce16(s);
}
#endif

//! Sum of x[j]^2, canonical order, fastest path compiled in.
inline float sum_squares(const float* x, int n) {
#if defined(BGTQ_SIMD_AVX512)
  __m512 acc = _mm512_setzero_ps();
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    acc = _mm512_add_ps(acc, _mm512_mul_ps(v, v));
  }
  if (j < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - j)) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + j);
    acc = _mm512_mask_add_ps(acc, m, acc, _mm512_mul_ps(v, v));
  }
  return tree_reduce16(acc);
#elif defined(BGTQ_SIMD_AVX2)
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + 8);
    lo = _mm256_add_ps(lo, _mm256_mul_ps(a, a));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(b, b));
  }
  alignas(32) float s[16];
  _mm256_store_ps(s, lo);
  _mm256_store_ps(s + 8, hi);
  for (; j < n; ++j) s[j & 15] = s[j & 15] + x[j] * x[j];
  return tree_reduce16(s);
#else
  return sum_squares_scalar(x, n);
#endif
}

//! True if every x[j] is finite.
inline bool all_finite(const float* x, std::size_t n) {
  // exponent all-ones <=> Inf or NaN; OR-reduce the exponent test over the vector
  std::uint32_t bad = 0;
  std::size_t j = 0;
#if defined(BGTQ_SIMD_AVX512)
  const __m512i e = _mm512_set1_epi32(0x7f800000);
  __mmask16 m = 0;
  for (; j + 16 <= n; j += 16)
    m |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_loadu_si512(x + j), e), e);
  bad = m;
#elif defined(BGTQ_SIMD_AVX2)
  const __m256i e = _mm256_set1_epi32(0x7f800000);
  __m256i acc = _mm256_setzero_si256();
  for (; j + 8 <= n; j += 8)
    acc = _mm256_or_si256(acc, _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + j)), e), e));
  bad = static_cast<std::uint32_t>(_mm256_movemask_epi8(acc));
#endif
  for (; j < n; ++j) {
    std::uint32_t u;
    __builtin_memcpy(&u, x + j, 4);
    bad |= static_cast<std::uint32_t>((u & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

}  // namespace bgtq::detail
