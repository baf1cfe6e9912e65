#pragma once
//! @file cache/gtq_pages.hpp
//! Page codec for grouped TQ-MSE: Block-GTQ keys, uniform TQ-MSE keys (one group of
//! all blocks) and TQ-MSE values (one group over the whole head). The math is the
//! flat codec's (block_gtq_codec / tq_quantizer); this file only places codes in pages
//! and scores / accumulates straight from them in the rotated domain.
//!
//! Page part of one (layer, KV head), P tokens:
//! `// [group 0 codes: Layout region (n0 coords, b0 bits, P tokens)] ... [group G-1 codes]
//! //  [radii: [group][P] fp16 or fp32, little-endian]`
//!
//! Attention never decodes a key or value to memory: the query of each group is
//! rotated once (q_rot = P_g q_g) and every key costs codebook lookups and
//! multiply-adds (on AVX-512, 1- and 2-bit groups by per-query tables over coordinate
//! pairs or fours instead: lut_units); values are accumulated as sum_t w_t r_t c(idx_t)
//! per coordinate and rotated back once per step (finish).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../codec/block_gtq.hpp"
#include "../core/prefetch.hpp"
#include "../core/vec16.hpp"
#include "head_blocks.hpp"
#include "page_layout.hpp"

namespace bgtq {

//! Grouped TQ-MSE page codec (stateless policy; per-head data lives in head_state).
struct gtq_pages {
  static constexpr const char* name = "gtq";
  //! Tokens encoded together (1: every token is independent).
  static constexpr int tokens_per_block = 1;

  //! Per-(layer, KV head) state.
  struct head_state {
    block_gtq_codec codec;              //!< groups, quantizers, dims
    int P = 0;                          //!< tokens per page
    std::vector<std::size_t> region;    //!< per group: offset of its code region
    std::vector<int> coord_off;         //!< per group: offset of its coordinates in [0, D)
    std::size_t radii = 0;              //!< offset of the radii array
    std::size_t bytes = 0;              //!< bytes of this codec's part of a page
    //! per group: 1 if its codebook is antisymmetric about its middle bit for bit
    //! (c[2^b-1-i] == -c[i], as every codebook kind gives), which the AVX2 key pass uses
    //! to look up half the table (fold_codes32); 0 or missing: the full lookup.
    std::vector<std::uint8_t> antisymmetric;
    double norm_bound = 0.0;            //!< the largest norm a decoded key can have (key_norm_bound)
    int dim() const noexcept { return codec.dim(); }
  };

  //! State for a Block-GTQ (or uniform TQ) key codec.
  static head_state make(block_gtq_codec codec) {
    head_state s;
    s.codec = std::move(codec);
    int off = 0;
    for (const auto& g : s.codec.groups()) {
      s.coord_off.push_back(off);
      off += g.quantizer.dim();
      s.antisymmetric.push_back(antisymmetric_codebook(g.quantizer) ? 1 : 0);
    }
    double sq = 0.0;
    for (const auto& g : s.codec.groups()) {
      double cmax = 0.0;
      for (int i = 0; i < (g.quantizer.bits() > 0 ? 1 << g.quantizer.bits() : 0); ++i)
        cmax = std::max(cmax, static_cast<double>(std::fabs(g.quantizer.centroids()[i])));
      sq += detail::tq_group_norm_sq_bound(g.quantizer.dim(), cmax, g.quantizer.fp32_radius());
    }
    s.norm_bound = std::sqrt(sq);
    return s;
  }

  //! The largest norm of a key this codec can decode (any radius it stores, any code):
  //! decode attention's overflow guard (attention/decode.hpp check_decode).
  static double key_norm_bound(const head_state& s) noexcept { return s.norm_bound; }

  //! True if q's centroids satisfy c[2^b-1-i] == -c[i] bit for bit (b >= 1).
  static bool antisymmetric_codebook(const tq_quantizer& q) {
    if (q.bits() < 1) return false;
    const int K = 1 << q.bits();
    const float* c = q.centroids();
    for (int i = 0; i < K / 2; ++i) {
      const float neg = -c[i];
      if (std::memcmp(&neg, &c[K - 1 - i], sizeof(float)) != 0) return false;
    }
    return true;
  }

  //! Computes the page offsets for P tokens; returns the bytes of this codec's page part.
  template <class Layout>
  static std::size_t configure(head_state& s, int P) {
    s.P = P;
    s.region.clear();
    std::size_t off = 0;
    for (const auto& g : s.codec.groups()) {
      s.region.push_back(off);
      off += Layout::bytes(g.quantizer.dim(), g.quantizer.bits(), P);
    }
    s.radii = off;
    if (!s.codec.groups().empty())
      off += s.codec.groups().size() * static_cast<std::size_t>(P) * radius_size(s);
    s.bytes = (off + 63u) & ~static_cast<std::size_t>(63u);
    return s.bytes;
  }

  static std::size_t radius_size(const head_state& s) {
    return s.codec.groups().empty() ? 2u : (s.codec.groups().front().quantizer.fp32_radius() ? 4u : 2u);
  }
  //! Group gi's radii in a page: P entries of radius_size(s) bytes.
  template <class Byte>  // std::uint8_t or const std::uint8_t
  static Byte* group_radii(const head_state& s, Byte* page, std::size_t gi) {
    return page + s.radii + gi * static_cast<std::size_t>(s.P) * radius_size(s);
  }

  //! Encodes nt finite rows x[i*stride .. +D) into page slots t0 .. t0+nt-1.
  template <class Layout>
  static void encode_block(const head_state& s, const float* x, std::size_t stride, int nt, std::uint8_t* page, int t0,
                           encode_stats* st) {
    alignas(64) float sub[max_codec_dim];
    alignas(64) std::uint8_t codes[max_codec_dim];
    const std::size_t rb = radius_size(s);
    for (int i = 0; i < nt; ++i) {
      const float* row = x + static_cast<std::size_t>(i) * stride;
      const int t = t0 + i;
      if (st) ++st->vectors;
      for (std::size_t gi = 0; gi < s.codec.groups().size(); ++gi) {
        const gtq_group& g = s.codec.groups()[gi];
        const int n = g.quantizer.dim();
        for (int j = 0; j < n; ++j) sub[j] = row[g.dims[static_cast<std::size_t>(j)]];
        float r = 0.0f;
        encode_stats local;
        (void)g.quantizer.quantize(sub, codes, r, &local);
        if (st) {  // a token counts once; clamps and zero sub-vectors count per group
          st->clamped_radii += local.clamped_radii;
          st->zero_vectors += local.zero_vectors;
        }
        Layout::store(page + s.region[gi], n, g.quantizer.bits(), s.P, t, codes);
        detail::store_radius(group_radii(s, page, gi) + static_cast<std::size_t>(t) * rb, r, rb == 4);
      }
    }
  }

