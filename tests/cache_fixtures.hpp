#pragma once
// Builders shared by the cache and attention tests: random plans and caches of every codec.
#include <bgtq/cache/factory.hpp>
#include <bgtq/cache/kivi_pages.hpp>
#include <bgtq/core/rng.hpp>

#include <vector>

namespace bgtq_test {

//! A valid plan with random per-block widths in [lo, hi] (groups built by make_head_plan).
inline bgtq::plan random_plan(int layers, int kv_heads, int q_heads, int D, bgtq::rope_pairing pairing, int lo, int hi,
                              int value_bits, std::uint64_t seed) {
  bgtq::plan p;
  p.layers = layers;
  p.kv_heads = kv_heads;
  p.q_heads = q_heads;
  p.rope = bgtq::rope_layout(D, pairing);
  p.value_bits = value_bits;
  p.value_rotation = (D & (D - 1)) == 0 ? bgtq::rotation_kind::hadamard : bgtq::rotation_kind::structured;
  p.seed = seed;
  bgtq::counter_rng r(seed);
  for (int l = 0; l < layers; ++l)
    for (int h = 0; h < kv_heads; ++h) {
      std::vector<int> w(static_cast<std::size_t>(D / 2));
      for (auto& x : w) x = lo + static_cast<int>(r.below(static_cast<std::uint32_t>(hi - lo + 1)));
      p.heads.push_back(bgtq::make_head_plan(w, bgtq::mix_seed(seed, static_cast<std::uint64_t>(l * kv_heads + h))));
      p.value_seeds.push_back(bgtq::mix_seed(seed + 1, static_cast<std::uint64_t>(l * kv_heads + h)));
      for (int i = 0; i < D / 2; ++i) p.scores.push_back(1.0);
    }
  return p;
}

inline bgtq::cache_config small_config(int layers, int kv_heads, int q_heads, int D, int max_pages, int sink = 0,
                                       int recent = 0) {
  bgtq::cache_config c;
  c.layers = layers;
  c.kv_heads = kv_heads;
  c.q_heads = q_heads;
  c.head_dim = D;
  c.max_pages = max_pages;
  c.sink = sink;
  c.recent = recent;
  return c;
}

// One factory per codec family, all with the same signature.
struct make_bgtq {
  static constexpr const char* name = "bgtq";
  template <class Layout = bgtq::bit_plane_layout>
  static auto build(const bgtq::cache_config& c, std::uint64_t seed) {
    const auto p = random_plan(c.layers, c.kv_heads, c.q_heads, c.head_dim, bgtq::rope_pairing::half, 1, 6, 3, seed);
    return bgtq::bgtq_cache<Layout>(c, bgtq::plan_key_states(p), bgtq::plan_value_states(p));
  }
};
struct make_tq {
  static constexpr const char* name = "tq";
  template <class Layout = bgtq::bit_plane_layout>
  static auto build(const bgtq::cache_config& c, std::uint64_t seed) {
    const auto p = random_plan(c.layers, c.kv_heads, c.q_heads, c.head_dim, bgtq::rope_pairing::interleaved, 2, 2, 2, seed);
    return bgtq::bgtq_cache<Layout>(c, bgtq::plan_key_states(p), bgtq::plan_value_states(p));
  }
};
struct make_fp16 {
  static constexpr const char* name = "fp16";
  template <class Layout = bgtq::bit_plane_layout>
  static auto build(const bgtq::cache_config& c, std::uint64_t) {
    return bgtq::fp16_cache<Layout>(c, bgtq::fp16_states(c.layers, c.kv_heads, c.head_dim),
                                    bgtq::fp16_states(c.layers, c.kv_heads, c.head_dim));
  }
};
struct make_kivi {
  static constexpr const char* name = "kivi";
  template <class Layout = bgtq::bit_plane_layout>
  static auto build(const bgtq::cache_config& c, std::uint64_t seed) {
    bgtq::kivi_options o;
    o.bits = 1 + static_cast<int>(seed % 8);  // every width's page kernels, over a run of seeds
    o.symmetric = (seed % 3) == 0;
    return bgtq::make_kivi_cache<Layout>(c, o);
  }
};

//! Fills v with N(0, sigma^2) samples.
inline void fill_normal(std::vector<float>& v, std::uint64_t seed, float sigma = 1.0f) {
  bgtq::counter_rng r(seed);
  for (auto& x : v) x = sigma * static_cast<float>(r.normal());
}

}  // namespace bgtq_test
