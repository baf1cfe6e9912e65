#pragma once
//! @file rotation/kernels.hpp
//! Compute kernels behind the rotation policies (all in `bgtq::detail`):
//! - the fast Walsh-Hadamard transform (unnormalised, in place, m a power of two),
//!   O(m log m); with AVX-512 or AVX2 the whole vector stays in registers up to
//!   m = 256 (AVX-512) or 128 (AVX2), larger m runs those blocks then radix-2 passes;
//! - randomized Hadamard rounds x <- H (s_r ⊙ x), fused in registers;
//! - the dense product out = Mᵀ-style "axpy" mat-vec over a padded row-major matrix.
//!
//! Paths are chosen at compile time (`BGTQ_SIMD_AVX512`, `BGTQ_SIMD_AVX2`, else
//! scalar). The Walsh-Hadamard butterflies compute exactly a+b and a-b in the same
//! stage order on every path, so FWHT results are bit-identical between the SIMD and
//! scalar paths; dense products use FMA on SIMD paths and differ in the last bits.

#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "../config.hpp"

#if defined(BGTQ_SIMD_AVX2)
#include "../core/intrinsics.hpp"
#endif

namespace bgtq::detail {

//! True if m is a power of two (m >= 1).
BGTQ_HOST_DEVICE constexpr bool is_pow2(int m) { return m > 0 && (m & (m - 1)) == 0; }

//! Largest power of two <= n (n >= 1).
BGTQ_HOST_DEVICE constexpr int floor_pow2(int n) {
  int m = 1;
  while (m <= n / 2) m *= 2;
  return m;
}

// ------------------------------------------------------------------ scalar reference

//! Unnormalised Walsh-Hadamard transform of x[0, m), in place; m a power of two.
//! Stage h (h = 1, 2, 4, ...) maps (a, b) = (x[j], x[j+h]) to (a + b, a - b). Stages
//! 1, 2, 4 run fused on blocks of 8 in locals (the same operations on the same values,
//! so the result is unchanged); the later stages are unit-stride loops that compilers
//! vectorize.
BGTQ_HOST_DEVICE void fwht_scalar(float* x, int m) {
  int h = 1;
  if (m >= 8) {
    for (int i = 0; i < m; i += 8) {
      float* p = x + i;
      const float a0 = p[0] + p[1], a1 = p[0] - p[1], a2 = p[2] + p[3], a3 = p[2] - p[3];
      const float a4 = p[4] + p[5], a5 = p[4] - p[5], a6 = p[6] + p[7], a7 = p[6] - p[7];
      const float b0 = a0 + a2, b1 = a1 + a3, b2 = a0 - a2, b3 = a1 - a3;
      const float b4 = a4 + a6, b5 = a5 + a7, b6 = a4 - a6, b7 = a5 - a7;
      p[0] = b0 + b4;
      p[1] = b1 + b5;
      p[2] = b2 + b6;
      p[3] = b3 + b7;
      p[4] = b0 - b4;
      p[5] = b1 - b5;
      p[6] = b2 - b6;
      p[7] = b3 - b7;
    }
    h = 8;
  }
  for (; h < m; h <<= 1)
    for (int i = 0; i < m; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
}

//! x[j] *= s[j] for j in [0, n).
BGTQ_HOST_DEVICE void mul_scalar(float* x, const float* s, int n) {
  for (int j = 0; j < n; ++j) x[j] *= s[j];
}

//! x[j] *= c for j in [0, n).
BGTQ_HOST_DEVICE void scale_scalar(float* x, float c, int n) {
  for (int j = 0; j < n; ++j) x[j] *= c;
}

// ------------------------------------------------------------------ SIMD register types

#if defined(BGTQ_SIMD_AVX2)
//! 8 floats in a ymm register.
struct simd8 {
  using reg = __m256;
  static constexpr int width = 8;
  static BGTQ_FORCEINLINE reg load(const float* p) { return _mm256_loadu_ps(p); }
  static BGTQ_FORCEINLINE void store(float* p, reg r) { _mm256_storeu_ps(p, r); }
  static BGTQ_FORCEINLINE reg set1(float c) { return _mm256_set1_ps(c); }
  static BGTQ_FORCEINLINE reg zero() { return _mm256_setzero_ps(); }
  static BGTQ_FORCEINLINE reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static BGTQ_FORCEINLINE reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
  static BGTQ_FORCEINLINE reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static BGTQ_FORCEINLINE reg fmadd(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  //! One in-register butterfly stage of stride H (1, 2 or 4): lane k gets
  //! x_k + x_{k+H} if (k & H) == 0, else x_{k-H} - x_k; computed as fma(x, ±1, partner),
  //! which rounds exactly like the scalar a + b and a - b.
  template <int H>
  static BGTQ_FORCEINLINE reg butterfly(reg x) {
    reg p, s;
    if constexpr (H == 1) {
      p = _mm256_permute_ps(x, 0xB1);
      s = _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1);
    } else if constexpr (H == 2) {
      p = _mm256_permute_ps(x, 0x4E);
      s = _mm256_setr_ps(1, 1, -1, -1, 1, 1, -1, -1);
    } else {
      static_assert(H == 4, "simd8 butterfly stride");
      p = _mm256_permute2f128_ps(x, x, 0x01);
      s = _mm256_setr_ps(1, 1, 1, 1, -1, -1, -1, -1);
    }
    return _mm256_fmadd_ps(x, s, p);
  }
  //! All in-register stages (1, 2, 4).
  static BGTQ_FORCEINLINE reg fwht_lanes(reg x) { return butterfly<4>(butterfly<2>(butterfly<1>(x))); }
};
#endif

#if defined(BGTQ_SIMD_AVX512)
//! 16 floats in a zmm register.
struct simd16 {
  using reg = __m512;
  static constexpr int width = 16;
  static BGTQ_FORCEINLINE reg load(const float* p) { return _mm512_loadu_ps(p); }
  static BGTQ_FORCEINLINE void store(float* p, reg r) { _mm512_storeu_ps(p, r); }
  static BGTQ_FORCEINLINE reg set1(float c) { return _mm512_set1_ps(c); }
  static BGTQ_FORCEINLINE reg zero() { return _mm512_setzero_ps(); }
  static BGTQ_FORCEINLINE reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static BGTQ_FORCEINLINE reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
  static BGTQ_FORCEINLINE reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static BGTQ_FORCEINLINE reg fmadd(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  //! One in-register butterfly stage of stride H (1, 2, 4 or 8); see simd8::butterfly.
  //! (Full-mask forms of the permutes: GCC 12 warns about the unmasked ones' undefined
  //! pass-through operand.)
  template <int H>
  static BGTQ_FORCEINLINE reg butterfly(reg x) {
    reg p, s;
    if constexpr (H == 1) {
      p = _mm512_mask_permute_ps(x, 0xFFFF, x, 0xB1);
      s = _mm512_setr_ps(1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1);
    } else if constexpr (H == 2) {
      p = _mm512_mask_permute_ps(x, 0xFFFF, x, 0x4E);
      s = _mm512_setr_ps(1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1);
    } else if constexpr (H == 4) {
      p = _mm512_mask_shuffle_f32x4(x, 0xFFFF, x, x, 0xB1);
      s = _mm512_setr_ps(1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1);
    } else {
      static_assert(H == 8, "simd16 butterfly stride");
      p = _mm512_mask_shuffle_f32x4(x, 0xFFFF, x, x, 0x4E);
      s = _mm512_setr_ps(1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1);
    }
    return _mm512_fmadd_ps(x, s, p);
  }
  //! All in-register stages (1, 2, 4, 8).
  static BGTQ_FORCEINLINE reg fwht_lanes(reg x) {
    return butterfly<8>(butterfly<4>(butterfly<2>(butterfly<1>(x))));
  }
};
#endif

// ------------------------------------------------------------------ register-resident FWHT

//! Butterfly stages of stride H, 2H, ... < NR between whole registers.
template <class V, int NR, int H>
BGTQ_FORCEINLINE void fwht_cross(typename V::reg (&r)[NR]) {
  if constexpr (H < NR) {
BGTQ_DETAIL_UNROLL(16)
    for (int j = 0; j < NR; ++j) {
      if ((j & H) == 0) {
        const typename V::reg a = r[j], b = r[j + H];
        r[j] = V::add(a, b);
        r[j + H] = V::sub(a, b);
      }
    }
    fwht_cross<V, NR, 2 * H>(r);
  }
}

//! FWHT of NR registers (NR * V::width floats) held in r[], NR a power of two: the
//! in-register stages (stride < width), then the stages between registers.
template <class V, int NR>
BGTQ_FORCEINLINE void fwht_regs(typename V::reg (&r)[NR]) {
BGTQ_DETAIL_UNROLL(16)
  for (int k = 0; k < NR; ++k) r[k] = V::fwht_lanes(r[k]);
  fwht_cross<V, NR, 1>(r);
}

//! x[0, NR*W) <- c * H x (scale applied first), in place.
template <class V, int NR>
inline void fwht_block(float* x, float c) {
  typename V::reg r[NR];
  const typename V::reg cv = V::set1(c);
BGTQ_DETAIL_UNROLL(16)
  for (int k = 0; k < NR; ++k) r[k] = V::mul(V::load(x + k * V::width), cv);
  fwht_regs<V, NR>(r);
BGTQ_DETAIL_UNROLL(16)
  for (int k = 0; k < NR; ++k) V::store(x + k * V::width, r[k]);
}

//! x[0, NR*W) <- H x, in place (no scaling).
template <class V, int NR>
inline void fwht_block_unscaled(float* x) {
  typename V::reg r[NR];
BGTQ_DETAIL_UNROLL(16)
  for (int k = 0; k < NR; ++k) r[k] = V::load(x + k * V::width);
  fwht_regs<V, NR>(r);
BGTQ_DETAIL_UNROLL(16)
  for (int k = 0; k < NR; ++k) V::store(x + k * V::width, r[k]);
}

//! Calls f(std::integral_constant<int, NR>) for NR = m / V::width in {1, 2, 4, 8, 16}.
template <class V, class F>
BGTQ_FORCEINLINE void dispatch_nr(int nr, F&& f) {
  switch (nr) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    default: f(std::integral_constant<int, 16>{}); break;
  }
}

//! Unnormalised FWHT of x[0, m) with SIMD type V, m a power of two >= V::width:
//! blocks of up to 16 registers in registers, then radix-2 passes in memory.
template <class V>
inline void fwht_simd(float* x, int m) {
  constexpr int W = V::width, B = 16 * W;
  if (m <= B) {
    dispatch_nr<V>(m / W, [&](auto nr) { fwht_block_unscaled<V, decltype(nr)::value>(x); });
    return;
  }
  for (int i = 0; i < m; i += B) fwht_block_unscaled<V, 16>(x + i);
  for (int h = B; h < m; h <<= 1)
    for (int i = 0; i < m; i += 2 * h)
      for (int j = i; j < i + h; j += W) {
        const typename V::reg a = V::load(x + j), b = V::load(x + j + h);
        V::store(x + j, V::add(a, b));
        V::store(x + j + h, V::sub(a, b));
      }
}

//! x[j] *= s[j], SIMD body with scalar tail.
template <class V>
inline void mul_simd(float* x, const float* s, int n) {
  int j = 0;
  for (; j + V::width <= n; j += V::width) V::store(x + j, V::mul(V::load(x + j), V::load(s + j)));
  for (; j < n; ++j) x[j] *= s[j];
}

// ------------------------------------------------------------------ dispatching entry points

//! Unnormalised Walsh-Hadamard transform of x[0, m) in place, m a power of two >= 1.
//! Result bit-identical to fwht_scalar on every path. O(m log m).
inline void fwht(float* x, int m) {
#if defined(BGTQ_SIMD_AVX512)
  if (m >= 16) return fwht_simd<simd16>(x, m);
#endif
#if defined(BGTQ_SIMD_AVX2)
  if (m >= 8) return fwht_simd<simd8>(x, m);
#endif
  fwht_scalar(x, m);
}

//! x[0, m) <- c * H x in place (the scale is applied before the transform), m a power
//! of two; c = 1/sqrt(m) gives the orthonormal Walsh-Hadamard matrix.
inline void fwht_scaled(float* x, int m, float c) {
#if defined(BGTQ_SIMD_AVX512)
  if (m >= 16 && m <= 256) {
    dispatch_nr<simd16>(m / 16, [&](auto nr) { fwht_block<simd16, decltype(nr)::value>(x, c); });
    return;
  }
#endif
#if defined(BGTQ_SIMD_AVX2)
  if (m >= 8 && m <= 128) {
    dispatch_nr<simd8>(m / 8, [&](auto nr) { fwht_block<simd8, decltype(nr)::value>(x, c); });
    return;
  }
#endif
  scale_scalar(x, c, m);
  fwht(x, m);
}

//! x[j] *= s[j] for j in [0, n).
inline void mul(float* x, const float* s, int n) {
#if defined(BGTQ_SIMD_AVX512)
  return mul_simd<simd16>(x, s, n);
#elif defined(BGTQ_SIMD_AVX2)
  return mul_simd<simd8>(x, s, n);
#else
  mul_scalar(x, s, n);
#endif
}

// ------------------------------------------------------------------ randomized Hadamard rounds

#if defined(BGTQ_SIMD_AVX2)
//! Fused rounds in registers for n = NR * V::width. Forward: for r = 0..R-1,
//! x <- H (s_r ⊙ x). Transpose: for r = R-1..0, x <- s_r ⊙ (H x).
//! `signs` holds R rows of n floats. in == out allowed (everything is loaded first).
template <class V, int NR, bool Transpose>
inline void rht_regs(const float* in, float* out, const float* signs, int rounds, int n) {
  typename V::reg r[NR];
BGTQ_DETAIL_UNROLL(16)
  for (int k = 0; k < NR; ++k) r[k] = V::load(in + k * V::width);
  for (int t = 0; t < rounds; ++t) {
    const float* s = signs + static_cast<std::size_t>(Transpose ? rounds - 1 - t : t) * n;
    if constexpr (Transpose) fwht_regs<V, NR>(r);
BGTQ_DETAIL_UNROLL(16)
    for (int k = 0; k < NR; ++k) r[k] = V::mul(r[k], V::load(s + k * V::width));
    if constexpr (!Transpose) fwht_regs<V, NR>(r);
  }
BGTQ_DETAIL_UNROLL(16)
  for (int k = 0; k < NR; ++k) V::store(out + k * V::width, r[k]);
}
#endif

//! Randomized Hadamard rounds on a power-of-two n (see rht_regs for the maps). Any n
//! up to max_rotation_dim; in == out allowed, else the ranges must not overlap.
template <bool Transpose>
inline void rht(const float* in, float* out, const float* signs, int rounds, int n) {
#if defined(BGTQ_SIMD_AVX512)
  if (n >= 16 && n <= 256) {
    dispatch_nr<simd16>(n / 16, [&](auto nr) { rht_regs<simd16, decltype(nr)::value, Transpose>(in, out, signs, rounds, n); });
    return;
  }
#endif
#if defined(BGTQ_SIMD_AVX2)
  if (n >= 8 && n <= 128) {
    dispatch_nr<simd8>(n / 8, [&](auto nr) { rht_regs<simd8, decltype(nr)::value, Transpose>(in, out, signs, rounds, n); });
    return;
  }
#endif
  if (in != out) std::memcpy(out, in, sizeof(float) * static_cast<std::size_t>(n));
  for (int t = 0; t < rounds; ++t) {
    const float* s = signs + static_cast<std::size_t>(Transpose ? rounds - 1 - t : t) * n;
    if constexpr (Transpose) fwht(out, n);
    mul(out, s, n);
    if constexpr (!Transpose) fwht(out, n);
  }
}

// ------------------------------------------------------------------ dense products

//! Row stride (floats) of padded dense matrices: n rounded up to 16.
BGTQ_HOST_DEVICE constexpr int dense_ld(int n) { return (n + 15) / 16 * 16; }

#if defined(BGTQ_SIMD_AVX2)
//! out[o0, o0 + NB*W) (first `valid` of them written) = sum_i x[i] * M[i][o0 + .],
//! M padded row-major with stride ld (padding reads are in bounds and ignored).
template <class V, int NB>
inline void axpy_block(const float* m, int ld, int n_in, const float* x, float* out, int valid) {
  typename V::reg acc[NB];
BGTQ_DETAIL_UNROLL(16)
  for (int k = 0; k < NB; ++k) acc[k] = V::zero();
  for (int i = 0; i < n_in; ++i) {
    const typename V::reg b = V::set1(x[i]);
    const float* row = m + static_cast<std::size_t>(i) * ld;
BGTQ_DETAIL_UNROLL(16)
    for (int k = 0; k < NB; ++k) acc[k] = V::fmadd(b, V::load(row + k * V::width), acc[k]);
  }
  if (valid == NB * V::width) {
BGTQ_DETAIL_UNROLL(16)
    for (int k = 0; k < NB; ++k) V::store(out + k * V::width, acc[k]);
  } else {
    alignas(64) float tmp[NB * V::width];
BGTQ_DETAIL_UNROLL(16)
    for (int k = 0; k < NB; ++k) V::store(tmp + k * V::width, acc[k]);
    for (int j = 0; j < valid; ++j) out[j] = tmp[j];
  }
}

template <class V, int NBMax>
inline void axpy_matvec_simd(const float* m, int ld, int n, const float* x, float* out) {
  constexpr int W = V::width;
  for (int o0 = 0; o0 < n; o0 += NBMax * W) {
    const int valid = n - o0 < NBMax * W ? n - o0 : NBMax * W;
    const int nb = (valid + W - 1) / W;
    const float* mo = m + o0;
    switch (nb) {
#define BGTQ_AXPY_CASE(K) \
  case K: axpy_block<V, K>(mo, ld, n, x, out + o0, valid); break;
      BGTQ_AXPY_CASE(1) BGTQ_AXPY_CASE(2) BGTQ_AXPY_CASE(3) BGTQ_AXPY_CASE(4)
      BGTQ_AXPY_CASE(5) BGTQ_AXPY_CASE(6) BGTQ_AXPY_CASE(7) BGTQ_AXPY_CASE(8)
#if defined(BGTQ_SIMD_AVX512)
      BGTQ_AXPY_CASE(9) BGTQ_AXPY_CASE(10) BGTQ_AXPY_CASE(11) BGTQ_AXPY_CASE(12)
      BGTQ_AXPY_CASE(13) BGTQ_AXPY_CASE(14) BGTQ_AXPY_CASE(15) BGTQ_AXPY_CASE(16)
#endif
#undef BGTQ_AXPY_CASE
      default: break;
    }
  }
}
#endif

//! out[o] = sum_i x[i] * m[i * ld + o] for o in [0, n): the product Mᵀx of an n x n
//! matrix M stored row-major with padded stride ld = dense_ld(n). x and out must not
//! overlap. O(n^2); the output block sits in registers while M streams through once.
inline void axpy_matvec(const float* m, int ld, int n, const float* x, float* out) {
#if defined(BGTQ_SIMD_AVX512)
  axpy_matvec_simd<simd16, 16>(m, ld, n, x, out);
#elif defined(BGTQ_SIMD_AVX2)
  axpy_matvec_simd<simd8, 8>(m, ld, n, x, out);
#else
  for (int o = 0; o < n; ++o) out[o] = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float xi = x[i];
    const float* row = m + static_cast<std::size_t>(i) * ld;
    // fused, as the SIMD paths' fma(x[i], M[i][o], acc) in the same order: the same bits
    // on every ISA (a separate multiply and add changed an 8-bit Haar code now and then)
    for (int o = 0; o < n; ++o) out[o] = std::fma(xi, row[o], out[o]);
  }
#endif
}

}  // namespace bgtq::detail
