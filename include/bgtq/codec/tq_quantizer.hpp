#pragma once
//! @file codec/tq_quantizer.hpp
//! TurboQuant-MSE on one vector of dimension n: radius r = ||x||, y = P x / r with a fixed
//! orthogonal P, each y_j replaced by its b-bit codebook cell. Decode: x_hat = r' P^T c.
//! With norm correction the stored radius is r' = r / ||c(idx)||, so decode and the
//! rotated-domain attention never need to know which variant was used.
//!
//! This is the one place the TQ-MSE math lives; the flat codecs (tq_codec.hpp,
//! block_gtq.hpp) and the cache's page codecs all call it.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "../codebook/codebook.hpp"
#include "../core/error.hpp"
#include "../core/simd.hpp"
#include "../plan/plan.hpp"
#include "../rotation/rotation.hpp"
#include "tq_math.hpp"

namespace bgtq {

//! Largest vector dimension a codec accepts (stack buffers are sized by it).
inline constexpr int max_codec_dim = 1024;

//! Counters an encoder updates; the cache keeps one per (layer, head).
struct encode_stats {
  std::uint64_t vectors = 0;        //!< vectors encoded
  std::uint64_t zero_vectors = 0;   //!< (sub-)vectors whose stored radius is zero
  std::uint64_t clamped_radii = 0;  //!< radii clamped when stored (fp16 at 65504, fp32 at 2^100)
  std::uint64_t nonfinite = 0;      //!< non-finite vectors stored as zero (policy `zero`)
  encode_stats& operator+=(const encode_stats& o) {
    vectors += o.vectors;
    zero_vectors += o.zero_vectors;
    clamped_radii += o.clamped_radii;
    nonfinite += o.nonfinite;
    return *this;
  }
};

//! Parameters of one TQ-MSE quantizer.
struct tq_params {
  int dim = 0;                                     //!< n, 2..max_codec_dim
  int bits = 3;                                    //!< b, 0..8 (0: nothing stored, decodes to zero)
  rotation_kind rotation = rotation_kind::haar;    //!< P
  std::uint64_t seed = 0;                          //!< seed of P
  codebook_kind codebook = codebook_kind::sphere;  //!< scalar codebook family
  bool norm_correction = false;                    //!< store r/||c|| instead of r
  radius_format radius = radius_format::fp16;      //!< radius storage
};

//! TQ-MSE quantizer of one vector family (immutable after construction, thread-safe).
class tq_quantizer {
 public:
  tq_quantizer() = default;
  //! @throws bgtq::error(invalid_argument) for dim outside 2..max_codec_dim or bits outside 0..8.
  explicit tq_quantizer(const tq_params& p) : p_(p) {
    BGTQ_REQUIRE(p.dim >= 2 && p.dim <= max_codec_dim, errc::invalid_argument,
                 "TQ-MSE dimension " + std::to_string(p.dim) + " is outside 2.." + std::to_string(max_codec_dim));
    BGTQ_REQUIRE(p.bits >= 0 && p.bits <= 8, errc::invalid_argument,
                 "TQ-MSE bit width " + std::to_string(p.bits) + " is outside 0..8");
    if (p.bits == 0) return;
    rot_ = any_rotation(p.rotation, p.dim, p.seed);
    const codebook& cb = get_codebook(p.codebook, p.dim, p.bits);
    const int s = 1 << p.bits;
    // tables padded to 256 entries: +inf thresholds never win a comparison
    thresholds_.assign(256, INFINITY);
    centroids_.assign(256, 0.0f);
    for (int i = 0; i < s; ++i) centroids_[static_cast<std::size_t>(i)] = cb.centroids()[static_cast<std::size_t>(i)];
    for (int i = 0; i + 1 < s; ++i) thresholds_[static_cast<std::size_t>(i)] = cb.thresholds()[static_cast<std::size_t>(i)];
    zero_code_ = static_cast<std::uint8_t>(detail::quantize_sorted(0.0f, thresholds_.data(), p.bits));
  }