  //! Decodes slot t into x[D] (reference and tests only).
  template <class Layout>
  static void decode_token(const head_state& s, const std::uint8_t* page, int t, float* x) {
    alignas(64) float sub[max_codec_dim];
    alignas(64) std::uint8_t codes[max_codec_dim];
    const std::size_t rb = radius_size(s);
    for (int j = 0; j < s.dim(); ++j) x[j] = 0.0f;
    for (std::size_t gi = 0; gi < s.codec.groups().size(); ++gi) {
      const gtq_group& g = s.codec.groups()[gi];
      const int n = g.quantizer.dim();
      for (int j = 0; j < n; ++j)
        codes[j] = static_cast<std::uint8_t>(Layout::load(page + s.region[gi], n, g.quantizer.bits(), s.P, t, j));
      const float r = detail::load_radius(group_radii(s, page, gi) + static_cast<std::size_t>(t) * rb, rb == 4);
      g.quantizer.dequantize(codes, r, sub);
      for (int j = 0; j < n; ++j) x[g.dims[static_cast<std::size_t>(j)]] = sub[j];
    }
  }

  // ------------------------------------------------------------------ key role
  //! Lookup units of a group scored through per-query tables (AVX-512 key pass of the
  //! bit-plane layout): a 2-bit group's coordinates in pairs, a 1-bit group's in fours
  //! (and a last pair when n % 4 == 2); each unit's codes form one 4-bit (2-bit for that
  //! last pair) index into a 16-float table of the unit's partial dot products. 0: the
  //! group is scored coordinate by coordinate. See score_lut_blocks64. n is even (groups
  //! are made of 2-coordinate RoPE blocks), so a 1-bit group's n % 4 is 0 or 2.
  static constexpr int lut_units(int n, int bits) {
#if defined(BGTQ_SIMD_AVX512)
    return bits == 2 ? n / 2 : bits == 1 ? (n + 2) / 4 : 0;
#else
    (void)n;
    (void)bits;
    return 0;
#endif
  }
  //! Floats before the first table in the prepared-query buffer (64-byte aligned tables).
  static std::size_t lut_base(const head_state& s, int G) {
    return (static_cast<std::size_t>(G) * static_cast<std::size_t>(s.dim()) + 15u) & ~static_cast<std::size_t>(15u);
  }
  //! Floats of the prepared-query buffer for G query heads: the rotated queries, then the
  //! lookup tables [group][head][unit][16] of the groups that have them.
  static std::size_t query_floats(const head_state& s, int G) {
    std::size_t luts = 0;
    for (const auto& g : s.codec.groups())
      luts += static_cast<std::size_t>(G) * static_cast<std::size_t>(lut_units(g.quantizer.dim(), g.quantizer.bits())) * 16u;
    return luts == 0 ? static_cast<std::size_t>(G) * s.dim() : lut_base(s, G) + luts;
  }

  //! qbuf[G*coord_off[g] + h*n_g + j] = (P_g q_h|g)_j : each group's query, rotated once;
  //! then, for the groups with lookup units, their tables (lut_units).
  static void prepare_query(const head_state& s, const float* q, int G, float* qbuf) {
    alignas(64) float sub[max_codec_dim];
    const int D = s.dim();
    for (std::size_t gi = 0; gi < s.codec.groups().size(); ++gi) {
      const gtq_group& g = s.codec.groups()[gi];
      const int n = g.quantizer.dim();
      for (int h = 0; h < G; ++h) {
        for (int j = 0; j < n; ++j) sub[j] = q[static_cast<std::size_t>(h) * D + g.dims[static_cast<std::size_t>(j)]];
        g.quantizer.rotation().apply(sub, qbuf + static_cast<std::size_t>(G) * s.coord_off[gi] + static_cast<std::size_t>(h) * n);
      }
    }
#if defined(BGTQ_SIMD_AVX512)
    std::size_t lut = lut_base(s, G);  // offset of the next table
    for (std::size_t gi = 0; gi < s.codec.groups().size(); ++gi) {
      const gtq_group& g = s.codec.groups()[gi];
      const int n = g.quantizer.dim(), b = g.quantizer.bits();
      const int units = lut_units(n, b);
      if (units == 0) continue;
      const float* qg = qbuf + static_cast<std::size_t>(G) * s.coord_off[gi];
      const int k = b == 2 ? 2 : 4;  // coordinates of a full unit
      simd::vf16 cols[4], tail_cols[2];  // the centroid of each coordinate of a unit, per code
      lut_columns(g.quantizer.centroids(), b, k, cols);
      lut_columns(g.quantizer.centroids(), b, 2, tail_cols);  // a last 1-bit pair's
      for (int h = 0; h < G; ++h)
        for (int u = 0; u < units; ++u, lut += 16) {
          const int j0 = u * k;
          const float* qh = qg + static_cast<std::size_t>(h) * n + j0;
          if (n - j0 >= k)
            fill_lut(qh, cols, k, qbuf + lut);
          else
            fill_lut(qh, tail_cols, 2, qbuf + lut);
        }
    }
#endif
  }

