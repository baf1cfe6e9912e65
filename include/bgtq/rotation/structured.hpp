#pragma once
//! @file rotation/structured.hpp
//! `structured_rotation`: a fast O(n log n) orthogonal map for any n >= 1, built from
//! random permutations, random signs and Walsh-Hadamard transforms on two overlapping
//! power-of-two windows.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/rng.hpp"
#include "concepts.hpp"
#include "hadamard.hpp"
#include "kernels.hpp"
#include "kind.hpp"

#if defined(__GNUC__) || defined(__clang__)
#define BGTQ_DETAIL_LAMBDA_INLINE __attribute__((always_inline))
#else
#define BGTQ_DETAIL_LAMBDA_INLINE
#endif

namespace bgtq {

namespace detail {

//! Everything a structured rotation applies; immutable after construction.
//! Layout (R = rounds, G = ceil(n/16) groups of 16 lanes):
//! - perm, inv: R rows of n indices (row r = π_r and π_r⁻¹);
//! - sign: R rows of n floats (row r = diagonal of D_r; scaled by 1/sqrt(n) when n is a
//!   power of two and `permute` is false, in which case perm/inv/... are empty);
//! - sign_inv: row r, entry j = sign[r][inv[r][j]] (for the transpose gather);
//! - wsign: R rows of m floats, row r = diagonal of E_r (the signs in front of window
//!   W_b) times 1/sqrt(m); empty when m == n;
//! - lane_idx / lane_idx_inv: R x G x 16 int32, entry (r, o, l) = perm[r][16o+l] mod 32
//!   (0 past n); pair_mask / pair_mask_inv: R x G x H uint16 (H = ceil(G/2)), bit l of
//!   (r, o, q) set iff 16o+l < n and perm[r][16o+l] / 32 == q. They let the AVX-512 path
//!   gather with G*H two-register lane permutes. Built on every path (layouts never
//!   depend on the SIMD path).
struct structured_plan {
  int n = 0, m = 0, rounds = 0;
  bool permute = true;  //!< false: power-of-two n without permutations (pure randomized Hadamard)
  std::vector<std::int32_t> perm, inv;
  std::vector<float> sign, sign_inv, wsign;
  std::vector<std::int32_t> lane_idx, lane_idx_inv;
  std::vector<std::uint16_t> pair_mask, pair_mask_inv;
};

//! Fills the lane tables of one round for gather index `idx` (n entries).
inline void structured_lane_tables(const std::int32_t* idx, int n, std::int32_t* lane, std::uint16_t* mask) {
  const int g = (n + 15) / 16, h = (g + 1) / 2;
  for (int o = 0; o < g; ++o) {
    for (int q = 0; q < h; ++q) mask[o * h + q] = 0;
    for (int l = 0; l < 16; ++l) {
      const int i = 16 * o + l;
      lane[16 * o + l] = i < n ? idx[i] % 32 : 0;
      if (i < n) mask[o * h + idx[i] / 32] = static_cast<std::uint16_t>(mask[o * h + idx[i] / 32] | (1u << l));
    }
  }
}

//! Draws a plan: for each round r = 0.., first π_r by Fisher-Yates (i = n-1 down to 1,
//! swap i with rng.below(i+1), starting from the identity), then the n signs of D_r,
//! then (n not a power of two) the m signs of E_r, all rng.sign() from one counter_rng.
//! For power-of-two n with permute_pow2 false, only the signs of D_r are drawn (scaled
//! by 1/sqrt(n)); permute_pow2 true exists for experiments.
inline structured_plan make_structured_plan(int n, int rounds, bool permute_pow2, counter_rng& rng) {
  structured_plan p;
  p.n = n;
  p.m = floor_pow2(n);
  p.rounds = rounds;
  p.permute = !(is_pow2(n) && !permute_pow2);
  const std::size_t un = static_cast<std::size_t>(n);
  if (!p.permute) {
    p.sign = hadamard_signs(n, rounds, rng);
    return p;
  }
  p.perm.resize(un * static_cast<std::size_t>(rounds));
  p.inv.resize(p.perm.size());
  p.sign.resize(p.perm.size());
  p.sign_inv.resize(p.perm.size());
  if (p.m != n) p.wsign.resize(static_cast<std::size_t>(p.m) * static_cast<std::size_t>(rounds));
  const float cw = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.m)));
  for (int r = 0; r < rounds; ++r) {
    std::int32_t* pi = p.perm.data() + static_cast<std::size_t>(r) * un;
    std::int32_t* iv = p.inv.data() + static_cast<std::size_t>(r) * un;
    float* s = p.sign.data() + static_cast<std::size_t>(r) * un;
    float* si = p.sign_inv.data() + static_cast<std::size_t>(r) * un;
    for (int i = 0; i < n; ++i) pi[i] = i;
    for (int i = n - 1; i >= 1; --i) {
      const std::uint32_t j = rng.below(static_cast<std::uint32_t>(i) + 1u);
      const std::int32_t t = pi[i];
      pi[i] = pi[j];
      pi[j] = t;
    }
    for (int i = 0; i < n; ++i) s[i] = rng.sign();
    if (p.m != n)
      for (int j = 0; j < p.m; ++j) p.wsign[static_cast<std::size_t>(r) * static_cast<std::size_t>(p.m) + j] = rng.sign() * cw;
    for (int i = 0; i < n; ++i) iv[pi[i]] = i;
    for (int j = 0; j < n; ++j) si[j] = s[iv[j]];
  }
  const std::size_t g = static_cast<std::size_t>((n + 15) / 16), h = (g + 1) / 2;
  p.lane_idx.resize(static_cast<std::size_t>(rounds) * g * 16);
  p.lane_idx_inv.resize(p.lane_idx.size());
  p.pair_mask.resize(static_cast<std::size_t>(rounds) * g * h);
  p.pair_mask_inv.resize(p.pair_mask.size());
  for (int r = 0; r < rounds; ++r) {
    const std::size_t ur = static_cast<std::size_t>(r);
    structured_lane_tables(p.perm.data() + ur * un, n, p.lane_idx.data() + ur * g * 16, p.pair_mask.data() + ur * g * h);
    structured_lane_tables(p.inv.data() + ur * un, n, p.lane_idx_inv.data() + ur * g * 16,
                           p.pair_mask_inv.data() + ur * g * h);
  }
  return p;
}