  const tq_params& params() const noexcept { return p_; }
  int dim() const noexcept { return p_.dim; }
  int bits() const noexcept { return p_.bits; }
  bool fp32_radius() const noexcept { return p_.radius == radius_format::fp32; }
  //! Centroid table (2^bits used entries, padded to 256 with zeros).
  const float* centroids() const noexcept { return centroids_.data(); }
  //! Threshold table (2^bits - 1 used entries, padded to 256 with +inf).
  const float* thresholds() const noexcept { return thresholds_.data(); }
  //! The rotation P (valid only when bits > 0).
  const any_rotation& rotation() const noexcept { return rot_; }

  //! Encodes x[dim] into codes[dim] (one code per byte) and the radius as it will be
  //! stored (fp16-rounded unless fp32; norm-corrected if enabled).
  //! @return errc::non_finite if any x_j is NaN or Inf (outputs untouched), else errc::ok.
  errc quantize(const float* x, std::uint8_t* codes, float& radius, encode_stats* st = nullptr) const {
    const int n = p_.dim;
    // A finite sum of squares proves every x_j finite (NaN and Inf propagate); only an
    // infinite or NaN sum needs the element-wise check (it may be a finite overflow).
    const float ss = detail::sum_squares(x, n);
    if (!std::isfinite(ss) && !detail::all_finite(x, static_cast<std::size_t>(n))) return errc::non_finite;
    if (st) ++st->vectors;
    if (p_.bits == 0) {
      radius = 0.0f;
      return errc::ok;
    }
    float r = std::sqrt(ss);
    alignas(64) float y[max_codec_dim];
    const float* dir = x;  // the vector whose direction is quantized, of norm dir_norm
    float dir_norm = r;
    if (detail::tq_prescaled(r)) {
      // finite input whose squared norm overflows float, or so large that the rotation's
      // sums could, or so small that the squares underflow: scale by a power of two first
      // (exact; the direction comes from the scaled copy; r itself may still be +inf). The
      // CUDA encoder does the same (cuda/kernel_math.hpp tq_norm_parts).
      float big = 0.0f;
      for (int j = 0; j < n; ++j) big = std::fmax(big, std::fabs(x[j]));
      const float s = detail::tq_prescale(big);
      for (int j = 0; j < n; ++j) y[j] = x[j] * s;
      dir = y;
      dir_norm = std::sqrt(detail::sum_squares(y, n));
      r = dir_norm / s;
    }
    const bool fp32 = fp32_radius();
    if (!(detail::round_radius(r, fp32) > 0.0f) || r < 1e-30f) {
      std::memset(codes, zero_code_, static_cast<std::size_t>(n));
      radius = 0.0f;
      if (st) ++st->zero_vectors;
      return errc::ok;
    }
    rot_.apply(dir, y);
    const float inv = 1.0f / dir_norm;
    for (int j = 0; j < n; ++j) y[j] = y[j] * inv;
    quantize_rotated(y, codes);
    float cn = 0.0f;
    if (p_.norm_correction) {
      for (int j = 0; j < n; ++j) y[j] = centroids_[codes[j]];
      cn = std::sqrt(detail::sum_squares(y, n));
    }
    const float rs = detail::tq_corrected_radius(r, cn, p_.norm_correction);
    if (st && detail::radius_clamped(rs, fp32)) ++st->clamped_radii;
    radius = detail::round_radius(rs, fp32);
    return errc::ok;
  }

  //! x[dim] = radius * P^T c(codes).
  void dequantize(const std::uint8_t* codes, float radius, float* x) const {
    const int n = p_.dim;
    if (p_.bits == 0 || radius == 0.0f) {
      for (int j = 0; j < n; ++j) x[j] = 0.0f;
      return;
    }
    alignas(64) float c[max_codec_dim];
    int j = 0;
#if defined(BGTQ_SIMD_AVX512)
    const __m512 rv = _mm512_set1_ps(radius);
    if (p_.bits <= 4) {
      const __m512 tab = _mm512_loadu_ps(centroids_.data());
      for (; j + 16 <= n; j += 16) {
        const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + j)));
        _mm512_store_ps(c + j, _mm512_mul_ps(_mm512_permutexvar_ps(idx, tab), rv));
      }
    } else {
      for (; j + 16 <= n; j += 16) {
        const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + j)));
        _mm512_store_ps(c + j, _mm512_mul_ps(_mm512_i32gather_ps(idx, centroids_.data(), 4), rv));
      }
    }