  //! scores[h*P + t] = q_h . k_hat_t for t < round_up(nvalid, 16) (lanes past nvalid are
  //! finite garbage the caller masks).
  //! pf: the next page's prefetch, one line per coordinate iteration (core/prefetch.hpp).
  template <class Layout>
  static void score_page(const head_state& s, const float* qbuf, int G, const std::uint8_t* page, int nvalid,
                         float* scores, prefetch_stream& pf = prefetch_stream::idle()) {
    const int chunks = (nvalid + 15) / 16;
    const std::size_t P = static_cast<std::size_t>(s.P);
    if (s.codec.groups().empty()) {
      for (int h = 0; h < G; ++h)
        for (int t = 0; t < chunks * 16; ++t) scores[h * P + static_cast<std::size_t>(t)] = 0.0f;
      return;
    }
#if defined(BGTQ_SIMD_AVX512)
    std::size_t lut_off = lut_base(s, G);  // the next group's tables in qbuf (an offset: no
                                           // pointer past a buffer without tables is formed)
#endif
    for (std::size_t gi = 0; gi < s.codec.groups().size(); ++gi) {
      const gtq_group& g = s.codec.groups()[gi];
      const float* qg = qbuf + static_cast<std::size_t>(G) * s.coord_off[gi];
#if defined(BGTQ_SIMD_AVX512)
      if (const int units = lut_units(g.quantizer.dim(), g.quantizer.bits()); units > 0) {
        if constexpr (std::is_same_v<Layout, bit_plane_layout>) {
          const std::size_t hstride = static_cast<std::size_t>(units) * 16u;
          detail::for_head_blocks<4>(G, [&](int h, auto gb_c) {
            constexpr int GB = decltype(gb_c)::value;
            const float* lh = qbuf + lut_off + static_cast<std::size_t>(h) * hstride;
            if (g.quantizer.bits() == 2)
              score_lut64<2, GB>(s, gi, lh, hstride, page, chunks, scores + h * P, pf);
            else
              score_lut64<1, GB>(s, gi, lh, hstride, page, chunks, scores + h * P, pf);
          });
          lut_off += static_cast<std::size_t>(G) * hstride;
          continue;
        }
        lut_off += static_cast<std::size_t>(G) * static_cast<std::size_t>(units) * 16u;  // other layouts: tables unused
      }
#endif
#if defined(BGTQ_SIMD_AVX2_ONLY)
      if (std::is_same_v<Layout, bit_plane_layout> && g.quantizer.dim() <= code_buffer_coords) {
        dispatch_bits(g.quantizer.bits(), [&](auto bits_c) {
          score_group_codes<decltype(bits_c)::value>(s, gi, qg, G, page, chunks, scores, pf);
        });
        continue;
      }
#endif
#if defined(BGTQ_SIMD_AVX512)
      if constexpr (std::is_same_v<Layout, bit_plane_layout>) {
        detail::for_head_blocks<4>(G, [&](int h, auto gb_c) {
          dispatch_bits(g.quantizer.bits(), [&](auto bits_c) {
            score_group64<decltype(bits_c)::value, decltype(gb_c)::value>(
                s, gi, qg + static_cast<std::size_t>(h) * g.quantizer.dim(), page, chunks, scores + h * P, pf);
          });
        });
        continue;
      }
#endif
      detail::for_head_blocks<detail::max_score_heads>(G, [&](int h, auto gb_c) {
        dispatch_bits(g.quantizer.bits(), [&](auto bits_c) {
          score_group<Layout, decltype(bits_c)::value, decltype(gb_c)::value>(
              s, gi, qg + static_cast<std::size_t>(h) * g.quantizer.dim(), page, chunks, scores + h * P, pf);
        });
      });
    }
  }

  // ------------------------------------------------------------------ value role
  //! Floats of the value accumulator for G query heads: [G][D][16] lane partials.
  static std::size_t acc_floats(const head_state& s, int G) { return static_cast<std::size_t>(G) * s.dim() * 16u; }

  //! acc[h][c][lane] += w[h*P + t] * r_t * c(idx_{t,c}) over the page's valid tokens, in
  //! the rotated domain of each group. tmp: at least 8*P floats.
  template <class Layout>
  static void accumulate_page(const head_state& s, const std::uint8_t* page, int nvalid, const float* w, int G, float* acc,
                              float* tmp) {
    const int chunks = (nvalid + 15) / 16;
    const std::size_t P = static_cast<std::size_t>(s.P);
    const std::size_t rb = radius_size(s);
    for (std::size_t gi = 0; gi < s.codec.groups().size(); ++gi) {
      const gtq_group& g = s.codec.groups()[gi];
      const std::uint8_t* radii = group_radii(s, page, gi);
      detail::for_head_blocks<4>(G, [&](int h, auto gb_c) {
        constexpr int GB = decltype(gb_c)::value;
        // tmp = w[h+hh][t] * r_t for whole 64-token blocks, zero past the valid chunks; the
        // 64-token kernels read it blocked, [block][hh][64] (see wr_offset), the others [hh][P]
#if defined(BGTQ_SIMD_CODES64)
        constexpr bool blocked = std::is_same_v<Layout, bit_plane_layout>;
#else
        constexpr bool blocked = false;
#endif
        const int tchunks = (chunks + 3) / 4 * 4;
        fill_weights_radii(tmp, w + h * P, P, radii, rb, chunks, tchunks, GB, blocked, 0);
        float* acc_h = acc + (static_cast<std::size_t>(h) * s.dim() + static_cast<std::size_t>(s.coord_off[gi])) * 16u;
        dispatch_bits(g.quantizer.bits(), [&](auto bits_c) {
          constexpr int B = decltype(bits_c)::value;
#if defined(BGTQ_SIMD_CODES64)
          if constexpr (blocked)
            accumulate_group64<B, GB>(s, gi, page, tchunks / 4, tmp, acc_h);
          else
#endif
            accumulate_group<Layout, B, GB>(s, gi, page, chunks, tmp, acc_h);
        });
      });
    }
  }

  //! The value kernels' weights x radii for heads hh < gb of one page: tmp gets
  //! w[hh * P + t] * r_t for the tokens of chunks [0, total) (16 tokens each), zero past
  //! the first `valid` chunks, at wr_offset(t0 + t, hh, gb) when `blocked` (the 64-token
  //! kernels' [block][hh][64] layout over a span of pages starting at token t0) or at
  //! hh * P + t. A blocked 64-token block (AVX-512 and AVX2) is stored in strided16's
  //! token order (element 16c + d = token 4d + c; simd::transpose_stride4), which the
  //! value kernels read.
  static void fill_weights_radii(float* tmp, const float* w, std::size_t P, const std::uint8_t* radii, std::size_t rb, int valid,
                                 int total, int gb, bool blocked, int t0) {
    const auto wr16 = [&](int hh, int c) {
      return c < valid ? simd::mul(simd::load(w + static_cast<std::size_t>(hh) * P + static_cast<std::size_t>(c) * 16u),
                                   load_radii16(radii + static_cast<std::size_t>(c) * 16u * rb, rb == 4))
                       : simd::zero();
    };
#if defined(BGTQ_SIMD_CODES64)
    if (blocked) {  // total % 4 == 0: whole 64-token blocks, in strided16's token order
      for (int hh = 0; hh < gb; ++hh)
        for (int c = 0; c < total; c += 4) {
          simd::vf16 v[4] = {wr16(hh, c), wr16(hh, c + 1), wr16(hh, c + 2), wr16(hh, c + 3)};
          simd::transpose_stride4(v);
          float* dst = tmp + wr_offset(t0 + 16 * c, hh, gb);
          for (int k = 0; k < 4; ++k) simd::store(dst + 16 * k, v[k]);
        }
      return;
    }
#endif
    for (int hh = 0; hh < gb; ++hh)
      for (int c = 0; c < total; ++c) {
        const simd::vf16 v = wr16(hh, c);
        simd::store(tmp + (blocked ? wr_offset(t0 + 16 * c, hh, gb) : static_cast<std::size_t>(hh) * P + static_cast<std::size_t>(c) * 16u),
                    v);
      }
  }

