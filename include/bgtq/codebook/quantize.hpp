#pragma once
//! @file codebook/quantize.hpp
//! The scalar quantization step shared by the CPU codecs and the CUDA kernels: a
//! branch-free binary search over a codebook's thresholds. No std headers beyond
//! `<cstdint>`, no allocation, no exceptions (safe in device code).

#include <cstdint>

#include "../config.hpp"

namespace bgtq {

//! Cell index of `y` for a b-bit codebook (1 <= bits <= 8): the number of thresholds t
//! with y > t, found in `bits` comparisons over `thresholds` (2^bits - 1 ascending
//! floats, e.g. codebook::thresholds().data()). Ties (y == t) go to the lower cell;
//! NaN gives 0, -inf gives 0, +inf gives 2^bits - 1. With the thresholds of
//! bgtq::codebook this is exactly the index of the nearest centroid.
BGTQ_HOST_DEVICE std::uint8_t codebook_quantize(const float* thresholds, int bits, float y) noexcept {
  int idx = 0;
  for (int step = 1 << (bits - 1); step > 0; step >>= 1) idx += (y > thresholds[idx + step - 1]) ? step : 0;
  return static_cast<std::uint8_t>(idx);
}

}  // namespace bgtq