//! dst[i] = src[idx[i]] * s[i] for i in [0, n); dst and src must not overlap.
inline void gather_mul(const float* src, const std::int32_t* idx, const float* s, float* dst, int n) {
  for (int i = 0; i < n; ++i) dst[i] = src[idx[i]] * s[i];
}

//! Gather-with-signs of round r (forward: perm and sign; transpose: inv and sign_inv).
template <bool Transpose>
inline void structured_gather(const structured_plan& p, int r, const float* src, float* dst) {
  const std::size_t un = static_cast<std::size_t>(p.n), ur = static_cast<std::size_t>(r);
  gather_mul(src, (Transpose ? p.inv.data() : p.perm.data()) + ur * un,
             (Transpose ? p.sign_inv.data() : p.sign.data()) + ur * un, dst, p.n);
}

#if defined(BGTQ_SIMD_AVX512)
//! Largest power of two <= g (compile time).
constexpr int floor_pow2_c(int g) { return g <= 1 ? 1 : 2 * floor_pow2_c(g / 2); }

//! Register-resident structured rotation for non-power-of-two n in (16(G-1), 16G],
//! 2 <= G <= 16: the vector lives in G zmm registers (lanes >= n stay zero) for all
//! rounds. The gather is G*ceil(G/2) two-register lane permutes (lane_idx / pair_mask),
//! window W_a is registers [0, MA), window W_b = lanes [d, n), d = n - m, is shifted
//! into MA registers with one two-source permute each, transformed, and merged back.
//! Same operations in the same order as the memory path: bit-identical results.
template <int G, bool Transpose>
inline void structured_regs(const structured_plan& p, const float* in, float* out) {
  constexpr int MA = floor_pow2_c(G - 1);  // m / 16
  constexpr int Q = G - 1 - MA;            // first register that W_b touches
  const int n = p.n, R = p.rounds;
  const std::size_t un = static_cast<std::size_t>(n);
  const int sh = n - 16 * MA - 16 * Q;     // W_b starts at lane sh of register Q, 0 < sh <= 16
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i idx_in = _mm512_add_epi32(iota, _mm512_set1_epi32(sh));        // (x_k, x_k+1) -> window reg
  const __m512i idx_out = _mm512_add_epi32(iota, _mm512_set1_epi32(16 - sh));  // (y_j-1, y_j) -> x_k
  const __mmask16 ge_sh = static_cast<__mmask16>(sh >= 16 ? 0u : (0xFFFFu << sh) & 0xFFFFu);
  const __mmask16 lt_sh = static_cast<__mmask16>(~ge_sh);
  const int nl = n - 16 * (G - 1);  // valid lanes of the last register, 1..16
  const __mmask16 tail = static_cast<__mmask16>(nl >= 16 ? 0xFFFFu : (1u << nl) - 1u);
  const __m512 c = _mm512_set1_ps(static_cast<float>(1.0 / std::sqrt(static_cast<double>(16 * MA))));

  __m512 x[G];
BGTQ_DETAIL_UNROLL(16)
  for (int k = 0; k < G; ++k) x[k] = k + 1 < G ? _mm512_loadu_ps(in + 16 * k) : _mm512_maskz_loadu_ps(tail, in + 16 * k);

  auto window_a = [&]() BGTQ_DETAIL_LAMBDA_INLINE {
    __m512 w[MA];
BGTQ_DETAIL_UNROLL(16)
    for (int j = 0; j < MA; ++j) w[j] = _mm512_mul_ps(x[j], c);
    fwht_regs<simd16, MA>(w);
BGTQ_DETAIL_UNROLL(16)
    for (int j = 0; j < MA; ++j) x[j] = w[j];
  };
  auto window_b = [&](const float* ws) BGTQ_DETAIL_LAMBDA_INLINE {
    __m512 w[MA];
BGTQ_DETAIL_UNROLL(16)
    for (int j = 0; j < MA; ++j) {
      w[j] = _mm512_permutex2var_ps(x[Q + j], idx_in, x[Q + j + 1]);
      if constexpr (!Transpose) w[j] = _mm512_mul_ps(w[j], _mm512_loadu_ps(ws + 16 * j));
    }
    fwht_regs<simd16, MA>(w);
    if constexpr (Transpose) {
BGTQ_DETAIL_UNROLL(16)
      for (int j = 0; j < MA; ++j) w[j] = _mm512_mul_ps(w[j], _mm512_loadu_ps(ws + 16 * j));
    }
    x[Q] = _mm512_mask_mov_ps(x[Q], ge_sh, _mm512_permutex2var_ps(w[0], idx_out, w[0]));
BGTQ_DETAIL_UNROLL(16)
    for (int j = 1; j < MA; ++j) x[Q + j] = _mm512_permutex2var_ps(w[j - 1], idx_out, w[j]);
    x[Q + MA] = _mm512_mask_mov_ps(x[Q + MA], lt_sh, _mm512_permutex2var_ps(w[MA - 1], idx_out, w[MA - 1]));
  };
  // Gather: output register o = OR over pairs q of maskz_permutex2var(x_2q, x_2q+1)
  // (disjoint masks, zeros elsewhere), combined as a tree for a short dependency chain.
  constexpr int H = (G + 1) / 2;
  auto gather = [&](int r) BGTQ_DETAIL_LAMBDA_INLINE {
    const std::size_t ur = static_cast<std::size_t>(r);
    const std::int32_t* lane = (Transpose ? p.lane_idx_inv.data() : p.lane_idx.data()) + ur * G * 16;
    const std::uint16_t* mask = (Transpose ? p.pair_mask_inv.data() : p.pair_mask.data()) + ur * G * H;
    const float* sg = (Transpose ? p.sign_inv.data() : p.sign.data()) + ur * un;
    __m512 y[G];
BGTQ_DETAIL_UNROLL(16)
    for (int o = 0; o < G; ++o) {
      const __m512i li = _mm512_loadu_si512(lane + 16 * o);
      __m512i t[H];
BGTQ_DETAIL_UNROLL(8)
      for (int q = 0; q < H; ++q)
        t[q] = _mm512_castps_si512(
            _mm512_maskz_permutex2var_ps(mask[o * H + q], x[2 * q], li, x[2 * q + 1 < G ? 2 * q + 1 : 2 * q]));
BGTQ_DETAIL_UNROLL(8)
      for (int w = 1; w < H; w *= 2)
BGTQ_DETAIL_UNROLL(8)
        for (int q = 0; q + w < H; q += 2 * w) t[q] = _mm512_or_si512(t[q], t[q + w]);
      const __m512 sv = o + 1 < G ? _mm512_loadu_ps(sg + 16 * o) : _mm512_maskz_loadu_ps(tail, sg + 16 * o);
      y[o] = _mm512_mul_ps(_mm512_castsi512_ps(t[0]), sv);
    }
BGTQ_DETAIL_UNROLL(16)
    for (int k = 0; k < G; ++k) x[k] = y[k];
  };
  for (int t = 0; t < R; ++t) {
    const int r = Transpose ? R - 1 - t : t;
    const float* ws = p.wsign.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(16 * MA);
    if constexpr (!Transpose) {
      gather(r);
      window_a();
      window_b(ws);
    } else {
      window_b(ws);
      window_a();
      gather(r);
    }
  }
BGTQ_DETAIL_UNROLL(16)
  for (int k = 0; k < G; ++k) {
    if (k + 1 < G)
      _mm512_storeu_ps(out + 16 * k, x[k]);
    else
      _mm512_mask_storeu_ps(out + 16 * k, tail, x[k]);
  }
}