  //! accumulate_page over several pages at once: pages[0..npages) are full except the
  //! last (nvalid_last tokens); w is [page][G][P]. With AVX2 the accumulators are loaded
  //! and stored once per coordinate for the whole span instead of once per page; with
  //! AVX-512 a block's weights stay in registers and the accumulators move per page (see
  //! span_blocks64). tmp: at least 4 * npages * P floats.
  template <class Layout>
  static void accumulate_span(const head_state& s, const std::uint8_t* const* pages, int npages, int nvalid_last,
                              const float* w, int G, float* acc, float* tmp) {
#if defined(BGTQ_SIMD_CODES64)
    if constexpr (std::is_same_v<Layout, bit_plane_layout>) {
      const std::size_t P = static_cast<std::size_t>(s.P);
      const std::size_t rb = radius_size(s);
      for (std::size_t gi = 0; gi < s.codec.groups().size(); ++gi) {
        const gtq_group& g = s.codec.groups()[gi];
        detail::for_head_blocks<4>(G, [&](int h, auto gb_c) {
          constexpr int GB = decltype(gb_c)::value;
          // tmp = w[p][h+hh][t] * r_{p,t} at wr_offset(p*P + t, hh, GB), zero past the last
          // page's valid chunks
          for (int p = 0; p < npages; ++p) {
            const int chunks = p + 1 < npages ? s.P / 16 : (nvalid_last + 15) / 16;
            fill_weights_radii(tmp, w + (static_cast<std::size_t>(p) * G + static_cast<std::size_t>(h)) * P, P,
                               group_radii(s, pages[p], gi), rb, chunks, s.P / 16, GB, true, p * s.P);
          }
          float* acc_h = acc + (static_cast<std::size_t>(h) * s.dim() + static_cast<std::size_t>(s.coord_off[gi])) * 16u;
          dispatch_bits(g.quantizer.bits(), [&](auto bits_c) {
            accumulate_span64<decltype(bits_c)::value, GB>(s, gi, pages, npages, tmp, acc_h);
          });
        });
      }
      return;
    }
#endif
    const std::size_t P = static_cast<std::size_t>(s.P);
    for (int p = 0; p < npages; ++p)
      accumulate_page<Layout>(s, pages[p], p + 1 < npages ? s.P : nvalid_last, w + static_cast<std::size_t>(p) * G * P, G, acc,
                              tmp);
  }

  //! out[h][D] += P_g^T (lane sums of acc) for every group: the rotation back, once per step.
  static void finish(const head_state& s, const float* acc, int G, float* out) {
    alignas(64) float y[max_codec_dim];
    alignas(64) float x[max_codec_dim];
    const int D = s.dim();
    for (int h = 0; h < G; ++h) {
      for (std::size_t gi = 0; gi < s.codec.groups().size(); ++gi) {
        const gtq_group& g = s.codec.groups()[gi];
        const int n = g.quantizer.dim();
        const float* a = acc + (static_cast<std::size_t>(h) * D + static_cast<std::size_t>(s.coord_off[gi])) * 16u;
        for (int j = 0; j < n; ++j) y[j] = simd::hsum(simd::load(a + static_cast<std::size_t>(j) * 16u));
        g.quantizer.rotation().apply_transpose(y, x);
        for (int j = 0; j < n; ++j) out[static_cast<std::size_t>(h) * D + g.dims[static_cast<std::size_t>(j)]] += x[j];
      }
    }
  }

 private:
  template <int B>
  struct bits_tag {
    static constexpr int value = B;
  };
  template <class F>
  static void dispatch_bits(int b, F&& f) {
    switch (b) {
      case 1: f(bits_tag<1>{}); break;
      case 2: f(bits_tag<2>{}); break;
      case 3: f(bits_tag<3>{}); break;
      case 4: f(bits_tag<4>{}); break;
      case 5: f(bits_tag<5>{}); break;
      case 6: f(bits_tag<6>{}); break;
      case 7: f(bits_tag<7>{}); break;
      default: f(bits_tag<8>{}); break;
    }
  }

  static simd::vf16 load_radii16(const std::uint8_t* p, bool fp32) {
    if (fp32) {
      alignas(64) float r[16];
      std::memcpy(r, p, 64);
      return simd::load(r);
    }
    return simd::load_half(p);
  }

  template <class Layout, int B, int GB>
  static void score_group(const head_state& s, std::size_t gi, const float* q, const std::uint8_t* page, int chunks,
                          float* scores, prefetch_stream& pf) {
    const int n = s.codec.groups()[gi].quantizer.dim();
    const float* cent = s.codec.groups()[gi].quantizer.centroids();
    const std::uint8_t* region = page + s.region[gi];
    for (int c = 0; c < chunks; ++c)
      score_chunk<GB>(s, gi, q, page, c * 16, scores, pf,
                      [&](int j) { return simd::lookup<B>(cent, Layout::template load16<B>(region, n, s.P, c * 16, j)); });
  }