#endif
    for (; j < n; ++j) c[j] = centroids_[codes[j]] * radius;
    rot_.apply_transpose(c, x);
  }

  //! Cell indices of a rotated unit vector y[dim] (no rotation, no scaling).
  void quantize_rotated(const float* y, std::uint8_t* codes) const {
    switch (p_.bits) {
      case 1: quantize_rotated_b<1>(y, codes); break;
      case 2: quantize_rotated_b<2>(y, codes); break;
      case 3: quantize_rotated_b<3>(y, codes); break;
      case 4: quantize_rotated_b<4>(y, codes); break;
      case 5: quantize_rotated_b<5>(y, codes); break;
      case 6: quantize_rotated_b<6>(y, codes); break;
      case 7: quantize_rotated_b<7>(y, codes); break;
      default: quantize_rotated_b<8>(y, codes); break;
    }
  }

 private:
  // Binary search over the sorted thresholds, unrolled for B bits (same comparisons as
  // detail::quantize_sorted on every path).
  template <int B>
  void quantize_rotated_b(const float* y, std::uint8_t* codes) const {
    const int n = p_.dim;
    int j = 0;
#if defined(BGTQ_SIMD_AVX512)
    const __m512 tab = _mm512_loadu_ps(thresholds_.data());
    const __m512 tab2 = _mm512_loadu_ps(thresholds_.data() + 16);
    for (; j + 16 <= n; j += 16) {
      const __m512 v = _mm512_loadu_ps(y + j);
      __m512i idx = _mm512_setzero_si512();
      for (int k = B - 1; k >= 0; --k) {
        const __m512i probe = _mm512_add_epi32(idx, _mm512_set1_epi32((1 << k) - 1));
        __m512 t;
        if constexpr (B <= 4)
          t = _mm512_permutexvar_ps(probe, tab);
        else if constexpr (B == 5)
          t = _mm512_permutex2var_ps(tab, probe, tab2);
        else
          t = _mm512_i32gather_ps(probe, thresholds_.data(), 4);
        const __mmask16 m = _mm512_cmp_ps_mask(v, t, _CMP_GT_OQ);
        idx = _mm512_mask_add_epi32(idx, m, idx, _mm512_set1_epi32(1 << k));
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + j), _mm512_cvtepi32_epi8(idx));
    }
#elif defined(BGTQ_SIMD_AVX2)
    for (; j + 8 <= n; j += 8) {
      const __m256 v = _mm256_loadu_ps(y + j);
      __m256i idx = _mm256_setzero_si256();
      for (int k = B - 1; k >= 0; --k) {
        const __m256i probe = _mm256_add_epi32(idx, _mm256_set1_epi32((1 << k) - 1));
        __m256 t;
        if constexpr (B <= 3)
          t = _mm256_permutevar8x32_ps(_mm256_loadu_ps(thresholds_.data()), probe);
        else
          t = _mm256_i32gather_ps(thresholds_.data(), probe, 4);
        const __m256 m = _mm256_cmp_ps(v, t, _CMP_GT_OQ);
        idx = _mm256_add_epi32(idx, _mm256_and_si256(_mm256_castps_si256(m), _mm256_set1_epi32(1 << k)));
      }
      alignas(32) std::int32_t tmp[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), idx);
      for (int l = 0; l < 8; ++l) codes[j + l] = static_cast<std::uint8_t>(tmp[l]);
    }
#endif
    for (; j < n; ++j) codes[j] = static_cast<std::uint8_t>(detail::quantize_sorted(y[j], thresholds_.data(), B));
  }

  tq_params p_{};
  any_rotation rot_{rotation_kind::identity, 2, 0};
  std::vector<float> thresholds_;
  std::vector<float> centroids_;
  std::uint8_t zero_code_ = 0;
};

}  // namespace bgtq
