#pragma once
//! @file cache/factory.hpp
//! Ready-made caches: Block-GTQ keys + TQ-MSE values from a plan, uniform TQ-MSE,
//! fp16, and the codec states they are built from.

#include <vector>

#include "../codec/block_gtq.hpp"
#include "../plan/plan.hpp"
#include "fp16_pages.hpp"
#include "gtq_pages.hpp"
#include "kv_cache.hpp"

namespace bgtq {

//! Block-GTQ keys + TQ-MSE values (the method).
template <class Layout = bit_plane_layout>
using bgtq_cache = kv_cache<gtq_pages, gtq_pages, Layout>;
//! The fp16 baseline.
template <class Layout = bit_plane_layout>
using fp16_cache = kv_cache<fp16_pages, fp16_pages, Layout>;

//! Key states of every (layer, KV head) from a plan's per-head groups.
inline std::vector<gtq_pages::head_state> plan_key_states(const plan& p) {
  validate(p);
  std::vector<gtq_pages::head_state> out;
  out.reserve(p.heads.size());
  for (int l = 0; l < p.layers; ++l)
    for (int h = 0; h < p.kv_heads; ++h) out.push_back(gtq_pages::make(block_gtq_codec::from_plan(p, l, h)));
  return out;
}

//! The value codec of (layer, h) in a plan: uniform TQ-MSE over the whole head (natural
//! dim order) at p.value_bits with p.value_rotation and the head's value seed.
inline block_gtq_codec plan_value_codec(const plan& p, int layer, int h) {
  const rope_layout natural(p.rope.head_dim, rope_pairing::interleaved);
  head_plan hp = uniform_head_plan(natural.num_blocks(), p.value_bits, p.value_seed(layer, h), 0);
  for (auto& g : hp.groups) {
    g.rotation = p.value_rotation;
    g.seed = p.value_seed(layer, h);
  }
  return block_gtq_codec(hp, natural, key_codec_options{p.codebook, p.value_radius, p.norm_correction});
}

//! Bytes per quantized token that a cache with pages of `page_tokens` tokens in `Layout`
//! stores for one head coded by `c`: codes, radii and the page part's 64-byte alignment,
//! over the page size. Exactly kv_cache::bytes_per_token's share of this part (the key
//! part for a key codec, the value part for a value codec): the bit-plane layout packs
//! b-bit codes with no per-group rounding, unlike block_gtq_codec::bytes() (one
//! token-major record, each group rounded up to whole bytes).
//! @throws bgtq::error(invalid_argument) for a page size the layout cannot hold (as
//!         cache_config's page_tokens).
template <class Layout = bit_plane_layout>
double stored_bytes_per_token(const block_gtq_codec& c, int page_tokens = 64) {
  check_page_tokens<Layout>(page_tokens, 0, "stored_bytes_per_token");
  gtq_pages::head_state s = gtq_pages::make(c);
  return static_cast<double>(gtq_pages::configure<Layout>(s, page_tokens)) / static_cast<double>(page_tokens);
}

//! Value states of every (layer, KV head) from a plan (see plan_value_codec).
inline std::vector<gtq_pages::head_state> plan_value_states(const plan& p) {
  validate(p);
  std::vector<gtq_pages::head_state> out;
  out.reserve(p.heads.size());
  for (int l = 0; l < p.layers; ++l)
    for (int h = 0; h < p.kv_heads; ++h) out.push_back(gtq_pages::make(plan_value_codec(p, l, h)));
  return out;
}

//! fp16 states for every (layer, KV head).
//! @throws bgtq::error(invalid_argument) for layers or kv_heads < 1; capacity_exhausted
//!         when the machine cannot hold layers * kv_heads states
inline std::vector<fp16_pages::head_state> fp16_states(int layers, int kv_heads, int head_dim) {
  BGTQ_REQUIRE(layers >= 1 && kv_heads >= 1, errc::invalid_argument,
               "fp16_states: layers = " + std::to_string(layers) + ", kv_heads = " + std::to_string(kv_heads) + " (each must be >= 1)");
  const std::size_t n = static_cast<std::size_t>(layers) * static_cast<std::size_t>(kv_heads);
  const fp16_pages::head_state one = fp16_pages::make(head_dim);
  return or_capacity_exhausted("fp16_states: " + std::to_string(n) + " (layer, KV head) states",
                               [&] { return std::vector<fp16_pages::head_state>(n, one); });
}

//! cache_config matching a plan's shape.
inline cache_config config_for(const plan& p, int max_pages, int page_tokens = 64) {
  cache_config c;
  c.layers = p.layers;
  c.kv_heads = p.kv_heads;
  c.q_heads = p.q_heads;
  c.head_dim = p.rope.head_dim;
  c.max_pages = max_pages;
  c.page_tokens = page_tokens;
  return c;
}

//! A Block-GTQ cache (keys per the plan's groups, values uniform TQ-MSE) for a plan.
//! @throws bgtq::error(shape_mismatch) if cfg's layers, KV heads, query heads or
//!         head_dim differ from the plan's (a swapped layers x heads shape would
//!         otherwise give each (layer, head) another head's plan)
template <class Layout = bit_plane_layout>
bgtq_cache<Layout> make_bgtq_cache(const plan& p, const cache_config& cfg) {
  BGTQ_REQUIRE(cfg.layers == p.layers && cfg.kv_heads == p.kv_heads && cfg.q_heads == p.q_heads &&
                   cfg.head_dim == p.rope.head_dim,
               errc::shape_mismatch,
               "make_bgtq_cache: the cache is " + std::to_string(cfg.layers) + " layers x " + std::to_string(cfg.kv_heads) +
                   " KV heads (" + std::to_string(cfg.q_heads) + " query heads), head_dim " + std::to_string(cfg.head_dim) +
                   "; the plan is " + std::to_string(p.layers) + " x " + std::to_string(p.kv_heads) + " (" +
                   std::to_string(p.q_heads) + "), head_dim " + std::to_string(p.rope.head_dim) + " (bgtq::config_for(plan, ...) copies them)");
  return bgtq_cache<Layout>(cfg, plan_key_states(p), plan_value_states(p));
}

}  // namespace bgtq