  // Scores of one 16-token chunk (tokens t0..t0+15) for GB heads from group gi:
  // sum_j q[hh][j] c(idx_j) times the token's radius, into (gi == 0) or onto the scores.
  // cv(j) gives the centroids of the chunk's 16 codes at coordinate j.
  template <int GB, class Cv>
  BGTQ_FORCEINLINE static void score_chunk(const head_state& s, std::size_t gi, const float* q, const std::uint8_t* page,
                                           int t0, float* scores, prefetch_stream& pf, Cv&& cv) {
    const gtq_group& g = s.codec.groups()[gi];
    const int n = g.quantizer.dim();
    const std::size_t P = static_cast<std::size_t>(s.P);
    const std::size_t rb = radius_size(s);
    const std::uint8_t* radii = group_radii(s, page, gi);
    simd::vf16 acc[GB];
    for (int hh = 0; hh < GB; ++hh) acc[hh] = simd::zero();
    for (int j = 0; j < n; ++j) {
      pf.next();
      const simd::vf16 c = cv(j);
      for (int hh = 0; hh < GB; ++hh) acc[hh] = simd::fma(c, simd::set1(q[hh * n + j]), acc[hh]);
    }
    const simd::vf16 r = load_radii16(radii + static_cast<std::size_t>(t0) * rb, rb == 4);
    for (int hh = 0; hh < GB; ++hh) {
      float* dst = scores + hh * P + static_cast<std::size_t>(t0);
      simd::store(dst, gi == 0 ? simd::mul(acc[hh], r) : simd::fma(acc[hh], r, simd::load(dst)));
    }
  }

#if defined(BGTQ_SIMD_AVX512)
  // The 4 x GB score accumulators of a 64-token block (chunk c, head hh), zeroed.
  template <int GB>
  BGTQ_FORCEINLINE static void zero_block64(simd::vf16 (&acc)[4][GB]) {
    BGTQ_DETAIL_UNROLL(4)
    for (int c = 0; c < 4; ++c)
      BGTQ_DETAIL_UNROLL(4)
      for (int hh = 0; hh < GB; ++hh) acc[c][hh] = simd::zero();
  }
  // scores[hh * P + t] = (or += when not the first group) acc times the token's radius, for
  // the 64 tokens from t64; acc[c][hh] lane d holds token 4d + c (strided16's order: the
  // kernels' codes come without a shuffle per chunk). A key with several groups (Block-GTQ)
  // keeps its partial sums in that strided order in the scores between groups: each group
  // puts its 4 radius vectors into strided order (simd::transpose_stride4, 12 shuffles per
  // block, shared by the heads) and only the last one puts each head's sums back in token
  // order (simd::untranspose_stride4, 12 shuffles per head), instead of every group
  // transposing every head's scores. With one group (uniform TQ): untranspose, then the
  // radii in token order.
  template <int GB>
  BGTQ_FORCEINLINE static void store_block64(const simd::vf16 (&acc)[4][GB], const std::uint8_t* radii, std::size_t rb,
                                             bool first, bool last, int t64, float* scores, std::size_t P) {
    simd::vf16 r[4];
    BGTQ_DETAIL_UNROLL(4)
    for (int c = 0; c < 4; ++c) r[c] = load_radii16(radii + static_cast<std::size_t>(t64 + 16 * c) * rb, rb == 4);
    if (first && last) {
      BGTQ_DETAIL_UNROLL(4)
      for (int hh = 0; hh < GB; ++hh) {
        simd::vf16 v[4] = {acc[0][hh], acc[1][hh], acc[2][hh], acc[3][hh]};
        simd::untranspose_stride4(v);
        BGTQ_DETAIL_UNROLL(4)
        for (int c = 0; c < 4; ++c) simd::store(scores + hh * P + static_cast<std::size_t>(t64 + 16 * c), simd::mul(v[c], r[c]));
      }
      return;
    }
    simd::transpose_stride4(r);
    BGTQ_DETAIL_UNROLL(4)
    for (int hh = 0; hh < GB; ++hh) {
      float* dst = scores + hh * P + static_cast<std::size_t>(t64);
      simd::vf16 v[4];
      BGTQ_DETAIL_UNROLL(4)
      for (int c = 0; c < 4; ++c) v[c] = first ? simd::mul(acc[c][hh], r[c]) : simd::fma(acc[c][hh], r[c], simd::load(dst + 16 * c));
      if (last) simd::untranspose_stride4(v);
      BGTQ_DETAIL_UNROLL(4)
      for (int c = 0; c < 4; ++c) simd::store(dst + 16 * c, v[c]);
    }
  }

  // Keys, 64 tokens per decode: the codes of a coordinate for a whole 64-token block are
  // transposed from the bit planes at once and shared by 4 chunks x GB query heads.
  template <int B, int GB>
  BGTQ_NOINLINE static void score_group64(const head_state& s, std::size_t gi, const float* q, const std::uint8_t* page, int chunks,
                            float* scores, prefetch_stream& pf) {
    const gtq_group& g = s.codec.groups()[gi];
    const std::uint8_t* region = page + s.region[gi];
    const std::size_t rb = radius_size(s);
    const std::uint8_t* radii = group_radii(s, page, gi);
    const bool first = gi == 0, last = gi + 1 == s.codec.groups().size();
    if (s.P == 64)  // the default page: plane loads without the run-time stride (~2% of a step)
      score_blocks64<B, GB, true>(s, g, q, region, radii, rb, first, last, chunks, scores, pf);
    else
      score_blocks64<B, GB, false>(s, g, q, region, radii, rb, first, last, chunks, scores, pf);
  }
  // score_group64's 64-token blocks, the plane loads specialised for P == 64 or not.
  template <int B, int GB, bool Page64>
  BGTQ_FORCEINLINE static void score_blocks64(const head_state& s, const gtq_group& g, const float* q, const std::uint8_t* region,
                                              const std::uint8_t* radii, std::size_t rb, bool first, bool last, int chunks,
                                              float* scores, prefetch_stream& pf) {
    const int n = g.quantizer.dim();
    const float* cent = g.quantizer.centroids();
    const std::size_t P = static_cast<std::size_t>(s.P);
    for (int t64 = 0; t64 < chunks * 16; t64 += 64) {
      simd::vf16 acc[4][GB];
      zero_block64<GB>(acc);
      BGTQ_DETAIL_UNROLL(2)
      for (int j = 0; j < n; ++j) {
        pf.next();
        const bit_plane_layout::codes64 bytes = bit_plane_layout::load64<B, Page64>(region, s.P, t64, j);
        simd::vf16 qv[GB];
        BGTQ_DETAIL_UNROLL(4)
        for (int hh = 0; hh < GB; ++hh) qv[hh] = simd::set1(q[hh * n + j]);
        const simd::vf16 c0 = simd::lookup<B>(cent, bit_plane_layout::strided16<B, 0>(bytes));
        const simd::vf16 c1 = simd::lookup<B>(cent, bit_plane_layout::strided16<B, 1>(bytes));
        const simd::vf16 c2 = simd::lookup<B>(cent, bit_plane_layout::strided16<B, 2>(bytes));
        const simd::vf16 c3 = simd::lookup<B>(cent, bit_plane_layout::strided16<B, 3>(bytes));
        BGTQ_DETAIL_UNROLL(4)
        for (int hh = 0; hh < GB; ++hh) {
          acc[0][hh] = simd::fma(c0, qv[hh], acc[0][hh]);
          acc[1][hh] = simd::fma(c1, qv[hh], acc[1][hh]);
          acc[2][hh] = simd::fma(c2, qv[hh], acc[2][hh]);
          acc[3][hh] = simd::fma(c3, qv[hh], acc[3][hh]);
        }
      }
      store_block64<GB>(acc, radii, rb, first, last, t64, scores, P);
    }
  }

