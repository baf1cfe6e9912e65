#pragma once
//! @file tests/fuzz/target_npy.hpp
//! Fuzz target: the .npy reader (bgtq::parse_npy). Any input either parses or throws
//! bgtq::error. A parsed array must be self-consistent (data size = product of the
//! shape) and must survive a write/parse round trip with the same shape, dtype and
//! values (NaN stays NaN).

#include <bgtq/io/npy.hpp>

#include <cmath>

#include "fuzz_util.hpp"

namespace bgtq_fuzz {

inline int npy_one(const std::uint8_t* data, std::size_t size) {
  bgtq::npy_array a;
  try {
    a = bgtq::parse_npy(data, size, "fuzz.npy");
  } catch (const bgtq::error&) {
    return 0;
  }
  BGTQ_FUZZ_CHECK("npy", a.data.size() == a.size());
  try {
    bgtq::require_finite(a, "fuzz.npy");
  } catch (const bgtq::error& e) {
    BGTQ_FUZZ_CHECK("npy", e.code() == bgtq::errc::non_finite);
  }
  // Round trip: the writer's image of the parsed array parses to the same array.
  if (a.data.size() <= (1u << 20)) {
    const std::vector<unsigned char> img = bgtq::npy_bytes(a.data.data(), a.shape, a.dtype);
    const bgtq::npy_array b = bgtq::parse_npy(img.data(), img.size(), "roundtrip.npy");
    BGTQ_FUZZ_CHECK("npy", b.shape == a.shape && b.dtype == a.dtype && b.data.size() == a.data.size());
    for (std::size_t i = 0; i < a.data.size(); ++i) {
      const float x = a.data[i], y = b.data[i];
      BGTQ_FUZZ_CHECK("npy", (std::isnan(x) && std::isnan(y)) || std::memcmp(&x, &y, 4) == 0);
    }
  }
  return 0;
}

}  // namespace bgtq_fuzz
