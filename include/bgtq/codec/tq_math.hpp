#pragma once
//! @file codec/tq_math.hpp
//! The scalar pieces of TQ-MSE shared by the CPU codecs and the CUDA kernels
//! (`BGTQ_HOST_DEVICE`, no allocation, no exceptions). One definition, so the two
//! can never drift.

#include <cmath>
#include <cstdint>

#include "../config.hpp"
#include "../core/half.hpp"

namespace bgtq::detail {

//! Index of the quantization cell of y: the number of thresholds t_k with y > t_k,
//! found by binary search over the 2^bits - 1 ascending thresholds (y equal to a
//! threshold goes to the lower cell; NaN goes to cell 0). bits in 1..8.
BGTQ_HOST_DEVICE int quantize_sorted(float y, const float* thresholds, int bits) {
  int idx = 0;
  for (int k = bits - 1; k >= 0; --k) {
    const int step = 1 << k;
    if (y > thresholds[idx + step - 1]) idx += step;
  }
  return idx;
}

//! Stores a radius in the given width: 2 bytes (fp16 bits) or 4 bytes (fp32).
//! fp16 saturates at 65504 (the caller counts clamps).
BGTQ_HOST_DEVICE void store_radius(std::uint8_t* dst, float r, bool fp32) {
  if (fp32) {
    const std::uint32_t u = float_as_bits(r);
    dst[0] = static_cast<std::uint8_t>(u);
    dst[1] = static_cast<std::uint8_t>(u >> 8);
    dst[2] = static_cast<std::uint8_t>(u >> 16);
    dst[3] = static_cast<std::uint8_t>(u >> 24);
  } else {
    const std::uint16_t h = float_to_half_bits(saturate_half(r));
    dst[0] = static_cast<std::uint8_t>(h);
    dst[1] = static_cast<std::uint8_t>(h >> 8);
  }
}

//! Loads a radius stored by store_radius.
BGTQ_HOST_DEVICE float load_radius(const std::uint8_t* src, bool fp32) {
  if (fp32) {
    const std::uint32_t u = static_cast<std::uint32_t>(src[0]) | (static_cast<std::uint32_t>(src[1]) << 8) |
                            (static_cast<std::uint32_t>(src[2]) << 16) | (static_cast<std::uint32_t>(src[3]) << 24);
    return bits_as_float(u);
  }
  return half_bits_to_float(static_cast<std::uint16_t>(src[0] | (src[1] << 8)));
}

//! The largest fp32 radius stored (2^100, about 1.27e30): a larger norm saturates there
//! (counted in clamped_radii, direction kept), so that the decoders' rotations and decode
//! attention's sums of weight x radius x centroid over up to 2^24 tokens stay finite
//! (a radius near FLT_MAX overflowed both).
inline constexpr float fp32_radius_max = 0x1p100f;

//! The value a radius takes once stored (fp16 rounding and clamping at 65504, or fp32
//! clamped at fp32_radius_max, otherwise exact).
BGTQ_HOST_DEVICE float round_radius(float r, bool fp32) {
  if (fp32) return r < fp32_radius_max ? r : fp32_radius_max;
  return stored_half(r);
}

//! The largest radius a group stores: 65504 (fp16) or fp32_radius_max.
BGTQ_HOST_DEVICE constexpr float stored_radius_max(bool fp32) { return fp32 ? fp32_radius_max : half_max; }

//! A bound on ||k||^2 for every vector a TQ-MSE group of n coordinates can decode to:
//! each rotated coordinate is at most cmax = max |centroid|, times the largest stored
//! radius. Summed over a key head's groups, its square root bounds the keys' norm,
//! which decode attention uses to refuse queries whose scores could overflow float.
inline double tq_group_norm_sq_bound(int n, double cmax, bool fp32) {
  const double r = static_cast<double>(stored_radius_max(fp32)) * cmax;
  return static_cast<double>(n) * r * r;
}

//! True when a (corrected) radius rs changes when stored by more than rounding: fp32
//! beyond fp32_radius_max, fp16 beyond 65504 (counted in encode_stats::clamped_radii).
BGTQ_HOST_DEVICE bool radius_clamped(float rs, bool fp32) { return fp32 ? !(rs <= fp32_radius_max) : beyond_half(rs); }

//! The radius before storage: the norm r, or r / ||c(idx)|| with norm correction (cn,
//! the centroid norm, ignored when 0).
BGTQ_HOST_DEVICE float tq_corrected_radius(float r, float cn, bool norm_correction) {
  return norm_correction && cn > 0.0f ? r / cn : r;
}

//! Below this norm the sum of squares is subnormal or zero (a norm under ~1e-19 has
//! squares under float's normal range), so the norm is taken of a scaled copy too.
inline constexpr float tq_small_norm = 0x1p-60f;

//! True when the encoders quantize the direction of a scaled copy of x rather than x:
//! its norm r overflowed float or exceeds fp32_radius_max, where the rotation's sums
//! (up to r per coordinate) and 1/r (subnormal above 2^126) lose or overflow; or r is
//! below tq_small_norm, where the squares lost bits or vanished (an fp32 radius stored
//! 7.4e-25 as a zero vector and was 1% off around 1e-22; the zero rule is r < 1e-30).
BGTQ_HOST_DEVICE bool tq_prescaled(float r) { return !(r <= fp32_radius_max) || r < tq_small_norm; }

//! The copy's scale: 2^-ilogb(big), big = max_j |x_j| (finite), so the copy is exact and
//! its largest component lies in [1, 2); at most 2^126 (a subnormal big: the copy's
//! largest component is then at least 2^-23), and 1 for big = 0 (a zero vector).
BGTQ_HOST_DEVICE float tq_prescale(float big) {
  if (!(big > 0.0f)) return 1.0f;
  const int e = -ilogbf(big);
  return ldexpf(1.0f, e < 126 ? e : 126);
}

}  // namespace bgtq::detail