  // Keys of 1- and 2-bit groups, 64 tokens per decode, by table lookup (lut_units): the
  // codes of a unit of 2 (2-bit) or 4 (1-bit) coordinates are adjacent bit planes, so
  // they transpose as one 4-bit code per token (load64<4> at unit u is planes 4u..4u+3),
  // and table[code] = sum over the unit's coordinates of q_j c(code_j) replaces their
  // per-coordinate lookups and multiply-adds with one vpermps and one add per 16 tokens
  // and head: per 2-bit pair and 64 tokens x 4 heads, 16 vpermps + 16 adds instead of
  // 8 vpermps + 32 FMAs (a 1-bit four: instead of 16 + 64). Same fp32 products as the
  // coordinate loop, summed in another order.
  template <int B, int GB>
  BGTQ_NOINLINE static void score_lut64(const head_state& s, std::size_t gi, const float* lut, std::size_t hstride,
                                        const std::uint8_t* page, int chunks, float* scores, prefetch_stream& pf) {
    const std::size_t rb = radius_size(s);
    const std::uint8_t* radii = group_radii(s, page, gi);
    if (s.P == 64)
      score_lut_blocks64<B, GB, true>(s, gi, lut, hstride, page + s.region[gi], radii, rb, chunks, scores, pf);
    else
      score_lut_blocks64<B, GB, false>(s, gi, lut, hstride, page + s.region[gi], radii, rb, chunks, scores, pf);
  }
  template <int B, int GB, bool Page64>
  BGTQ_FORCEINLINE static void score_lut_blocks64(const head_state& s, std::size_t gi, const float* lut, std::size_t hstride,
                                                  const std::uint8_t* region, const std::uint8_t* radii, std::size_t rb,
                                                  int chunks, float* scores, prefetch_stream& pf) {
    const int n = s.codec.groups()[gi].quantizer.dim();
    const int full = B == 2 ? n / 2 : n / 4;   // units of 4 index bits
    const bool tail = B == 1 && n % 4 != 0;    // a last 1-bit pair: 2 index bits
    const bool first = gi == 0, last = gi + 1 == s.codec.groups().size();
    const std::size_t P = static_cast<std::size_t>(s.P);
    for (int t64 = 0; t64 < chunks * 16; t64 += 64) {
      simd::vf16 acc[4][GB];
      zero_block64<GB>(acc);
      for (int u = 0; u < full; ++u) {
        pf.next();
        lut_unit<GB>(bit_plane_layout::load64<4, Page64>(region, s.P, t64, u), lut + static_cast<std::size_t>(u) * 16u, hstride, acc);
      }
      if (tail)  // coordinates n-2 and n-1: planes n-2 and n-1, i.e. 2-bit coordinate (n-2)/2's
        lut_unit<GB>(bit_plane_layout::load64<2, Page64>(region, s.P, t64, (n - 2) / 2), lut + static_cast<std::size_t>(full) * 16u,
                     hstride, acc);
      store_block64<GB>(acc, radii, rb, first, last, t64, scores, P);
    }
  }

  // acc[c][hh] += table_hh[code] for the 4 chunks of a 64-token code block (codes < 16).
  template <int GB>
  BGTQ_FORCEINLINE static void lut_unit(const bit_plane_layout::codes64& bytes, const float* t, std::size_t hstride,
                                        simd::vf16 (&acc)[4][GB]) {
    const simd::vi16 i0 = bit_plane_layout::strided16<4, 0>(bytes);
    const simd::vi16 i1 = bit_plane_layout::strided16<4, 1>(bytes);
    const simd::vi16 i2 = bit_plane_layout::strided16<4, 2>(bytes);
    const simd::vi16 i3 = bit_plane_layout::strided16<4, 3>(bytes);
    BGTQ_DETAIL_UNROLL(4)
    for (int hh = 0; hh < GB; ++hh) {
      const float* th = t + static_cast<std::size_t>(hh) * hstride;
      acc[0][hh] = simd::add(acc[0][hh], simd::lookup<4>(th, i0));
      acc[1][hh] = simd::add(acc[1][hh], simd::lookup<4>(th, i1));
      acc[2][hh] = simd::add(acc[2][hh], simd::lookup<4>(th, i2));
      acc[3][hh] = simd::add(acc[3][hh], simd::lookup<4>(th, i3));
    }
  }

