#pragma once
//! @file half.hpp
//! Portable IEEE-754 binary16 (fp16) and bfloat16 conversions, bit-exact on every
//! compiler and on the device (no CUDA headers). On nvcc's device pass the fp16
//! conversions are the hardware's (`cvt.f32.f16`, `cvt.rn.f16.f32`): the same IEEE
//! results as the portable code (exact widening; round to nearest even, overflow to
//! +-Inf, subnormals kept) with only a NaN's payload free to differ (it stays a NaN), in
//! one instruction where the portable code branches.
//! float -> half rounds to nearest, ties to even; overflow gives +-Inf, NaN stays NaN.

#include <cstdint>
#include <cstring>

#include "../config.hpp"

namespace bgtq {

namespace detail {
BGTQ_HOST_DEVICE std::uint32_t float_as_bits(float f) {
#if BGTQ_DEVICE_PASS
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
BGTQ_HOST_DEVICE float bits_as_float(std::uint32_t u) {
#if BGTQ_DEVICE_PASS
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
}  // namespace detail

//! fp32 -> fp16 bits, round to nearest even.
BGTQ_HOST_DEVICE std::uint16_t float_to_half_bits(float f) {
#if BGTQ_DEVICE_PASS
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  const std::uint32_t x = detail::float_as_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // Inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x0200u | ((absx >> 13) & 0x3ffu) : 0u));
  }
  if (absx >= 0x477ff000u) {  // rounds to >= 65520 -> Inf
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  }
  if (absx < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    if (absx < 0x33000000u) return static_cast<std::uint16_t>(sign);  // < 2^-25 rounds to 0
    const std::uint32_t e = absx >> 23;
    const std::uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - e;  // 14..24 -> result = m >> (shift - 0) scaled
    // value = m * 2^(e-150); half subnormal unit = 2^-24 -> q = m * 2^(e-126)
    const std::uint32_t q = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1u);
    std::uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
    return static_cast<std::uint16_t>(sign | r);
  }
  // normal: rebias exponent 127 -> 15, keep 10 mantissa bits, round to nearest even
  std::uint32_t r = absx - 0x38000000u;  // exponent - 112
  const std::uint32_t rem = r & 0x1fffu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<std::uint16_t>(sign | r);
#endif
}

//! fp16 bits -> fp32 (exact).
BGTQ_HOST_DEVICE float half_bits_to_float(std::uint16_t h) {
#if BGTQ_DEVICE_PASS
  // one instruction instead of the branches below (the subnormal loop among them): the
  // decode kernels convert every radius and fp16 window element through here
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  const std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu;
  std::uint32_t m = h & 0x3ffu;
  std::uint32_t out;
  if (e == 0) {
    if (m == 0) {
      out = sign;
    } else {  // subnormal: normalise
      std::uint32_t ex = 113;  // 127 - 14
      while ((m & 0x400u) == 0) {
        m <<= 1;
        --ex;
      }
      out = sign | (ex << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (e == 31) {
    out = sign | 0x7f800000u | (m << 13);
  } else {
    out = sign | ((e + 112u) << 23) | (m << 13);
  }
  return detail::bits_as_float(out);
#endif
}

//! fp32 -> bfloat16 bits, round to nearest even (NaN stays NaN).
BGTQ_HOST_DEVICE std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t x = detail::float_as_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  const std::uint32_t lsb = (x >> 16) & 1u;
  return static_cast<std::uint16_t>((x + 0x7fffu + lsb) >> 16);
}

//! bfloat16 bits -> fp32 (exact).
BGTQ_HOST_DEVICE float bf16_bits_to_float(std::uint16_t h) {
  return detail::bits_as_float(static_cast<std::uint32_t>(h) << 16);
}

//! Largest finite fp16 value.
inline constexpr float half_max = 65504.0f;

//! True when |x| is beyond the finite fp16 range (false for NaN): the values
//! saturate_half changes, which the caches count as clamps (docs/errors.md).
BGTQ_HOST_DEVICE constexpr bool beyond_half(float x) { return x > half_max || x < -half_max; }

//! x clamped to [-65504, 65504] (NaN stays NaN): how every fp16 store of the library
//! (window rows, fp16 pages, radii, KIVI scale and zero point) saturates instead of
//! rounding to Inf.
BGTQ_HOST_DEVICE constexpr float saturate_half(float x) { return x > half_max ? half_max : (x < -half_max ? -half_max : x); }

//! The value x keeps through one of those fp16 stores: saturated, then rounded to nearest even.
BGTQ_HOST_DEVICE float stored_half(float x) { return half_bits_to_float(float_to_half_bits(saturate_half(x))); }

//! A 16-bit IEEE half stored as bits; explicit conversions only, so no arithmetic on
//! halves happens by accident.
struct half {
  std::uint16_t bits = 0;
  half() = default;
  BGTQ_HOST_DEVICE explicit half(float f) : bits(float_to_half_bits(f)) {}
  BGTQ_HOST_DEVICE static half from_bits(std::uint16_t b) {
    half h;
    h.bits = b;
    return h;
  }
  BGTQ_HOST_DEVICE explicit operator float() const { return half_bits_to_float(bits); }
  friend bool operator==(half a, half b) { return a.bits == b.bits; }
};
static_assert(sizeof(half) == 2);

//! A bfloat16 stored as bits.
struct bfloat16 {
  std::uint16_t bits = 0;
  bfloat16() = default;
  BGTQ_HOST_DEVICE explicit bfloat16(float f) : bits(float_to_bf16_bits(f)) {}
  BGTQ_HOST_DEVICE explicit operator float() const { return bf16_bits_to_float(bits); }
};
static_assert(sizeof(bfloat16) == 2);

//! Element conversion used by templated loaders: float, half or bfloat16 -> float.
BGTQ_HOST_DEVICE float to_float(float x) { return x; }
BGTQ_HOST_DEVICE float to_float(half x) { return half_bits_to_float(x.bits); }
BGTQ_HOST_DEVICE float to_float(bfloat16 x) { return bf16_bits_to_float(x.bits); }

}  // namespace bgtq