//! One masked in-register butterfly stage of stride h (1, 2 or 4) on the lanes in `lanes`.
BGTQ_FORCEINLINE __m512 butterfly_masked(__m512 x, int h, __mmask16 lanes) {
  switch (h) {
    case 1: return _mm512_mask_mov_ps(x, lanes, simd16::butterfly<1>(x));
    case 2: return _mm512_mask_mov_ps(x, lanes, simd16::butterfly<2>(x));
    default: return _mm512_mask_mov_ps(x, lanes, simd16::butterfly<4>(x));
  }
}

//! structured_regs for non-power-of-two n < 16 (one register, windows of m <= 8
//! lanes): W_a on lanes [0, m) with masked butterflies, W_b by rotating lanes [d, n)
//! down to 0, transforming, rotating back. Bit-identical to the memory path.
template <bool Transpose>
inline void structured_reg1(const structured_plan& p, const float* in, float* out) {
  const int n = p.n, m = p.m, d = n - m, R = p.rounds;
  const __mmask16 tail = static_cast<__mmask16>((1u << n) - 1u);
  const __mmask16 wa = static_cast<__mmask16>((1u << m) - 1u);
  const __mmask16 wb = static_cast<__mmask16>(wa << d);
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i mask15 = _mm512_set1_epi32(15);
  const __m512i rot_down = _mm512_and_si512(_mm512_add_epi32(iota, _mm512_set1_epi32(d)), mask15);
  const __m512i rot_up = _mm512_and_si512(_mm512_add_epi32(iota, _mm512_set1_epi32(16 - d)), mask15);
  const __m512 c = _mm512_set1_ps(static_cast<float>(1.0 / std::sqrt(static_cast<double>(m))));
  __m512 x = _mm512_maskz_loadu_ps(tail, in);
  auto window_a = [&]() BGTQ_DETAIL_LAMBDA_INLINE {
    x = _mm512_mask_mul_ps(x, wa, x, c);
    for (int h = 1; h < m; h <<= 1) x = butterfly_masked(x, h, wa);
  };
  auto window_b = [&](const float* ws) BGTQ_DETAIL_LAMBDA_INLINE {
    const __m512 e = _mm512_maskz_loadu_ps(wa, ws);
    __m512 y = _mm512_maskz_permutexvar_ps(0xFFFF, rot_down, x);
    if constexpr (!Transpose) y = _mm512_mul_ps(y, e);
    for (int h = 1; h < m; h <<= 1) y = butterfly_masked(y, h, 0xFFFF);
    if constexpr (Transpose) y = _mm512_mul_ps(y, e);
    x = _mm512_mask_mov_ps(x, wb, _mm512_maskz_permutexvar_ps(0xFFFF, rot_up, y));
  };
  auto gather = [&](int r) BGTQ_DETAIL_LAMBDA_INLINE {
    const std::size_t ur = static_cast<std::size_t>(r), un = static_cast<std::size_t>(n);
    const std::int32_t* lane = (Transpose ? p.lane_idx_inv.data() : p.lane_idx.data()) + ur * 16;
    const std::uint16_t* mask = (Transpose ? p.pair_mask_inv.data() : p.pair_mask.data()) + ur;
    const float* sg = (Transpose ? p.sign_inv.data() : p.sign.data()) + ur * un;
    x = _mm512_mul_ps(_mm512_maskz_permutexvar_ps(mask[0], _mm512_loadu_si512(lane), x), _mm512_maskz_loadu_ps(tail, sg));
  };
  for (int t = 0; t < R; ++t) {
    const int r = Transpose ? R - 1 - t : t;
    const float* ws = p.wsign.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(m);
    if constexpr (!Transpose) {
      gather(r);
      window_a();
      window_b(ws);
    } else {
      window_b(ws);
      window_a();
      gather(r);
    }
  }
  _mm512_mask_storeu_ps(out, tail, x);
}

