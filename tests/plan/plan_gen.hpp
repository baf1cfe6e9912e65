#pragma once
// Random valid plans for the plan tests (counter_rng only).
#include <bgtq/core/rng.hpp>
#include <bgtq/plan/plan.hpp>

#include <cstdint>
#include <vector>

namespace bgtq_test {

//! Geometry of a generated plan (0 = pick at random).
struct plan_shape {
  int layers = 0;
  int kv_heads = 0;
  int head_dim = 0;
};

//! A random plan that passes bgtq::validate: random geometry (head_dim 2..24 or 128,
//! partial rotary, both pairings), every enum value, random widths in [b_min, b_max]
//! turned into groups by make_head_plan, random value seeds and energies.
inline bgtq::plan random_plan(std::uint64_t seed, plan_shape shape = {}) {
  using namespace bgtq;
  counter_rng r(seed, 17);
  plan p;
  p.layers = shape.layers ? shape.layers : 1 + static_cast<int>(r.below(3));
  p.kv_heads = shape.kv_heads ? shape.kv_heads : 1 + static_cast<int>(r.below(3));
  p.q_heads = p.kv_heads * (1 + static_cast<int>(r.below(4)));
  int d = shape.head_dim;
  if (!d) d = r.below(6) == 0 ? 128 : 2 * (1 + static_cast<int>(r.below(12)));
  const int rot = 2 * static_cast<int>(r.below(static_cast<std::uint32_t>(d / 2 + 1)));  // 0..d
  p.rope = rope_layout(d, r.below(2) ? rope_pairing::half : rope_pairing::interleaved, rot, r.below(2) ? 10000.0 : 500000.0);
  if (r.below(8) == 0) p.rope.rotary_dim = 0;  // valid: no rotating block
  p.codebook = static_cast<codebook_kind>(r.below(3));
  p.key_radius = static_cast<radius_format>(r.below(2));
  p.value_radius = static_cast<radius_format>(r.below(2));
  p.norm_correction = r.below(2) != 0;
  p.b_min = static_cast<int>(r.below(3));
  p.b_max = p.b_min + static_cast<int>(r.below(static_cast<std::uint32_t>(9 - p.b_min)));
  p.avg_bits = p.b_min + r.uniform() * (p.b_max - p.b_min);
  p.scope = static_cast<alloc_scope>(r.below(3));
  p.distortion = static_cast<distortion_kind>(r.below(2));
  p.seed = r.next_u64();
  p.calib_tokens = static_cast<std::int64_t>(r.next_u64() >> 20);
  p.value_bits = static_cast<int>(r.below(9));
  const bool pow2 = (d & (d - 1)) == 0;
  p.value_rotation = static_cast<rotation_kind>(r.below(4));
  if (p.value_rotation == rotation_kind::hadamard && !pow2) p.value_rotation = rotation_kind::structured;
  const int L = d / 2;
  for (int l = 0; l < p.layers; ++l) {
    for (int h = 0; h < p.kv_heads; ++h) {
      std::vector<int> widths(static_cast<std::size_t>(L));
      for (int& w : widths) w = p.b_min + static_cast<int>(r.below(static_cast<std::uint32_t>(p.b_max - p.b_min + 1)));
      p.heads.push_back(make_head_plan(widths, mix_seed(p.seed, p.head_index(l, h)), r.below(2) ? 64 : 8));
      p.value_seeds.push_back(r.next_u64());
      for (int i = 0; i < L; ++i) p.scores.push_back(r.below(10) == 0 ? 0.0 : r.uniform() * 1e3);
    }
  }
  return p;
}

}  // namespace bgtq_test
