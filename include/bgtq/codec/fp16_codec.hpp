#pragma once
//! @file codec/fp16_codec.hpp
//! fp16 passthrough codec (the uncompressed baseline).
//! Record layout: `// [dim halves, IEEE binary16 little-endian]`.

#include <cstdint>

#include "../core/half.hpp"
#include "../core/simd.hpp"
#include "concepts.hpp"

namespace bgtq {

//! Stores each value as IEEE fp16 (round to nearest even). Values that would round to
//! Inf are an error, so encode rejects |x| > 65519 with errc::non_finite as well (from
//! 65520 on fp16 rounding gives Inf; 65504 < |x| <= 65519 round to 65504 and are kept).
class fp16_codec {
 public:
  fp16_codec() = default;
  explicit fp16_codec(int dim) : dim_(dim) {
    BGTQ_REQUIRE(dim >= 1, errc::invalid_argument, "fp16 codec dimension must be >= 1");
  }
  int dim() const noexcept { return dim_; }
  std::size_t bytes() const noexcept { return 2u * static_cast<std::size_t>(dim_); }
  errc encode(const float* x, std::uint8_t* out) const {
    if (!detail::all_finite(x, static_cast<std::size_t>(dim_))) return errc::non_finite;
    for (int j = 0; j < dim_; ++j)
      if (x[j] > 65519.0f || x[j] < -65519.0f) return errc::non_finite;
    for (int j = 0; j < dim_; ++j) {
      const std::uint16_t h = float_to_half_bits(x[j]);
      out[2 * j] = static_cast<std::uint8_t>(h);
      out[2 * j + 1] = static_cast<std::uint8_t>(h >> 8);
    }
    return errc::ok;
  }
  void decode(const std::uint8_t* in, float* x) const {
    for (int j = 0; j < dim_; ++j) x[j] = half_bits_to_float(static_cast<std::uint16_t>(in[2 * j] | (in[2 * j + 1] << 8)));
  }

 private:
  int dim_ = 0;
};

static_assert(vector_codec<fp16_codec>);

}  // namespace bgtq
