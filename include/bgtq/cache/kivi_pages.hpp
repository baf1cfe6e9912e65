#pragma once
//! @file cache/kivi_pages.hpp
//! KIVI page codecs (baseline). Keys: per-channel statistics over blocks of 32 tokens
//! (the cache holds an incomplete block in its fp16 window until it fills, as KIVI
//! does). Values: per-token statistics.
//!
//! Key page part, P tokens (P/32 blocks):
//! `// [codes: Layout region (D coords, b bits, P tokens)]
//! //  [params: [block][D] scale fp16, then (asymmetric only) [block][D] zero fp16]`
//! Value page part: `// [codes: Layout region (D, b, P)] [scale: [P] fp16] [zero: [P] fp16]`
//! (the zero array is absent in the symmetric variant).
//!
//! Scores need no decode: q.k_hat = sum_j q_j z_j + sum_j (q_j s_j) code_j, the first
//! term once per block; values accumulate sum_t w_t z_t once per token and
//! sum_t (w_t s_t) code_tj per coordinate.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "../codec/kivi.hpp"
#include "../codec/tq_quantizer.hpp"
#include "../core/prefetch.hpp"
#include "../core/vec16.hpp"
#include "kv_cache.hpp"
#include "page_layout.hpp"

namespace bgtq {

namespace detail {
inline float load_half_at(const std::uint8_t* p, std::size_t i) {
  return half_bits_to_float(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
}
inline void store_half_at(std::uint8_t* p, std::size_t i, float v) {
  const std::uint16_t h = float_to_half_bits(v);
  p[2 * i] = static_cast<std::uint8_t>(h);
  p[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
}
template <int B>
struct kivi_bits_tag {
  static constexpr int value = B;
};
template <class F>
void kivi_dispatch_bits(int b, F&& f) {
  switch (b) {
    case 1: f(kivi_bits_tag<1>{}); break;
    case 2: f(kivi_bits_tag<2>{}); break;
    case 3: f(kivi_bits_tag<3>{}); break;
    case 4: f(kivi_bits_tag<4>{}); break;
    case 5: f(kivi_bits_tag<5>{}); break;
    case 6: f(kivi_bits_tag<6>{}); break;
    case 7: f(kivi_bits_tag<7>{}); break;
    default: f(kivi_bits_tag<8>{}); break;
  }
}
}  // namespace detail

//! KIVI keys: per-channel over 32-token blocks.
struct kivi_key_pages {
  static constexpr const char* name = "kivi-k";
  static constexpr int tokens_per_block = 32;

  struct head_state {
    int D = 0;
    kivi_options opt;
    int P = 0;
    std::size_t params = 0;  //!< offset of the parameter arrays
    std::size_t bytes = 0;
    int dim() const noexcept { return D; }
  };

  //! The largest norm of a key this codec can decode: each component is zero + scale *
  //! code with code in [0, 2^bits - 1] and |scale| at most 65504 (fp16); asymmetric: a
  //! stored fp16 zero, |zero + scale * code| <= 65504 * 2^bits; symmetric: zero =
  //! -(2^bits - 1) / 2 * scale, |.| <= 65504 * (2^bits - 1) / 2. Either way at most
  //! 65504 * 2^bits per component.
  static double key_norm_bound(const head_state& s) noexcept {
    return static_cast<double>(half_max) * std::ldexp(1.0, s.opt.bits) * std::sqrt(static_cast<double>(s.D));
  }

  static head_state make(int head_dim, const kivi_options& o) {
    BGTQ_REQUIRE(o.bits >= 1 && o.bits <= 8, errc::invalid_argument, "kivi keys: bits " + std::to_string(o.bits) + " outside 1..8");
    // its kernels hold a token's or a channel's codes in arrays of max_codec_dim entries
    BGTQ_REQUIRE(head_dim >= 2 && head_dim % 2 == 0 && head_dim <= max_codec_dim, errc::invalid_argument,
                 "kivi keys: head_dim " + std::to_string(head_dim) + " must be even and in 2.." + std::to_string(max_codec_dim));
    BGTQ_REQUIRE(o.group_tokens == tokens_per_block, errc::unsupported, "kivi keys in the cache use 32-token groups");
    head_state s;
    s.D = head_dim;
    s.opt = o;
    return s;
  }

  template <class Layout>
  static std::size_t configure(head_state& s, int P) {
    s.P = P;
    s.params = Layout::bytes(s.D, s.opt.bits, P);
    const std::size_t nparams = s.opt.symmetric ? 1u : 2u;
    s.bytes = (s.params + nparams * static_cast<std::size_t>(P / 32) * s.D * 2u + 63u) & ~static_cast<std::size_t>(63u);
    return s.bytes;
  }

  //! Encodes a whole block: nt == 32 rows starting at a block boundary t0.
  template <class Layout>
  static void encode_block(const head_state& s, const float* x, std::size_t stride, int nt, std::uint8_t* page, int t0,
                           encode_stats* st) {
    const int blk = t0 / 32;
    std::uint8_t codes_row[max_codec_dim];
    std::uint8_t* scale = page + s.params;
    std::uint8_t* zero = scale + static_cast<std::size_t>(s.P / 32) * s.D * 2u;
    // per-channel statistics
    alignas(64) float sc[max_codec_dim], zr[max_codec_dim];
    for (int j = 0; j < s.D; ++j) {
      float lo = INFINITY, hi = -INFINITY;
      for (int i = 0; i < nt; ++i) {
        const float v = x[static_cast<std::size_t>(i) * stride + j];
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      detail::kivi_params(lo, hi, s.opt.bits, s.opt.symmetric, sc[j], zr[j]);
      detail::store_half_at(scale, static_cast<std::size_t>(blk) * s.D + j, sc[j]);
      if (!s.opt.symmetric) detail::store_half_at(zero, static_cast<std::size_t>(blk) * s.D + j, zr[j]);
    }
    for (int i = 0; i < nt; ++i) {
      if (st) ++st->vectors;
      for (int j = 0; j < s.D; ++j)
        codes_row[j] = static_cast<std::uint8_t>(detail::kivi_code(x[static_cast<std::size_t>(i) * stride + j], sc[j], zr[j], s.opt.bits));
      Layout::store(page, s.D, s.opt.bits, s.P, t0 + i, codes_row);
    }
  }

  static void block_params(const head_state& s, const std::uint8_t* page, int blk, int j, float& scale, float& zero) {
    const std::uint8_t* sp = page + s.params;
    scale = detail::load_half_at(sp, static_cast<std::size_t>(blk) * s.D + j);
    if (s.opt.symmetric) {
      zero = -0.5f * static_cast<float>((1 << s.opt.bits) - 1) * scale;
    } else {
      zero = detail::load_half_at(sp + static_cast<std::size_t>(s.P / 32) * s.D * 2u, static_cast<std::size_t>(blk) * s.D + j);
    }
  }

  template <class Layout>
  static void decode_token(const head_state& s, const std::uint8_t* page, int t, float* x) {
    for (int j = 0; j < s.D; ++j) {
      float sc, zr;
      block_params(s, page, t / 32, j, sc, zr);
      x[j] = zr + sc * static_cast<float>(Layout::load(page, s.D, s.opt.bits, s.P, t, j));
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
    detail::kivi_dispatch_bits(s.opt.bits, [&](auto tag) {
      constexpr int B = decltype(tag)::value;
      for (int h = 0; h < G; ++h) {
        const float* q = qbuf + static_cast<std::size_t>(h) * s.D;
        for (int c = 0; c < chunks; ++c) {
          const int t0 = c * 16;
          const int blk = t0 / 32;
          float base = 0.0f;
          simd::vf16 acc = simd::zero();
          for (int j = 0; j < s.D; ++j) {
            pf.next();
            float sc, zr;
            block_params(s, page, blk, j, sc, zr);
            base += q[j] * zr;
            const simd::vf16 cv = simd::to_float(Layout::template load16<B>(page, s.D, s.P, t0, j));
            acc = simd::fma(cv, simd::set1(q[j] * sc), acc);
          }
          simd::store(scores + static_cast<std::size_t>(h) * s.P + t0, simd::add(acc, simd::set1(base)));
        }
      }
    });
  }
};

//! KIVI values: per-token scale and zero.
struct kivi_value_pages {
  static constexpr const char* name = "kivi-v";
  static constexpr int tokens_per_block = 1;

  struct head_state {
    int D = 0;
    kivi_options opt;
    int P = 0;
    std::size_t params = 0;
    std::size_t bytes = 0;
    int dim() const noexcept { return D; }
  };

  static head_state make(int head_dim, const kivi_options& o) {
    BGTQ_REQUIRE(o.bits >= 1 && o.bits <= 8, errc::invalid_argument, "kivi values: bits " + std::to_string(o.bits) + " outside 1..8");
    // its kernels hold a token's or a channel's codes in arrays of max_codec_dim entries
    BGTQ_REQUIRE(head_dim >= 2 && head_dim % 2 == 0 && head_dim <= max_codec_dim, errc::invalid_argument,
                 "kivi values: head_dim " + std::to_string(head_dim) + " must be even and in 2.." + std::to_string(max_codec_dim));
    head_state s;
    s.D = head_dim;
    s.opt = o;
    return s;
  }

  template <class Layout>
  static std::size_t configure(head_state& s, int P) {
    s.P = P;
    s.params = Layout::bytes(s.D, s.opt.bits, P);
    const std::size_t nparams = s.opt.symmetric ? 1u : 2u;
    s.bytes = (s.params + nparams * static_cast<std::size_t>(P) * 2u + 63u) & ~static_cast<std::size_t>(63u);
    return s.bytes;
  }

  template <class Layout>
  static void encode_block(const head_state& s, const float* x, std::size_t stride, int nt, std::uint8_t* page, int t0,
                           encode_stats* st) {
    std::uint8_t codes_row[max_codec_dim];
    for (int i = 0; i < nt; ++i) {
      const float* r = x + static_cast<std::size_t>(i) * stride;
      float lo = INFINITY, hi = -INFINITY;
      for (int j = 0; j < s.D; ++j) {
        lo = std::min(lo, r[j]);
        hi = std::max(hi, r[j]);
      }
      float sc, zr;
      detail::kivi_params(lo, hi, s.opt.bits, s.opt.symmetric, sc, zr);
      for (int j = 0; j < s.D; ++j) codes_row[j] = static_cast<std::uint8_t>(detail::kivi_code(r[j], sc, zr, s.opt.bits));
      Layout::store(page, s.D, s.opt.bits, s.P, t0 + i, codes_row);
      detail::store_half_at(page + s.params, static_cast<std::size_t>(t0 + i), sc);
      if (!s.opt.symmetric) detail::store_half_at(page + s.params + static_cast<std::size_t>(s.P) * 2u, static_cast<std::size_t>(t0 + i), zr);
      if (st) ++st->vectors;
    }
  }

  static void token_params(const head_state& s, const std::uint8_t* page, int t, float& scale, float& zero) {
    scale = detail::load_half_at(page + s.params, static_cast<std::size_t>(t));
    zero = s.opt.symmetric ? -0.5f * static_cast<float>((1 << s.opt.bits) - 1) * scale
                           : detail::load_half_at(page + s.params + static_cast<std::size_t>(s.P) * 2u, static_cast<std::size_t>(t));
  }

  template <class Layout>
  static void decode_token(const head_state& s, const std::uint8_t* page, int t, float* x) {
    float sc, zr;
    token_params(s, page, t, sc, zr);
    for (int j = 0; j < s.D; ++j) x[j] = zr + sc * static_cast<float>(Layout::load(page, s.D, s.opt.bits, s.P, t, j));
  }

  //! [G][D+1][16]: coordinate D holds the lanes of sum_t w_t z_t.
  static std::size_t acc_floats(const head_state& s, int G) { return static_cast<std::size_t>(G) * (s.D + 1) * 16u; }

  template <class Layout>
  static void accumulate_page(const head_state& s, const std::uint8_t* page, int nvalid, const float* w, int G, float* acc,
                              float* tmp) {
    const int chunks = (nvalid + 15) / 16;
    const std::size_t P = static_cast<std::size_t>(s.P);
    const std::size_t hstride = static_cast<std::size_t>(s.D + 1) * 16u;
    // per-token parameters as vectors: tmp[0..P) scale, tmp[P..2P) zero
    for (int t = 0; t < chunks * 16; ++t) token_params(s, page, t, tmp[t], tmp[P + static_cast<std::size_t>(t)]);
    detail::kivi_dispatch_bits(s.opt.bits, [&](auto tag) {
      constexpr int B = decltype(tag)::value;
      for (int h = 0; h < G; ++h) {
        float* a = acc + static_cast<std::size_t>(h) * hstride;
        for (int c = 0; c < chunks; ++c) {
          const int t0 = c * 16;
          const simd::vf16 wv = simd::load(w + static_cast<std::size_t>(h) * P + t0);
          const simd::vf16 ws = simd::mul(wv, simd::load(tmp + t0));
          simd::store(a + static_cast<std::size_t>(s.D) * 16u,
                      simd::fma(wv, simd::load(tmp + P + static_cast<std::size_t>(t0)), simd::load(a + static_cast<std::size_t>(s.D) * 16u)));
          for (int j = 0; j < s.D; ++j) {
            const simd::vf16 cv = simd::to_float(Layout::template load16<B>(page, s.D, s.P, t0, j));
            float* aj = a + static_cast<std::size_t>(j) * 16u;
            simd::store(aj, simd::fma(cv, ws, simd::load(aj)));
          }
        }
      }
    });
  }

  static void finish(const head_state& s, const float* acc, int G, float* out) {
    const std::size_t hstride = static_cast<std::size_t>(s.D + 1) * 16u;
    for (int h = 0; h < G; ++h) {
      const float* a = acc + static_cast<std::size_t>(h) * hstride;
      const float zsum = simd::hsum(simd::load(a + static_cast<std::size_t>(s.D) * 16u));
      for (int j = 0; j < s.D; ++j) out[static_cast<std::size_t>(h) * s.D + j] += simd::hsum(simd::load(a + static_cast<std::size_t>(j) * 16u)) + zsum;
    }
  }
};

//! KIVI keys + KIVI values.
template <class Layout = bit_plane_layout>
using kivi_cache = kv_cache<kivi_key_pages, kivi_value_pages, Layout>;

//! A KIVI cache with the same options for every (layer, KV head), the way fp16_states
//! serves fp16_cache: `auto c = bgtq::make_kivi_cache(cfg, {.bits = 2});`. The
//! three-argument form takes the key and the value options apart (e.g. K4V2).
//! @throws bgtq::error as kivi_key_pages::make / kivi_value_pages::make and kv_cache;
//!         capacity_exhausted when the machine cannot hold the states
template <class Layout = bit_plane_layout>
kivi_cache<Layout> make_kivi_cache(const cache_config& cfg, const kivi_options& key_options, const kivi_options& value_options) {
  BGTQ_REQUIRE(cfg.layers >= 1 && cfg.kv_heads >= 1, errc::invalid_argument,
               "make_kivi_cache: layers = " + std::to_string(cfg.layers) + ", kv_heads = " + std::to_string(cfg.kv_heads));
  const std::size_t n = static_cast<std::size_t>(cfg.layers) * static_cast<std::size_t>(cfg.kv_heads);
  const kivi_key_pages::head_state k = kivi_key_pages::make(cfg.head_dim, key_options);
  const kivi_value_pages::head_state v = kivi_value_pages::make(cfg.head_dim, value_options);
  auto keys = or_capacity_exhausted("make_kivi_cache: " + std::to_string(n) + " (layer, KV head) key states",
                                    [&] { return std::vector<kivi_key_pages::head_state>(n, k); });
  auto values = or_capacity_exhausted("make_kivi_cache: " + std::to_string(n) + " (layer, KV head) value states",
                                      [&] { return std::vector<kivi_value_pages::head_state>(n, v); });
  return kivi_cache<Layout>(cfg, std::move(keys), std::move(values));
}
template <class Layout = bit_plane_layout>
kivi_cache<Layout> make_kivi_cache(const cache_config& cfg, const kivi_options& o) {
  return make_kivi_cache<Layout>(cfg, o, o);
}

//! Bytes per quantized token that a KIVI cache with pages of `page_tokens` tokens in
//! `Layout` stores for one head's keys (`kivi_key_stored_bytes_per_token`) or values
//! (`kivi_value_stored_bytes_per_token`) with options `o`: codes, fp16 scales and zero
//! points, and the page part's 64-byte alignment, over the page size. Exactly
//! kv_cache::bytes_per_token's share of that part, as stored_bytes_per_token (factory.hpp)
//! for Block-GTQ and TQ-MSE; kivi_key_bytes_per_token / kivi_value_bytes_per_token
//! (codec/kivi.hpp) leave the alignment out (at D = 10, 2 bits: 4.0 + 7.0 stored, 3.75 +
//! 6.5 without it).
//! @throws bgtq::error as kivi_key_pages::make / kivi_value_pages::make, and
//!         (invalid_argument) for a page size the layout or the 32-token key blocks cannot
//!         hold (as cache_config's page_tokens)
namespace detail {
template <class Pages, class Layout>
double kivi_stored_bytes_per_token(int head_dim, const kivi_options& o, int page_tokens, const char* who) {
  check_page_tokens<Layout>(page_tokens, Pages::tokens_per_block, who);
  typename Pages::head_state s = Pages::make(head_dim, o);
  return static_cast<double>(Pages::template configure<Layout>(s, page_tokens)) / static_cast<double>(page_tokens);
}
}  // namespace detail
template <class Layout = bit_plane_layout>
double kivi_key_stored_bytes_per_token(int head_dim, const kivi_options& o, int page_tokens = 64) {
  return detail::kivi_stored_bytes_per_token<kivi_key_pages, Layout>(head_dim, o, page_tokens,
                                                                     "kivi_key_stored_bytes_per_token");
}
template <class Layout = bit_plane_layout>
double kivi_value_stored_bytes_per_token(int head_dim, const kivi_options& o, int page_tokens = 64) {
  return detail::kivi_stored_bytes_per_token<kivi_value_pages, Layout>(head_dim, o, page_tokens,
                                                                       "kivi_value_stored_bytes_per_token");
}

}  // namespace bgtq
