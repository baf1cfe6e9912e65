#pragma once
//! @file cache/fp16_pages.hpp
//! fp16 page codec: the uncompressed baseline, vectorised like the packed codecs so the
//! comparison is fair. Page part of one (layer, KV head), P tokens:
//! `// [coord j][token t] fp16, little-endian` (channel-major: 16 tokens of one
//! coordinate are one 32-byte load).

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "../codec/tq_quantizer.hpp"
#include "../core/half.hpp"
#include "../core/prefetch.hpp"
#include "../core/vec16.hpp"
#include "head_blocks.hpp"

namespace bgtq {

//! fp16 page codec (keys or values).
struct fp16_pages {
  static constexpr const char* name = "fp16";
  static constexpr int tokens_per_block = 1;

  struct head_state {
    int D = 0;
    int P = 0;
    std::size_t bytes = 0;
    int dim() const noexcept { return D; }
  };

  //! The largest norm of a key this codec can hold: every component at most 65504.
  static double key_norm_bound(const head_state& s) noexcept {
    return static_cast<double>(half_max) * std::sqrt(static_cast<double>(s.D));
  }

  static head_state make(int head_dim) {
    // even: the GQA kernels step two coordinates at a time
    BGTQ_REQUIRE(head_dim >= 2 && head_dim % 2 == 0 && head_dim <= max_codec_dim, errc::invalid_argument,
                 "fp16 page codec: head_dim " + std::to_string(head_dim) + " must be even and in 2.." +
                     std::to_string(max_codec_dim));
    head_state s;
    s.D = head_dim;
    return s;
  }

  template <class Layout>
  static std::size_t configure(head_state& s, int P) {
    s.P = P;
    s.bytes = (static_cast<std::size_t>(s.D) * static_cast<std::size_t>(P) * 2u + 63u) & ~static_cast<std::size_t>(63u);
    return s.bytes;
  }

  //! Values beyond +-65504 are clamped (counted in st->clamped_radii).
  template <class Layout>
  static void encode_block(const head_state& s, const float* x, std::size_t stride, int nt, std::uint8_t* page, int t0,
                           encode_stats* st) {
    for (int i = 0; i < nt; ++i) {
      const float* row = x + static_cast<std::size_t>(i) * stride;
      if (st) ++st->vectors;
      for (int j = 0; j < s.D; ++j) {
        if (st && beyond_half(row[j])) ++st->clamped_radii;
        const std::uint16_t h = float_to_half_bits(saturate_half(row[j]));
        std::uint8_t* p = page + (static_cast<std::size_t>(j) * s.P + static_cast<std::size_t>(t0 + i)) * 2u;
        p[0] = static_cast<std::uint8_t>(h);
        p[1] = static_cast<std::uint8_t>(h >> 8);
      }
    }
  }

  template <class Layout>
  static void decode_token(const head_state& s, const std::uint8_t* page, int t, float* x) {
    for (int j = 0; j < s.D; ++j) {
      const std::uint8_t* p = page + (static_cast<std::size_t>(j) * s.P + static_cast<std::size_t>(t)) * 2u;
      x[j] = half_bits_to_float(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
    }
  }

  static std::size_t query_floats(const head_state& s, int G) { return static_cast<std::size_t>(G) * s.D; }
  static void prepare_query(const head_state& s, const float* q, int G, float* qbuf) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(G) * s.D; ++i) qbuf[i] = q[i];
  }

  //! pf: the next page's prefetch, one line per coordinate iteration (core/prefetch.hpp).
  template <class Layout>
  static void score_page(const head_state& s, const float* qbuf, int G, const std::uint8_t* page, int nvalid,
                         float* scores, prefetch_stream& pf = prefetch_stream::idle()) {
    const int chunks = (nvalid + 15) / 16;
    const std::size_t P = static_cast<std::size_t>(s.P);
    detail::for_head_blocks<detail::max_score_heads>(G, [&](int h, auto gb_c) {
      score_heads<decltype(gb_c)::value>(s, qbuf + static_cast<std::size_t>(h) * s.D, page, chunks, scores + h * P, pf);
    });
  }

