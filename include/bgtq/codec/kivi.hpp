#pragma once
//! @file codec/kivi.hpp
//! KIVI-style uniform quantization, the baseline (Liu et al., "KIVI", 2024): keys
//! per channel over groups of 32 tokens, values per token; b-bit integer codes with an
//! fp16 scale and zero point per group. The "scale-only" variant is symmetric (absmax,
//! no stored zero point): levels (code - (2^b - 1)/2) * scale.
//!
//! The math here is shared by the flat round trip (for `bgtq eval`) and the cache's
//! page codecs (cache/kivi_pages.hpp).

#include <cmath>
#include <cstdint>
#include <vector>

#include "../config.hpp"
#include "../core/error.hpp"
#include "../core/half.hpp"

namespace bgtq {

//! KIVI options.
struct kivi_options {
  int bits = 2;            //!< 1..8
  bool symmetric = false;  //!< scale-only (absmax) variant
  int group_tokens = 32;   //!< tokens per key group (per-channel statistics)
};

namespace detail {

//! Scale and zero point (both fp16-rounded) for values in [lo, hi] at b bits.
//! Asymmetric: zero = lo, scale = (hi - lo) / (2^b - 1). Symmetric: a = max(|lo|, |hi|),
//! scale = 2a / (2^b - 1), zero = -(2^b - 1)/2 * scale. A constant group gets scale 0.
//! Scale and stored zero point saturate at the fp16 range (+-65504) instead of becoming
//! Inf (stored_half), so a group beyond that range decodes with clamped codes, never to
//! NaN/Inf.

BGTQ_HOST_DEVICE void kivi_params(float lo, float hi, int bits, bool symmetric, float& scale, float& zero) {
  const float levels = static_cast<float>((1 << bits) - 1);
  if (symmetric) {
    const float a = (hi > -lo ? hi : -lo);
    scale = stored_half(2.0f * a / levels);
    zero = -0.5f * levels * scale;
  } else {
    scale = stored_half((hi - lo) / levels);
    zero = stored_half(lo);
  }
}

//! Nearest integer code of x for (scale, zero) at b bits, clamped to [0, 2^b - 1].
BGTQ_HOST_DEVICE int kivi_code(float x, float scale, float zero, int bits) {
  const int maxc = (1 << bits) - 1;
  if (!(scale > 0.0f)) return 0;
  const float c = (x - zero) / scale;
  // clamp before converting: a float outside int's range (or NaN) must never reach the cast
  if (!(c > -0.5f)) return 0;
  if (c >= static_cast<float>(maxc)) return maxc;
  return static_cast<int>(__builtin_floorf(c + 0.5f));
}

}  // namespace detail

//! Round trip of keys x[T][D] (one head) through KIVI per-channel quantization over
//! groups of `group_tokens` tokens (a final partial group uses its own statistics).
inline void kivi_keys_roundtrip(const float* x, int T, int D, const kivi_options& o, float* out) {
  BGTQ_REQUIRE(o.bits >= 1 && o.bits <= 8 && o.group_tokens >= 1, errc::invalid_argument, "kivi: bad options");
  for (int t0 = 0; t0 < T; t0 += o.group_tokens) {
    const int t1 = std::min(T, t0 + o.group_tokens);
    for (int j = 0; j < D; ++j) {
      float lo = INFINITY, hi = -INFINITY;
      for (int t = t0; t < t1; ++t) {
        lo = std::min(lo, x[static_cast<std::size_t>(t) * D + j]);
        hi = std::max(hi, x[static_cast<std::size_t>(t) * D + j]);
      }
      float s, z;
      detail::kivi_params(lo, hi, o.bits, o.symmetric, s, z);
      for (int t = t0; t < t1; ++t) {
        const std::size_t i = static_cast<std::size_t>(t) * D + j;
        out[i] = z + s * static_cast<float>(detail::kivi_code(x[i], s, z, o.bits));
      }
    }
  }
}

//! Round trip of values x[T][D] (one head) through KIVI per-token quantization.
inline void kivi_values_roundtrip(const float* x, int T, int D, const kivi_options& o, float* out) {
  BGTQ_REQUIRE(o.bits >= 1 && o.bits <= 8, errc::invalid_argument, "kivi: bad options");
  for (int t = 0; t < T; ++t) {
    const float* r = x + static_cast<std::size_t>(t) * D;
    float lo = INFINITY, hi = -INFINITY;
    for (int j = 0; j < D; ++j) {
      lo = std::min(lo, r[j]);
      hi = std::max(hi, r[j]);
    }
    float s, z;
    detail::kivi_params(lo, hi, o.bits, o.symmetric, s, z);
    for (int j = 0; j < D; ++j)
      out[static_cast<std::size_t>(t) * D + j] = z + s * static_cast<float>(detail::kivi_code(r[j], s, z, o.bits));
  }
}

//! Bytes per token of one head: codes plus fp16 parameters (keys: per channel per group,
//! amortised over the group; values: per token), without the KIVI cache's 64-byte page
//! alignment: what the cache stores is kivi_key_stored_bytes_per_token /
//! kivi_value_stored_bytes_per_token (cache/kivi_pages.hpp).
inline double kivi_key_bytes_per_token(int D, const kivi_options& o) {
  const int params = o.symmetric ? 1 : 2;
  return D * o.bits / 8.0 + 2.0 * params * D / o.group_tokens;
}
inline double kivi_value_bytes_per_token(int D, const kivi_options& o) {
  const int params = o.symmetric ? 1 : 2;
  return D * o.bits / 8.0 + 2.0 * params;
}

}  // namespace bgtq
