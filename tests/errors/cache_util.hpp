#pragma once
// Builders for the cache rows of the bad-input contract and the numeric tests: small
// plans and caches of every codec, rows from counter_rng.
#include <catch2/catch.hpp>

#include <bgtq/attention/decode.hpp>
#include <bgtq/attention/reference.hpp>
#include <bgtq/cache/factory.hpp>
#include <bgtq/cache/kivi_pages.hpp>
#include <bgtq/core/rng.hpp>

#include <cmath>
#include <span>
#include <vector>

#include "cache_fixtures.hpp"

namespace errors_test {

//! A valid plan with per-block widths cycling through `widths` (groups by make_head_plan).
inline bgtq::plan make_plan(int layers, int kv_heads, int q_heads, int D, std::vector<int> widths, int value_bits,
                            std::uint64_t seed, bgtq::radius_format radius = bgtq::radius_format::fp16) {
  bgtq::plan p;
  p.layers = layers;
  p.kv_heads = kv_heads;
  p.q_heads = q_heads;
  p.rope = bgtq::rope_layout(D, bgtq::rope_pairing::half);
  p.key_radius = radius;
  p.value_radius = radius;
  p.value_bits = value_bits;
  p.value_rotation = (D & (D - 1)) == 0 ? bgtq::rotation_kind::hadamard : bgtq::rotation_kind::structured;
  p.b_min = 0;
  p.b_max = 8;
  p.seed = seed;
  for (int l = 0; l < layers; ++l)
    for (int h = 0; h < kv_heads; ++h) {
      std::vector<int> w(static_cast<std::size_t>(D / 2));
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = widths[(i + static_cast<std::size_t>(l + h)) % widths.size()];
      p.heads.push_back(bgtq::make_head_plan(w, bgtq::mix_seed(seed, static_cast<std::uint64_t>(l * kv_heads + h))));
      p.value_seeds.push_back(bgtq::mix_seed(seed + 1, static_cast<std::uint64_t>(l * kv_heads + h)));
      for (int i = 0; i < D / 2; ++i) p.scores.push_back(1.0);
    }
  bgtq::validate(p);
  return p;
}

inline bgtq::cache_config config(int layers, int kv_heads, int q_heads, int D, int max_pages, int sink = 0, int recent = 0,
                                 int page_tokens = 64) {
  bgtq::cache_config c = bgtq_test::small_config(layers, kv_heads, q_heads, D, max_pages, sink, recent);
  c.page_tokens = page_tokens;
  return c;
}

//! Block-GTQ keys (widths 1..4) + 3-bit TQ values.
template <class Layout = bgtq::bit_plane_layout>
inline bgtq::bgtq_cache<Layout> gtq_cache(const bgtq::cache_config& c, std::uint64_t seed,
                                          bgtq::radius_format radius = bgtq::radius_format::fp16) {
  const auto p = make_plan(c.layers, c.kv_heads, c.q_heads, c.head_dim, {3, 1, 4, 2}, 3, seed, radius);
  return bgtq::make_bgtq_cache<Layout>(p, c);
}

template <class Layout = bgtq::bit_plane_layout>
inline bgtq::fp16_cache<Layout> half_cache(const bgtq::cache_config& c) {
  return bgtq::fp16_cache<Layout>(c, bgtq::fp16_states(c.layers, c.kv_heads, c.head_dim),
                                  bgtq::fp16_states(c.layers, c.kv_heads, c.head_dim));
}

template <class Layout = bgtq::bit_plane_layout>
inline bgtq::kivi_cache<Layout> kivi(const bgtq::cache_config& c, int bits, bool symmetric) {
  bgtq::kivi_options o;
  o.bits = bits;
  o.symmetric = symmetric;
  return bgtq::make_kivi_cache<Layout>(c, o);
}

//! [tokens][heads][D] rows of N(0, scale^2) from counter_rng(seed).
inline std::vector<float> rows(int tokens, int heads, int D, std::uint64_t seed, double scale = 1.0) {
  bgtq::counter_rng r(seed, 5);
  std::vector<float> x(static_cast<std::size_t>(tokens) * static_cast<std::size_t>(heads) * static_cast<std::size_t>(D));
  for (auto& v : x) v = static_cast<float>(scale * r.normal());
  return x;
}

//! Decode attention of one sequence in one layer.
template <class Cache>
std::vector<float> attend(const Cache& cache, int layer, int seq, const std::vector<float>& q, float scale = 0.0f) {
  bgtq::attention_workspace ws(cache);
  std::vector<float> out(q.size());
  const int s[1] = {seq};
  bgtq::decode_attention(cache, layer, std::span<const int>(s, 1), q.data(), out.data(), ws, scale);
  return out;
}

//! decode_attention of (seq, layer 0) must be finite and within `margin` of
//! reference_attention, output by output; returns the reference.
template <class Cache>
std::vector<float> require_matches_reference(const Cache& cache, int seq, const std::vector<float>& q, double margin,
                                             float scale = 0.0f) {
  const auto out = attend(cache, 0, seq, q, scale);
  std::vector<float> ref(q.size());
  bgtq::reference_attention(cache, 0, seq, q.data(), ref.data(), scale);
  for (std::size_t i = 0; i < out.size(); ++i) {
    INFO("output " << i << ": " << out[i] << " vs the reference's " << ref[i]);
    REQUIRE(std::isfinite(out[i]));
    REQUIRE(out[i] == Approx(ref[i]).margin(margin));
  }
  return ref;
}

inline bool all_finite(const std::vector<float>& x) {
  for (float v : x)
    if (!std::isfinite(v)) return false;
  return true;
}

}  // namespace errors_test