  static std::size_t acc_floats(const head_state& s, int G) { return static_cast<std::size_t>(G) * s.D * 16u; }

  template <class Layout>
  static void accumulate_page(const head_state& s, const std::uint8_t* page, int nvalid, const float* w, int G, float* acc,
                              float* tmp) {
    (void)tmp;
    const int chunks = (nvalid + 15) / 16;
    detail::for_head_blocks<4>(G, [&](int h, auto gb_c) {
      accumulate_heads<decltype(gb_c)::value>(s, page, chunks, w + static_cast<std::size_t>(h) * s.P,
                                              acc + static_cast<std::size_t>(h) * s.D * 16u);
    });
  }

  static void finish(const head_state& s, const float* acc, int G, float* out) {
    for (int h = 0; h < G; ++h)
      for (int j = 0; j < s.D; ++j)
        out[static_cast<std::size_t>(h) * s.D + j] +=
            simd::hsum(simd::load(acc + (static_cast<std::size_t>(h) * s.D + static_cast<std::size_t>(j)) * 16u));
  }

 private:
  template <int GB>
  static void score_heads(const head_state& s, const float* q, const std::uint8_t* page, int chunks, float* scores,
                          prefetch_stream& pf) {
    const std::size_t P = static_cast<std::size_t>(s.P);
    for (int c = 0; c < chunks; ++c) {
      const std::size_t t0 = static_cast<std::size_t>(c) * 16u;
      simd::vf16 acc[GB];
      for (int hh = 0; hh < GB; ++hh) acc[hh] = simd::zero();
      for (int j = 0; j < s.D; ++j) {
        pf.next();
        const simd::vf16 kv = simd::load_half(page + (static_cast<std::size_t>(j) * P + t0) * 2u);
        for (int hh = 0; hh < GB; ++hh) acc[hh] = simd::fma(kv, simd::set1(q[hh * s.D + j]), acc[hh]);
      }
      for (int hh = 0; hh < GB; ++hh) simd::store(scores + hh * P + t0, acc[hh]);
    }
  }

  template <int GB>
  static void accumulate_heads(const head_state& s, const std::uint8_t* page, int chunks, const float* w, float* acc) {
    const std::size_t P = static_cast<std::size_t>(s.P);
    const std::size_t hstride = static_cast<std::size_t>(s.D) * 16u;
    for (int j = 0; j < s.D; j += 2) {
      simd::vf16 a0[GB], a1[GB];
      for (int hh = 0; hh < GB; ++hh) {
        a0[hh] = simd::load(acc + hh * hstride + static_cast<std::size_t>(j) * 16u);
        a1[hh] = simd::load(acc + hh * hstride + static_cast<std::size_t>(j + 1) * 16u);
      }
      for (int c = 0; c < chunks; ++c) {
        const std::size_t t0 = static_cast<std::size_t>(c) * 16u;
        const simd::vf16 v0 = simd::load_half(page + (static_cast<std::size_t>(j) * P + t0) * 2u);
        const simd::vf16 v1 = simd::load_half(page + (static_cast<std::size_t>(j + 1) * P + t0) * 2u);
        for (int hh = 0; hh < GB; ++hh) {
          const simd::vf16 wv = simd::load(w + hh * P + t0);
          a0[hh] = simd::fma(v0, wv, a0[hh]);
          a1[hh] = simd::fma(v1, wv, a1[hh]);
        }
      }
      for (int hh = 0; hh < GB; ++hh) {
        simd::store(acc + hh * hstride + static_cast<std::size_t>(j) * 16u, a0[hh]);
        simd::store(acc + hh * hstride + static_cast<std::size_t>(j + 1) * 16u, a1[hh]);
      }
    }
  }
};

}  // namespace bgtq