  // cols[i][code] = cent[(code >> (i * b)) & m] for the k coordinates of a unit of b-bit
  // codes (k * b index bits; for k * b = 2, a last 1-bit pair, codes are < 4 and lanes
  // 4..15 repeat lanes 0..3). Per group, once a step.
  static void lut_columns(const float* cent, int b, int k, simd::vf16* cols) {
    const int m = (1 << b) - 1;
    alignas(64) float col[16];
    for (int i = 0; i < k; ++i) {
      for (int code = 0; code < 16; ++code) col[code] = cent[((code % (1 << (k * b))) >> (i * b)) & m];
      cols[i] = simd::load(col);
    }
  }
  // One head's table of a unit (16 floats): t[code] = sum_{i < k} q[i] * cols[i][code],
  // lane-wise, in coordinate order.
  static void fill_lut(const float* q, const simd::vf16* cols, int k, float* t) {
    simd::vf16 acc = simd::mul(simd::set1(q[0]), cols[0]);
    for (int i = 1; i < k; ++i) acc = simd::fma(simd::set1(q[i]), cols[i], acc);
    simd::store(t, acc);
  }

#endif

#if defined(BGTQ_SIMD_AVX2_ONLY)
  // Keys on AVX2. Sixteen ymm registers hold the accumulators of 4 query heads x 16
  // tokens, too few to keep one coordinate's decoded codes for 64 tokens in registers
  // and share them across heads as score_group64 does. So the codes of a 32-token block
  // are expanded to bytes once for all n coordinates into an L1 buffer (n x 32 bytes),
  // and every block of query heads and every 16-token chunk reads them from there
  // (score_chunk, as score_group: the same arithmetic).
  // Groups of more than code_buffer_coords coordinates (head_dim > 256 with one group)
  // take score_group instead, so the buffer stays at 8 KB of stack.
  // Groups of 4-6 bits with an antisymmetric codebook store folded codes (fold_codes32)
  // and look up half the table (lookup_folded: 1 vpermps instead of 2 and a blend at 4
  // bits, 2 and a blend instead of 4 and 3 at 5 bits); the centroids, hence the scores,
  // are bit for bit those of the full lookup.
  static constexpr int code_buffer_coords = 256;
  template <int B>
  static void score_group_codes(const head_state& s, std::size_t gi, const float* qg, int G, const std::uint8_t* page,
                                int chunks, float* scores, prefetch_stream& pf) {
    if constexpr (B >= 4 && B <= 6) {
      if (gi < s.antisymmetric.size() && s.antisymmetric[gi]) {
        score_group_codes_impl<B, true>(s, gi, qg, G, page, chunks, scores, pf);
        return;
      }
    }
    score_group_codes_impl<B, false>(s, gi, qg, G, page, chunks, scores, pf);
  }
  template <int B, bool Folded>
  static void score_group_codes_impl(const head_state& s, std::size_t gi, const float* qg, int G, const std::uint8_t* page,
                                     int chunks, float* scores, prefetch_stream& pf) {
    const int n = s.codec.groups()[gi].quantizer.dim();
    const float* cent = s.codec.groups()[gi].quantizer.centroids();
    const std::uint8_t* region = page + s.region[gi];
    const std::size_t P = static_cast<std::size_t>(s.P);
    alignas(32) std::uint8_t codes[static_cast<std::size_t>(code_buffer_coords) * 32u];
    for (int t32 = 0; t32 < chunks * 16; t32 += 32) {
      for (int j = 0; j < n; ++j) {
        __m256i x = bit_plane_layout::load32<B>(region, s.P, t32, j);
        if constexpr (Folded) x = simd::fold_codes32<B>(x);
        _mm256_store_si256(reinterpret_cast<__m256i*>(codes + 32 * j), x);
      }
      const int nc = chunks - t32 / 16 >= 2 ? 2 : 1;
      detail::for_head_blocks<4>(G, [&](int h, auto gb_c) {
        const float* q = qg + static_cast<std::size_t>(h) * n;
        for (int c = 0; c < nc; ++c) {
          const auto cv = [&](int j) {
            if constexpr (Folded)
              return simd::lookup_folded<B>(cent, simd::load_s8(codes + 32 * j + 16 * c));
            else
              return simd::lookup<B>(cent, simd::load_u8(codes + 32 * j + 16 * c));
          };
          score_chunk<decltype(gb_c)::value>(s, gi, q, page, t32 + 16 * c, scores + h * P, pf, cv);
        }
      });
    }
  }

#endif

  // Offset of token t's weight x radius for head hh of a gb-head block in the 64-token
  // kernels' blocked layout [t / 64][gb][64] (t % 64 == 0: the 64 are in strided16's
  // token order, see fill_weights_radii): the 4 x GB weight vectors of a code block
  // are at one base address plus constants (the per-head [hh][P] rows cost a general
  // register per head and made the compiler spill the loop's pointers).
  static constexpr std::size_t wr_offset(int t, int hh, int gb) {
    return (static_cast<std::size_t>(t / 64) * static_cast<std::size_t>(gb) + static_cast<std::size_t>(hh)) * 64u +
           static_cast<std::size_t>(t % 64);
  }

#if defined(BGTQ_SIMD_AVX2_ONLY)
  // The AVX2 value loop's steps (span_blocks64; AVX-512 keeps a block's weights in
  // registers instead).
  // a[hh] += c(codes of chunk C) * w[hh * 64 + 16 C ..] for hh < GB (w: one block of wr_offset;
  // chunk C = tokens 4d + C, strided16's order, in which fill_weights_radii stores the weights).
  template <int B, int GB, int C>
  BGTQ_FORCEINLINE static void fma_chunk(const float* cent, const bit_plane_layout::codes64& bytes, const float* w,
                                         simd::vf16* a) {
    const simd::vf16 cv = simd::lookup<B>(cent, bit_plane_layout::strided16<B, C>(bytes));
    for (int hh = 0; hh < GB; ++hh) a[hh] = simd::fma(cv, simd::load(w + hh * 64 + 16 * C), a[hh]);
  }
  // The 4 chunks of one 64-token code block (one centroid vector live at
  // a time: with GB = 4 the accumulators take 8 of AVX2's 16 ymm registers).
  template <int B, int GB>
  BGTQ_FORCEINLINE static void fma_block64(const float* cent, const bit_plane_layout::codes64& bytes, const float* w,
                                           simd::vf16* a) {
    fma_chunk<B, GB, 0>(cent, bytes, w, a);
    fma_chunk<B, GB, 1>(cent, bytes, w, a);
    fma_chunk<B, GB, 2>(cent, bytes, w, a);
    fma_chunk<B, GB, 3>(cent, bytes, w, a);
  }
#endif

#if defined(BGTQ_SIMD_CODES64)

  // Values, 64 tokens per decode; wr = weights times radii for whole 64-token blocks.
  template <int B, int GB>
  static void accumulate_group64(const head_state& s, std::size_t gi, const std::uint8_t* page, int blocks64,
                                 const float* wr, float* acc) {
    const gtq_group& g = s.codec.groups()[gi];
    span_blocks64<B, GB, false>(g.quantizer.dim(), g.quantizer.centroids(), &page, 1, s.region[gi], s.P, blocks64,
                                static_cast<std::size_t>(s.dim()) * 16u, wr, acc);
  }