//! Dispatches non-power-of-two n <= 256 (m < n) to the register kernels; false if n
//! is larger.
template <bool Transpose>
inline bool structured_apply_regs(const structured_plan& p, const float* in, float* out) {
  switch ((p.n + 15) / 16) {
    case 1: structured_reg1<Transpose>(p, in, out); return true;
#define BGTQ_STRUCTURED_CASE(G) \
  case G: structured_regs<G, Transpose>(p, in, out); return true;
    BGTQ_STRUCTURED_CASE(2) BGTQ_STRUCTURED_CASE(3) BGTQ_STRUCTURED_CASE(4) BGTQ_STRUCTURED_CASE(5)
    BGTQ_STRUCTURED_CASE(6) BGTQ_STRUCTURED_CASE(7) BGTQ_STRUCTURED_CASE(8) BGTQ_STRUCTURED_CASE(9)
    BGTQ_STRUCTURED_CASE(10) BGTQ_STRUCTURED_CASE(11) BGTQ_STRUCTURED_CASE(12) BGTQ_STRUCTURED_CASE(13)
    BGTQ_STRUCTURED_CASE(14) BGTQ_STRUCTURED_CASE(15) BGTQ_STRUCTURED_CASE(16)
#undef BGTQ_STRUCTURED_CASE
    default: return false;
  }
}
#endif

