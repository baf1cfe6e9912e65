#pragma once
//! @file cuda/upload.hpp
//! Host-side glue between a CPU cache and its device mirror (plain C++): `describe`
//! turns a kv_cache<gtq_pages, gtq_pages, bit_plane_layout> (Block-GTQ or uniform TQ
//! keys, TQ-MSE values) into the cache_desc that device_cache::create uploads;
//! `upload_all_pages` copies its page pool; `gather_batch` collects, for the sequences of
//! a batch in one layer, their page tables, quantized token counts and fp16 sink/recent
//! windows in decode_args' layout.

#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "../cache/gtq_pages.hpp"
#include "../cache/kv_cache.hpp"
#include "../cache/page_layout.hpp"
#include "../rotation/rotation.hpp"
#include "device_cache.hpp"

namespace bgtq::cuda {

//! Description of one gtq_pages codec part (its configure() must have run: the cache does it).
//! @throws bgtq::error(unsupported) for a width outside 1..8
inline codec_desc describe_part(const gtq_pages::head_state& s) {
  codec_desc d;
  d.bytes = static_cast<std::uint32_t>(s.bytes);
  const std::size_t rb = s.codec.groups().empty() ? 2u : (s.codec.groups().front().quantizer.fp32_radius() ? 4u : 2u);
  for (std::size_t gi = 0; gi < s.codec.groups().size(); ++gi) {
    const gtq_group& g = s.codec.groups()[gi];
    const tq_quantizer& q = g.quantizer;
    BGTQ_REQUIRE(q.bits() >= 1 && q.bits() <= 8, errc::unsupported,
                 "cuda::describe: group " + std::to_string(gi) + " has width " + std::to_string(q.bits()));
    group_desc gd;
    gd.dim = q.dim();
    gd.bits = q.bits();
    gd.coord_off = s.coord_off[gi];
    gd.fp32_radius = q.fp32_radius();
    gd.norm_correction = q.params().norm_correction;
    gd.region = static_cast<std::uint32_t>(s.region[gi]);
    gd.radii = static_cast<std::uint32_t>(s.radii + gi * static_cast<std::size_t>(s.P) * rb);
    gd.dims = g.dims;
    gd.matrix = dense_matrix(q.rotation());
    const int levels = 1 << q.bits();
    gd.centroids.assign(q.centroids(), q.centroids() + levels);
    gd.thresholds.assign(q.thresholds(), q.thresholds() + levels - 1);
    d.groups.push_back(std::move(gd));
  }
  return d;
}

//! Description of a host cache for device_cache::create.
//! @param c         the host cache (Block-GTQ or uniform TQ keys and values, bit-plane
//!                  pages): its shape and every (layer, KV head) codec's groups,
//!                  rotations and codebooks are described; its pages are not copied
//! @param max_pages pool size of the device mirror (-1: the host cache's own)
//! @throws bgtq::error(unsupported) for a group width outside 1..8
template <class Layout>
cache_desc describe(const kv_cache<gtq_pages, gtq_pages, Layout>& c, int max_pages = -1) {
  static_assert(std::is_same_v<Layout, bit_plane_layout>, "the CUDA kernels read bit_plane_layout pages only");
  const cache_config& cfg = c.config();
  cache_desc d;
  d.layers = cfg.layers;
  d.kv_heads = cfg.kv_heads;
  d.q_heads = cfg.q_heads;
  d.head_dim = cfg.head_dim;
  d.page_tokens = cfg.page_tokens;
  d.max_pages = max_pages < 0 ? cfg.max_pages : max_pages;
  for (int l = 0; l < cfg.layers; ++l)
    for (int h = 0; h < cfg.kv_heads; ++h) {
      d.keys.push_back(describe_part(c.key(l, h)));
      d.values.push_back(describe_part(c.value(l, h)));
    }
  return d;
}

//! Copies the host cache's whole page pool into `dev` (same max_pages) and checks that
//! both agree on every arena offset and page size. Synchronous.
//! @return errc::shape_mismatch if the layouts disagree (nothing copied; last_error_message
//!         says which), else as upload_pages
template <class Layout>
errc upload_all_pages(const kv_cache<gtq_pages, gtq_pages, Layout>& c, device_cache& dev, void* stream = nullptr) noexcept {
  const cache_config& cfg = c.config();
  char msg[200];
  if (!dev.valid()) return detail::arg_fail(errc::shape_mismatch, "upload_all_pages: the device_cache is empty");
  if (dev.desc().max_pages != cfg.max_pages || dev.desc().layers != cfg.layers || dev.desc().kv_heads != cfg.kv_heads) {
    std::snprintf(msg, sizeof msg,
                  "upload_all_pages: the device cache has max_pages %d, layers %d, kv_heads %d; the host cache %d, %d, %d",
                  dev.desc().max_pages, dev.desc().layers, dev.desc().kv_heads, cfg.max_pages, cfg.layers, cfg.kv_heads);
    return detail::arg_fail(errc::shape_mismatch, msg);
  }
  if (cfg.max_pages == 0) return errc::ok;
  const std::uint8_t* base = c.page_ptr(0, 0, 0);
  for (int l = 0; l < cfg.layers; ++l)
    for (int h = 0; h < cfg.kv_heads; ++h) {
      if (static_cast<std::size_t>(c.page_ptr(0, l, h) - base) != dev.arena_offset(l, h) ||
          c.head_page_bytes(l, h) != dev.page_part_bytes(l, h) || c.value_offset(l, h) != dev.value_offset(l, h)) {
        std::snprintf(msg, sizeof msg,
                      "upload_all_pages: (layer %d, kv_head %d): arena offset, page part size or value offset differ between "
                      "the host and the device cache (a description of another plan?)",
                      l, h);
        return detail::arg_fail(errc::shape_mismatch, msg);
      }
    }
  for (int l = 0; l < cfg.layers; ++l)
    for (int h = 0; h < cfg.kv_heads; ++h)
      if (const errc e = dev.upload_pages(l, h, 0, cfg.max_pages, c.page_ptr(0, l, h), stream); e != errc::ok) return e;
  return errc::ok;
}

//! Host copies of the arguments decode_attention needs for some sequences of a host
//! cache (upload them, then point decode_args at the device copies).
struct batch_tables {
  int max_pages_per_seq = 0;
  int window_cap = 0;
  long long max_quantized = 0;
  std::vector<int> page_table;          //!< [B][max_pages_per_seq], unused entries 0
  std::vector<int> quantized;           //!< [B]
  std::vector<int> window_len;          //!< [B] sink + tail tokens
  std::vector<std::uint16_t> window_k;  //!< [B][kv_heads][window_cap][head_dim] fp16 bits
  std::vector<std::uint16_t> window_v;
};

//! Gathers the page tables, page token counts and fp16 windows (sink tokens, then the
//! recent tail, oldest first) of `seqs` in `layer`.
template <class Layout>
batch_tables gather_batch(const kv_cache<gtq_pages, gtq_pages, Layout>& c, int layer, const std::vector<int>& seqs) {
  const cache_config& cfg = c.config();
  batch_tables t;
  const std::size_t B = seqs.size();
  std::vector<typename kv_cache<gtq_pages, gtq_pages, Layout>::sequence_view> views;
  for (int s : seqs) views.push_back(c.view(s, layer));
  for (const auto& v : views) {
    const long long np = (v.quantized + cfg.page_tokens - 1) / cfg.page_tokens;
    if (np > t.max_pages_per_seq) t.max_pages_per_seq = static_cast<int>(np);
    if (v.quantized > t.max_quantized) t.max_quantized = v.quantized;
    if (v.sink + v.tail > t.window_cap) t.window_cap = static_cast<int>(v.sink + v.tail);
  }
  if (t.max_pages_per_seq == 0) t.max_pages_per_seq = 1;
  if (t.window_cap == 0) t.window_cap = 1;
  const std::size_t D = static_cast<std::size_t>(cfg.head_dim), H = static_cast<std::size_t>(cfg.kv_heads);
  const std::size_t W = static_cast<std::size_t>(t.window_cap);
  t.page_table.assign(B * static_cast<std::size_t>(t.max_pages_per_seq), 0);
  t.quantized.assign(B, 0);
  t.window_len.assign(B, 0);
  t.window_k.assign(B * H * W * D, 0);
  t.window_v.assign(B * H * W * D, 0);
  for (std::size_t b = 0; b < B; ++b) {
    const auto& v = views[b];
    const long long np = (v.quantized + cfg.page_tokens - 1) / cfg.page_tokens;
    for (long long p = 0; p < np; ++p) t.page_table[b * static_cast<std::size_t>(t.max_pages_per_seq) + static_cast<std::size_t>(p)] = v.pages[p];
    t.quantized[b] = static_cast<int>(v.quantized);
    const long long nw = v.sink + v.tail;
    t.window_len[b] = static_cast<int>(nw);
    for (std::size_t h = 0; h < H; ++h) {
      const auto win = c.window(seqs[b], layer, static_cast<int>(h));
      for (long long i = 0; i < nw; ++i) {
        const std::uint16_t* kr = win.key(i);
        const std::uint16_t* vr = win.value(i);
        const std::size_t o = ((b * H + h) * W + static_cast<std::size_t>(i)) * D;
        for (std::size_t j = 0; j < D; ++j) {
          t.window_k[o + j] = kr[j];
          t.window_v[o + j] = vr[j];
        }
      }
    }
  }
  return t;
}

}  // namespace bgtq::cuda
