#pragma once
//! @file codec/tq_codec.hpp
//! Uniform TQ-MSE as a flat vector codec.
//!
//! Record layout: `// [codes: ceil(n*b/8) bytes, bit_tight (LSB-first, b bits each)]
//! [radius: 2 bytes fp16 or 4 bytes fp32, little-endian]`. With b = 0 the record is
//! empty and decodes to zero.

#include <cstdint>

#include "../core/half.hpp"
#include "../pack/bit_tight.hpp"
#include "concepts.hpp"
#include "tq_quantizer.hpp"

namespace bgtq {

//! TurboQuant-MSE over the whole vector at one bit width.
class tq_mse_codec {
 public:
  tq_mse_codec() = default;
  explicit tq_mse_codec(const tq_params& p) : q_(p) {}

  int dim() const noexcept { return q_.dim(); }
  int bits() const noexcept { return q_.bits(); }
  //! Bytes of the packed codes.
  std::size_t code_bytes() const noexcept { return bit_tight::bytes(static_cast<std::size_t>(q_.dim()), q_.bits()); }
  //! Bytes of one record (codes + radius; 0 for b = 0).
  std::size_t bytes() const noexcept {
    return q_.bits() == 0 ? 0 : code_bytes() + static_cast<std::size_t>(radius_bytes(q_.params().radius));
  }
  const tq_quantizer& quantizer() const noexcept { return q_; }

  //! Encodes x[dim] into out[bytes()].
  errc encode(const float* x, std::uint8_t* out, encode_stats* st = nullptr) const {
    if (q_.bits() == 0) return detail::all_finite(x, static_cast<std::size_t>(dim())) ? errc::ok : errc::non_finite;
    alignas(64) std::uint8_t codes[max_codec_dim];
    float r = 0.0f;
    const errc e = q_.quantize(x, codes, r, st);
    if (e != errc::ok) return e;
    const std::size_t n = static_cast<std::size_t>(dim());
    switch (bits()) {
      case 1: bit_tight::pack_b<1>(codes, n, out); break;
      case 2: bit_tight::pack_b<2>(codes, n, out); break;
      case 3: bit_tight::pack_b<3>(codes, n, out); break;
      case 4: bit_tight::pack_b<4>(codes, n, out); break;
      case 5: bit_tight::pack_b<5>(codes, n, out); break;
      case 6: bit_tight::pack_b<6>(codes, n, out); break;
      case 7: bit_tight::pack_b<7>(codes, n, out); break;
      default: bit_tight::pack_b<8>(codes, n, out); break;
    }
    detail::store_radius(out + code_bytes(), r, q_.fp32_radius());
    return errc::ok;
  }
  //! Encodes fp16 input.
  errc encode(const half* x, std::uint8_t* out, encode_stats* st = nullptr) const {
    alignas(64) float f[max_codec_dim];
    for (int j = 0; j < dim(); ++j) f[j] = half_bits_to_float(x[j].bits);
    return encode(f, out, st);
  }
  //! Decodes in[bytes()] into x[dim].
  void decode(const std::uint8_t* in, float* x) const {
    if (q_.bits() == 0) {
      for (int j = 0; j < dim(); ++j) x[j] = 0.0f;
      return;
    }
    alignas(64) std::uint8_t codes[max_codec_dim];
    bit_tight::unpack(in, static_cast<std::size_t>(dim()), bits(), codes);
    q_.dequantize(codes, detail::load_radius(in + code_bytes(), q_.fp32_radius()), x);
  }

 private:
  tq_quantizer q_;
};

static_assert(vector_codec<tq_mse_codec>);

}  // namespace bgtq