//! The window part of round r, in place: W_b E_r W_a, i.e. W_a on [0, m), then the
//! signs E_r and W_b on [n-m, n) (W_b and E_r absent when m == n). Transpose: the
//! transpose W_a E_r W_b, i.e. W_b first, then E_r, then W_a.
template <bool Transpose>
inline void structured_windows(float* x, const structured_plan& p, int r) {
  const int n = p.n, m = p.m;
  const float c = static_cast<float>(1.0 / std::sqrt(static_cast<double>(m)));
  if (m == n) return fwht_scaled(x, m, c);
  const float* ws = p.wsign.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(m);
  float* xb = x + (n - m);
  if constexpr (!Transpose) {
    fwht_scaled(x, m, c);
    mul(xb, ws, m);
    fwht(xb, m);
  } else {
    fwht(xb, m);
    mul(xb, ws, m);
    fwht_scaled(x, m, c);
  }
}

//! out = P·in (Transpose false) or Pᵀ·in (true) for a structured plan; see
//! structured_rotation for the maps. in == out allowed. No allocation.
template <bool Transpose>
inline void structured_apply(const structured_plan& p, const float* in, float* out) {
  const int n = p.n, R = p.rounds;
  if (!p.permute) return rht<Transpose>(in, out, p.sign.data(), R, n);
#if defined(BGTQ_SIMD_AVX512)
  if (p.m != n && structured_apply_regs<Transpose>(p, in, out)) return;
#endif
  const std::size_t un = static_cast<std::size_t>(n);
  alignas(64) float buf[max_rotation_dim];
  // R gathers alternate between buf and out and end in out: the buffer written by
  // gather t (t = 1..R) is out when R - t is even.
  auto dst_of = [&](int t) -> float* { return ((R - t) % 2 == 0) ? out : buf; };
  if constexpr (!Transpose) {
    // round r: x <- W_b E_r W_a D_r Π_r x, i.e. gather-and-sign, then the windows.
    const float* src = in;
    if (in == out && dst_of(1) == out) {
      std::memcpy(buf, in, sizeof(float) * un);
      src = buf;
    }
    for (int r = 0; r < R; ++r) {
      float* dst = dst_of(r + 1);
      structured_gather<false>(p, r, src, dst);
      structured_windows<false>(dst, p, r);
      src = dst;
    }
  } else {
    // round r = R-1..0: x <- Π_rᵀ D_r W_a E_r W_b x, i.e. the windows in place, then the
    // inverse gather with signs.
    float* cur = ((R % 2) == 0) ? out : buf;  // the buffer before the first gather
    if (cur != in) std::memcpy(cur, in, sizeof(float) * un);
    for (int t = 1; t <= R; ++t) {
      const int r = R - t;
      structured_windows<true>(cur, p, r);
      float* dst = dst_of(t);
      structured_gather<true>(p, r, cur, dst);
      cur = dst;
    }
  }
}

}  // namespace detail

