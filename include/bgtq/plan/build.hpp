#pragma once
//! @file plan/build.hpp
//! From block energies to a plan: allocate key widths per scope (head, layer or model)
//! with the chosen distortion law, group equal widths, derive every rotation seed from
//! one plan seed. Also the uniform plan (every block the same width): uniform TQ-MSE.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../allocate/allocate.hpp"
#include "../codebook/codebook.hpp"
#include "plan.hpp"

namespace bgtq {

//! How to turn energies into a plan.
struct plan_options {
  double avg_bits = 3.0;                              //!< key bits per coordinate on average
  int b_min = 1;                                      //!< narrowest block width (0 allows dropping)
  int b_max = 8;                                      //!< widest block width
  alloc_scope scope = alloc_scope::head;              //!< budget pool
  distortion_kind distortion = distortion_kind::rate4;  //!< D(b) the greedy minimises
  codebook_kind codebook = codebook_kind::sphere;     //!< scalar codebook of every group
  int value_bits = -1;                                //!< -1: round(avg_bits), clamped to 0..8
  rotation_kind value_rotation = rotation_kind::hadamard;  //!< (structured when D is not a power of two)
  radius_format key_radius = radius_format::fp16;
  radius_format value_radius = radius_format::fp16;
  bool norm_correction = false;
  int haar_max_dim = 64;  //!< groups up to this dimension use a dense Haar rotation
  //! Charge every key group beyond the first its radius (16 bits fp16, 32 fp32) against
  //! the bit budget, so a head costs no more bytes than uniform TQ-MSE at avg_bits in
  //! bit-plane pages (the default layout; per-head scope only; the budget is lowered
  //! until the allocation fits). Token-major pages round each group's codes up to whole
  //! bytes per token, which the budget does not count: there a charged head can take a
  //! byte or two more per token than uniform (D = 32: 11 against 10).
  bool charge_radii = false;
  std::uint64_t seed = 0x5eed;
};

//! The distortion table the allocator uses for `opt` at head_dim D: 4^-b, or the
//! codebook's measured unit-vector MSE at dimension D (D(0) = 1).
inline distortion_table plan_distortion(const plan_options& opt, int head_dim) {
  if (opt.distortion == distortion_kind::rate4) return distortion_table::rate4();
  return distortion_table::checked(codebook_distortion(opt.codebook, head_dim));
}

//! Builds a validated plan from energies s[layer][kv_head][block] (size layers*kv_heads*L).
//! Warnings (e.g. a capped budget) are appended to *warnings when given.
//! @throws bgtq::error(infeasible) if avg_bits*L < L*b_min; invalid_argument for bad
//!         shapes or options; non_finite for non-finite energies.
inline plan build_plan(int layers, int kv_heads, int q_heads, const rope_layout& rope, std::span<const double> scores,
                       const plan_options& opt, std::int64_t calib_tokens = 0, std::string* warnings = nullptr) {
  rope.validate();
  const int L = rope.num_blocks();
  const std::size_t nh = static_cast<std::size_t>(layers) * static_cast<std::size_t>(kv_heads);
  BGTQ_REQUIRE(layers >= 1 && kv_heads >= 1, errc::invalid_argument, "build_plan: layers and kv_heads must be >= 1");
  BGTQ_REQUIRE(scores.size() == nh * static_cast<std::size_t>(L), errc::shape_mismatch,
               "build_plan: " + std::to_string(scores.size()) + " energies for " + std::to_string(layers) + " layers x " +
                   std::to_string(kv_heads) + " KV heads x " + std::to_string(L) + " blocks");
  BGTQ_REQUIRE(opt.value_bits >= -1 && opt.value_bits <= 8, errc::invalid_argument,
               "build_plan: value_bits = " + std::to_string(opt.value_bits) + " (0 .. 8, or -1 for round(avg_bits))");
  const int vb = opt.value_bits >= 0 ? opt.value_bits : static_cast<int>(std::clamp(std::lround(opt.avg_bits), 0L, 8L));
  BGTQ_REQUIRE(vb >= 0 && vb <= 8, errc::invalid_argument, "build_plan: value bits " + std::to_string(vb) + " outside 0..8");
  const distortion_table dt = plan_distortion(opt, rope.head_dim);

  plan p;
  p.layers = layers;
  p.kv_heads = kv_heads;
  p.q_heads = q_heads;
  p.rope = rope;
  p.codebook = opt.codebook;
  p.key_radius = opt.key_radius;
  p.value_radius = opt.value_radius;
  p.norm_correction = opt.norm_correction;
  p.avg_bits = opt.avg_bits;
  p.b_min = opt.b_min;
  p.b_max = opt.b_max;
  p.scope = opt.scope;
  p.distortion = opt.distortion;
  p.seed = opt.seed;
  p.calib_tokens = calib_tokens;
  p.value_bits = vb;
  const bool pow2 = (rope.head_dim & (rope.head_dim - 1)) == 0;
  p.value_rotation = (opt.value_rotation == rotation_kind::hadamard && !pow2) ? rotation_kind::structured : opt.value_rotation;
  p.scores.assign(scores.begin(), scores.end());

  std::vector<std::vector<int>> widths(nh);
  auto note = [&](const allocation& a, const std::string& where) {
    if (warnings && !a.warning.empty()) *warnings += where + ": " + a.warning + "\n";
  };
  BGTQ_REQUIRE(!opt.charge_radii || opt.scope == alloc_scope::head, errc::unsupported,
               "build_plan: charge_radii needs the per-head scope");
  if (opt.scope == alloc_scope::head) {
    // bit-steps (one bit on both coordinates of a block = 2 bits) that one radius costs
    const std::int64_t radius_steps = opt.key_radius == radius_format::fp32 ? 16 : 8;
    for (std::size_t i = 0; i < nh; ++i) {
      allocation_request r;
      r.scores = scores.subspan(i * static_cast<std::size_t>(L), static_cast<std::size_t>(L));
      const std::int64_t b0 = budget_for(opt.avg_bits, L);
      r.budget = b0;
      r.b_min = opt.b_min;
      r.b_max = opt.b_max;
      r.distortion = dt;
      allocation a = greedy_allocator::allocate(r);
      if (opt.charge_radii) {
        // Candidates: greedy at every budget b <= b0, and the uniform allocation at b0.
        // Keep the lowest objective among those whose codes plus one radius per extra
        // group fit in b0 bit-steps.
        auto groups = [](const std::vector<int>& w) {
          std::vector<int> seen;
          for (int x : w)
            if (x > 0 && std::find(seen.begin(), seen.end(), x) == seen.end()) seen.push_back(x);
          return static_cast<std::int64_t>(seen.size());
        };
        auto fits = [&](const allocation& c) {
          const std::int64_t g = groups(c.bits);
          return c.total_bits + radius_steps * (g > 0 ? g - 1 : 0) <= b0;
        };
        r.budget = b0;
        allocation best = uniform_allocator::allocate(r);
        if (!fits(best)) best.objective = INFINITY;
        const std::int64_t floor_budget = static_cast<std::int64_t>(L) * opt.b_min;
        // budgets above L * b_max give the capped allocation: start there (an avg_bits of
        // 1e4 would otherwise run 10^4 greedy allocations per head)
        const std::int64_t top_budget = std::min<std::int64_t>(b0, static_cast<std::int64_t>(L) * opt.b_max);
        for (std::int64_t b = top_budget; b >= floor_budget; --b) {
          r.budget = b;
          allocation c = greedy_allocator::allocate(r);
          if (fits(c) && c.objective < best.objective) best = std::move(c);
        }
        a = std::move(best);
      }
      if (i == 0) note(a, "allocation");
      widths[i] = std::move(a.bits);
    }
  } else {
    const std::size_t per_pool = opt.scope == alloc_scope::layer ? static_cast<std::size_t>(kv_heads) : nh;
    for (std::size_t first = 0; first < nh; first += per_pool) {
      std::vector<std::span<const double>> pools;
      for (std::size_t i = first; i < first + per_pool; ++i)
        pools.push_back(scores.subspan(i * static_cast<std::size_t>(L), static_cast<std::size_t>(L)));
      // floor(avg * pool blocks), and never below the per-head budgets' sum: budget_for's
      // absolute guard (1e-9) can round one head's avg * L up to an integer but not the
      // pool's (avg 0.749999999875 at L = 4: 3 per head, 11 for 4 heads), and the pooled
      // objective must not exceed the per-head one (docs/theory.md §4)
      std::int64_t budget = budget_for(opt.avg_bits, static_cast<int>(per_pool) * L);
      const std::int64_t per_head = budget_for(opt.avg_bits, L);
      if (per_head <= (std::int64_t{1} << 53) / static_cast<std::int64_t>(per_pool))
        budget = std::max(budget, per_head * static_cast<std::int64_t>(per_pool));
      auto as = allocate_pooled(std::span<const std::span<const double>>(pools), budget, opt.b_min, opt.b_max, dt);
      if (first == 0 && !as.empty()) note(as.front(), "allocation");
      for (std::size_t i = 0; i < per_pool; ++i) widths[first + i] = std::move(as[i].bits);
    }
  }
  for (std::size_t i = 0; i < nh; ++i) {
    p.heads.push_back(make_head_plan(widths[i], mix_seed(opt.seed, 2 * i), opt.haar_max_dim));
    p.value_seeds.push_back(mix_seed(opt.seed, 2 * i + 1));
  }
  validate(p);
  return p;
}

//! A plan that gives every block of every head `key_bits` (uniform TQ-MSE), with
//! unit energies.
inline plan uniform_plan(int layers, int kv_heads, int q_heads, const rope_layout& rope, int key_bits,
                         plan_options opt = {}) {
  opt.avg_bits = key_bits;
  opt.b_min = key_bits;
  opt.b_max = key_bits;
  opt.distortion = distortion_kind::rate4;
  BGTQ_REQUIRE(layers >= 1 && layers <= max_plan_layers && kv_heads >= 1 && kv_heads <= max_plan_kv_heads, errc::invalid_argument,
               "uniform_plan: layers = " + std::to_string(layers) + ", kv_heads = " + std::to_string(kv_heads) +
                   " (layers in 1 .. " + std::to_string(max_plan_layers) + ", kv_heads in 1 .. " +
                   std::to_string(max_plan_kv_heads) + ")");
  // within the limits, a plan can still be more than the machine holds (4096 x 4096 heads)
  return or_capacity_exhausted("uniform_plan: " + std::to_string(layers) + " layers x " + std::to_string(kv_heads) + " KV heads", [&] {
    const std::vector<double> ones(static_cast<std::size_t>(layers) * static_cast<std::size_t>(kv_heads) *
                                       static_cast<std::size_t>(rope.num_blocks()),
                                   1.0);
    return build_plan(layers, kv_heads, q_heads, rope, ones, opt);
  });
}

}  // namespace bgtq
