#pragma once
// Quantize-then-decode round trips of whole [T][H][D] activation arrays, per head, for
// the evaluation commands (eval, demo).
#include <bgtq/codec/block_gtq.hpp>
#include <bgtq/codec/kivi.hpp>
#include <bgtq/core/half.hpp>

#include <vector>

namespace bgtq::cli {

//! Every (token, head) row of x [T][H][D] through the flat codec codec_of(h); the
//! encoder's counts (clamped radii, zero vectors) are added to `st` when given.
template <class MakeCodec>
void roundtrip_rows(const float* x, int T, int H, int D, MakeCodec&& codec_of, float* out, encode_stats* st = nullptr) {
  for (int h = 0; h < H; ++h) {
    const block_gtq_codec c = codec_of(h);
    std::vector<std::uint8_t> buf(c.bytes() + 1);
    for (int t = 0; t < T; ++t) {
      const std::size_t off = (static_cast<std::size_t>(t) * H + h) * D;
      if (c.encode(x + off, buf.data(), st) != errc::ok) fail(errc::non_finite, "round trip: non-finite input row");
      c.decode(buf.data(), out + off);
    }
  }
}

//! KIVI round trip per head (keys per channel over 32-token groups, values per token).
inline void kivi_rows(const float* x, int T, int H, int D, const kivi_options& o, bool keys, float* out) {
  std::vector<float> a(static_cast<std::size_t>(T) * D), b(a.size());
  for (int h = 0; h < H; ++h) {
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < D; ++j) a[static_cast<std::size_t>(t) * D + j] = x[(static_cast<std::size_t>(t) * H + h) * D + j];
    if (keys)
      kivi_keys_roundtrip(a.data(), T, D, o, b.data());
    else
      kivi_values_roundtrip(a.data(), T, D, o, b.data());
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < D; ++j) out[(static_cast<std::size_t>(t) * H + h) * D + j] = b[static_cast<std::size_t>(t) * D + j];
  }
}

//! x[0..n) rounded to fp16 (saturated, as the cache's fp16 window stores them) into out.
inline void fp16_rows(const float* x, std::size_t n, std::vector<float>& out) {
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = stored_half(x[i]);
}

}  // namespace bgtq::cli