//! Fast structured rotation on R^n for any n in [1, max_rotation_dim].
//!
//! Construction, with m = the largest power of two <= n and R = rounds_for(n):
//!
//!     P = F_R ... F_2 F_1,   F_r = W_b E_r W_a D_r Π_r,
//!
//! Π_r a uniformly random permutation ((Π_r x)_i = x[π_r(i)]), D_r random ±1 signs on
//! all n coordinates, W_a = H_m/sqrt(m) on coordinates [0, m), E_r random ±1 signs on
//! [n-m, n), W_b = H_m/sqrt(m) on [n-m, n): two Walsh-Hadamard windows that overlap and
//! together cover [0, n). Every factor is orthogonal, so P is. For power-of-two n the
//! windows coincide (one is used) and Π_r, E_r are left out:
//! P = (H/sqrt(n)) D_3 (H/sqrt(n)) D_2 (H/sqrt(n)) D_1, the randomized Hadamard
//! transform with three rounds. All randomness comes from counter_rng(seed, stream
//! "ROTA"|structured), drawn in the order given in detail::make_structured_plan.
//!
//! Why this form (measured as the 3-bit Gaussian Lloyd-Max quantization MSE of P·u
//! over 100-400 seeds, against Haar's 0.030-0.034; inputs one-hot, 2-hot, 4-hot,
//! constant, outlier channels, Gaussian, real Llama-2 keys):
//! - random permutations, not fixed shifts or none: at n = 76 fixed shifts need R >= 4;
//! - the signs E_r between the windows: without them the second window sees a shifted
//!   Walsh function and barely mixes it; one-hot u at n = 66 gives 0.150 (R = 2) and
//!   0.083 (R = 3) without E_r, 0.0335 for both with E_r (Haar 0.0334);
//! - R = 3: at n >= 16 two rounds are within 5% of Haar on every family and three
//!   rounds match it; small non-power-of-two n (< 16) need R = 4 (n = 6, constant
//!   input: 0.053 / 0.043 / 0.038 for R = 2 / 3 / 4, Haar 0.029); powers of two need
//!   three Hadamard rounds for 2-hot inputs (0.042 with two, 0.034 with three, n = 128).
//! hadamard_rotation is the faster two-round alternative for powers of two.
//!
//! apply / apply_transpose: O(R n log n) (two windows of m log m per round plus an
//! O(n) gather). With AVX-512 and n <= 256 the vector stays in registers for all
//! rounds (the gather is done with in-register lane permutes); otherwise a stack
//! scratch of n floats. No allocation. The results are bit-identical on the AVX-512,
//! AVX2 and scalar paths. Storage about 7 R n words, shared between copies.
class structured_rotation {
 public:
  //! Rounds R used at dimension n: 4 for non-powers of two below 16, else 3.
  static constexpr int rounds_for(int n) noexcept { return (n < 16 && !detail::is_pow2(n)) ? 4 : 3; }
  //! Builds P from (n, seed).
  //! @throws bgtq::error(invalid_argument) unless 1 <= n <= max_rotation_dim
  structured_rotation(int n, std::uint64_t seed) : n_(n), seed_(seed) {
    BGTQ_REQUIRE(n >= 1 && n <= max_rotation_dim, errc::invalid_argument,
                 "structured_rotation: dimension n = " + std::to_string(n) + " is outside [1, " +
                     std::to_string(max_rotation_dim) + "]");
    counter_rng rng(seed, detail::rotation_rng_stream(rotation_kind::structured));
    p_ = std::make_shared<const detail::structured_plan>(detail::make_structured_plan(n, rounds_for(n), false, rng));
  }
  //! Number of rounds R of this rotation (rounds_for(dim())).
  int rounds() const noexcept { return p_->rounds; }
  //! The run-time kind of this policy.
  static constexpr rotation_kind kind() noexcept { return rotation_kind::structured; }
  //! The dimension n.
  int dim() const noexcept { return n_; }
  //! The seed P was built from.
  std::uint64_t seed() const noexcept { return seed_; }
  //! The plan (permutations, signs) for device kernels; layout in detail::structured_plan.
  const detail::structured_plan& plan() const noexcept { return *p_; }
  //! out = P·in. O(n log n).
  void apply(const float* in, float* out) const noexcept { detail::structured_apply<false>(*p_, in, out); }
  //! out = Pᵀ·in. O(n log n).
  void apply_transpose(const float* in, float* out) const noexcept { detail::structured_apply<true>(*p_, in, out); }
  //! apply() on `count` contiguous vectors of n floats (in == out allowed).
  void apply_batch(const float* in, float* out, std::size_t count) const noexcept {
    for (std::size_t v = 0; v < count; ++v) apply(in + v * n_, out + v * n_);
  }
  //! apply_transpose() on `count` contiguous vectors of n floats (in == out allowed).
  void apply_transpose_batch(const float* in, float* out, std::size_t count) const noexcept {
    for (std::size_t v = 0; v < count; ++v) apply_transpose(in + v * n_, out + v * n_);
  }

 private:
  int n_;
  std::uint64_t seed_;
  std::shared_ptr<const detail::structured_plan> p_;
};

}  // namespace bgtq