  // Values over a span of pages; wr = weights times radii in the wr_offset layout over the span.
  template <int B, int GB>
  BGTQ_NOINLINE static void accumulate_span64(const head_state& s, std::size_t gi, const std::uint8_t* const* pages, int npages,
                                const float* wr, float* acc) {
    const gtq_group& g = s.codec.groups()[gi];
    const int n = g.quantizer.dim();
    const float* cent = g.quantizer.centroids();
    const std::size_t hstride = static_cast<std::size_t>(s.dim()) * 16u;
    const std::size_t region = s.region[gi];
    // The default page is one 64-token block: with P known, no block loop and no run-time
    // plane stride stay in the coordinate loop (they cost about 10% of a decode step at
    // T = 16K), as in score_group64.
    if (s.P == 64)
      span_blocks64<B, GB, true>(n, cent, pages, npages, region, 64, 1, hstride, wr, acc);
    else
      span_blocks64<B, GB, false>(n, cent, pages, npages, region, s.P, s.P / 64, hstride, wr, acc);
  }
  // The value kernels' coordinate loop: `blocks` 64-token blocks of each of `npages` pages
  // of P tokens, the plane loads specialised for P == 64 (one block) or not.
  template <int B, int GB, bool Page64>
  BGTQ_FORCEINLINE static void span_blocks64(int n, const float* cent, const std::uint8_t* const* pages, int npages,
                                             std::size_t region, int P, int blocks, std::size_t hstride, const float* wr,
                                             float* acc) {
    if constexpr (Page64) {
      P = 64;
      blocks = 1;
    }
#if defined(BGTQ_SIMD_AVX512)
    // Page-major: the block's 4 x GB weight vectors stay in registers (16 of 32 zmm for
    // GB = 4) and the coordinate loop loads and stores the accumulators, 4 + 4 memory
    // operations per 16 FMAs instead of 16 weight loads (the loop was load-bound). The
    // weights come in strided16's token order (fill_weights_radii), so the code bytes
    // need no shuffle per chunk: chunk c = the block's dwords shifted by 8c bits.
    for (int p = 0; p < npages; ++p)
      for (int t64 = 0; t64 < blocks * 64; t64 += 64) {
        const float* w = wr + wr_offset(p * P + t64, 0, GB);
        simd::vf16 wv[4][GB];
        BGTQ_DETAIL_UNROLL(4)
        for (int c = 0; c < 4; ++c)
          for (int hh = 0; hh < GB; ++hh) wv[c][hh] = simd::load(w + hh * 64 + 16 * c);
        BGTQ_DETAIL_UNROLL(2)
        for (int j = 0; j < n; ++j) {
          const auto bytes = bit_plane_layout::load64<B, Page64>(pages[p] + region, P, t64, j);
          const simd::vf16 c0 = simd::lookup<B>(cent, bit_plane_layout::strided16<B, 0>(bytes));
          const simd::vf16 c1 = simd::lookup<B>(cent, bit_plane_layout::strided16<B, 1>(bytes));
          const simd::vf16 c2 = simd::lookup<B>(cent, bit_plane_layout::strided16<B, 2>(bytes));
          const simd::vf16 c3 = simd::lookup<B>(cent, bit_plane_layout::strided16<B, 3>(bytes));
          float* at = acc + static_cast<std::size_t>(j) * 16u;
          BGTQ_DETAIL_UNROLL(4)
          for (int hh = 0; hh < GB; ++hh) {
            simd::vf16 x = simd::fma(c0, wv[0][hh], simd::load(at + hh * hstride));
            x = simd::fma(c1, wv[1][hh], x);
            x = simd::fma(c2, wv[2][hh], x);
            x = simd::fma(c3, wv[3][hh], x);
            simd::store(at + hh * hstride, x);
          }
        }
      }
#else
    for (int j = 0; j < n; ++j) {
      simd::vf16 a[GB];
      BGTQ_DETAIL_UNROLL(4)
      for (int hh = 0; hh < GB; ++hh) a[hh] = simd::load(acc + hh * hstride + static_cast<std::size_t>(j) * 16u);
      for (int p = 0; p < npages; ++p)
        for (int t64 = 0; t64 < blocks * 64; t64 += 64)
          fma_block64<B, GB>(cent, bit_plane_layout::load64<B, Page64>(pages[p] + region, P, t64, j),
                             wr + wr_offset(p * P + t64, 0, GB), a);
      BGTQ_DETAIL_UNROLL(4)
      for (int hh = 0; hh < GB; ++hh) simd::store(acc + hh * hstride + static_cast<std::size_t>(j) * 16u, a[hh]);
    }
#endif
  }
#endif

  template <class Layout, int B, int GB>
  static void accumulate_group(const head_state& s, std::size_t gi, const std::uint8_t* page, int chunks, const float* wr,
                               float* acc) {
    const gtq_group& g = s.codec.groups()[gi];
    const int n = g.quantizer.dim();  // always even
    const float* cent = g.quantizer.centroids();
    const std::uint8_t* region = page + s.region[gi];
    const std::size_t P = static_cast<std::size_t>(s.P);
    const std::size_t hstride = static_cast<std::size_t>(s.dim()) * 16u;
    for (int j = 0; j < n; j += 2) {
      simd::vf16 a0[GB], a1[GB];
      for (int hh = 0; hh < GB; ++hh) {
        a0[hh] = simd::load(acc + hh * hstride + static_cast<std::size_t>(j) * 16u);
        a1[hh] = simd::load(acc + hh * hstride + static_cast<std::size_t>(j + 1) * 16u);
      }
      for (int c = 0; c < chunks; ++c) {
        const int t0 = c * 16;
        const simd::vf16 c0 = simd::lookup<B>(cent, Layout::template load16<B>(region, n, s.P, t0, j));
        const simd::vf16 c1 = simd::lookup<B>(cent, Layout::template load16<B>(region, n, s.P, t0, j + 1));
        for (int hh = 0; hh < GB; ++hh) {
          const simd::vf16 wv = simd::load(wr + hh * P + static_cast<std::size_t>(t0));
          a0[hh] = simd::fma(c0, wv, a0[hh]);
          a1[hh] = simd::fma(c1, wv, a1[hh]);
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
