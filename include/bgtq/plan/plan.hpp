#pragma once
//! @file plan/plan.hpp
//! The calibration plan: per (layer, KV head) the key bit width of every RoPE block,
//! the groups (blocks of equal width, each one TQ-MSE vector with its own rotation and
//! seed), the value codec settings, and the energies the allocation was made from.
//! A plan is run-time data: one cache and one kernel launch serve every head of a layer.
//! Serialisation (versioned, checksummed binary + JSON) lives in plan/plan_io.hpp.

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../codebook/kind.hpp"
#include "../core/error.hpp"
#include "../core/rng.hpp"
#include "../rope/layout.hpp"
#include "../rotation/kind.hpp"

namespace bgtq {

//! How a radius (vector norm) is stored.
enum class radius_format : unsigned char {
  fp16 = 0,  //!< 2 bytes; norms above 65504 are clamped and counted (see docs/errors.md)
  fp32 = 1,  //!< 4 bytes, never clamps
};
inline const char* to_string(radius_format r) noexcept { return r == radius_format::fp32 ? "fp32" : "fp16"; }
//! Bytes of one stored radius.
inline constexpr int radius_bytes(radius_format r) noexcept { return r == radius_format::fp32 ? 4 : 2; }

//! Pool over which one bit budget is shared.
enum class alloc_scope : unsigned char {
  head = 0,   //!< per (layer, KV head): the paper's setting
  layer = 1,  //!< all KV heads of a layer share one budget
  model = 2,  //!< one budget for the whole model
};
inline const char* to_string(alloc_scope s) noexcept {
  return s == alloc_scope::head ? "head" : s == alloc_scope::layer ? "layer" : "model";
}

//! Distortion law the greedy allocator minimises.
enum class distortion_kind : unsigned char {
  rate4 = 0,     //!< D(b) = 4^-b (the paper)
  codebook = 1,  //!< the codebook's measured unit-vector MSE D(b)
};
inline const char* to_string(distortion_kind d) noexcept { return d == distortion_kind::codebook ? "codebook" : "rate4"; }

//! One key group: blocks of equal width encoded as a single TQ-MSE vector of
//! dimension 2*|blocks|.
struct group_spec {
  int bits = 0;                               //!< 0..8; 0 = dropped (no codes, decodes to zero)
  rotation_kind rotation = rotation_kind::haar;  //!< rotation of the group sub-vector
  std::uint64_t seed = 0;                     //!< rotation seed
  std::vector<int> blocks;                    //!< RoPE block indices, strictly ascending

  //! Dimension of the group sub-vector.
  int dim() const noexcept { return 2 * static_cast<int>(blocks.size()); }
  friend bool operator==(const group_spec&, const group_spec&) = default;
};

//! The largest shape a plan holds (validate, the plan readers, build_plan): layers, KV
//! heads and query heads.
inline constexpr int max_plan_layers = 4096;
inline constexpr int max_plan_kv_heads = 4096;
inline constexpr int max_plan_q_heads = 65536;

//! The key plan of one (layer, KV head).
struct head_plan {
  std::vector<int> widths;         //!< bit width per RoPE block (size L)
  std::vector<group_spec> groups;  //!< ordered by their first block index
  friend bool operator==(const head_plan&, const head_plan&) = default;
};

//! Rotation used for a group (or value vector) of dimension n under the default
//! policy: dense Haar up to `haar_max_dim`, else the fast rotation (Hadamard for powers
//! of two, structured otherwise).
inline rotation_kind default_rotation_for(int n, int haar_max_dim = 64) noexcept {
  if (n <= haar_max_dim) return rotation_kind::haar;
  return (n & (n - 1)) == 0 ? rotation_kind::hadamard : rotation_kind::structured;
}

//! A whole model's plan.
struct plan {
  static constexpr std::uint32_t format_version = 1;

  int layers = 0;    //!< number of layers
  int kv_heads = 0;  //!< KV heads per layer
  int q_heads = 0;   //!< query heads per layer (multiple of kv_heads)
  rope_layout rope;  //!< head geometry
  codebook_kind codebook = codebook_kind::sphere;
  radius_format key_radius = radius_format::fp16;
  radius_format value_radius = radius_format::fp16;
  bool norm_correction = false;  //!< decode with r/||c|| instead of r

  // provenance of the allocation
  double avg_bits = 3.0;
  int b_min = 1;
  int b_max = 8;
  alloc_scope scope = alloc_scope::head;
  distortion_kind distortion = distortion_kind::rate4;
  std::uint64_t seed = 0;             //!< plan seed every rotation seed was derived from
  std::int64_t calib_tokens = 0;      //!< tokens the energies were measured on

  // values: uniform TQ-MSE over the whole head
  int value_bits = 3;                                  //!< 0..8
  rotation_kind value_rotation = rotation_kind::hadamard;

  std::vector<head_plan> heads;           //!< [layer * kv_heads + h]
  std::vector<std::uint64_t> value_seeds;  //!< [layer * kv_heads + h]
  std::vector<double> scores;             //!< energies s_i, [layer][kv_head][block]

  int num_blocks() const noexcept { return rope.num_blocks(); }
  int head_dim() const noexcept { return rope.head_dim; }
  std::size_t head_index(int layer, int h) const noexcept {
    return static_cast<std::size_t>(layer) * static_cast<std::size_t>(kv_heads) + static_cast<std::size_t>(h);
  }
  //! head_index(layer, h) after checking both, and that the plan holds that head.
  //! @throws bgtq::error(not_found) naming the layer or KV head that does not exist.
  std::size_t checked_head_index(int layer, int h) const {
    BGTQ_REQUIRE(layer >= 0 && layer < layers, errc::not_found,
                 "plan: layer " + std::to_string(layer) + " does not exist (layers: " + std::to_string(layers) + ")");
    BGTQ_REQUIRE(h >= 0 && h < kv_heads, errc::not_found,
                 "plan: KV head " + std::to_string(h) + " does not exist (kv_heads: " + std::to_string(kv_heads) + ")");
    const std::size_t i = head_index(layer, h);
    BGTQ_REQUIRE(i < heads.size() && i < value_seeds.size(), errc::invalid_argument,
                 "plan: " + std::to_string(heads.size()) + " head plans and " + std::to_string(value_seeds.size()) +
                     " value seeds, layers * kv_heads = " + std::to_string(static_cast<std::size_t>(layers) * kv_heads) +
                     " (an invalid plan: bgtq::validate)");
    return i;
  }
  //! @throws bgtq::error(not_found) for a layer or KV head that does not exist.
  const head_plan& head(int layer, int h) const { return heads[checked_head_index(layer, h)]; }
  //! @throws bgtq::error(not_found) for a layer or KV head that does not exist.
  std::uint64_t value_seed(int layer, int h) const { return value_seeds[checked_head_index(layer, h)]; }
  //! Energy of block i of (layer, h).
  //! @throws bgtq::error(not_found) for a layer, KV head or block that does not exist.
  double score(int layer, int h, int i) const {
    const std::size_t at = checked_head_index(layer, h);
    BGTQ_REQUIRE(i >= 0 && i < num_blocks(), errc::not_found,
                 "plan: block " + std::to_string(i) + " does not exist (blocks: " + std::to_string(num_blocks()) + ")");
    const std::size_t j = at * static_cast<std::size_t>(num_blocks()) + static_cast<std::size_t>(i);
    BGTQ_REQUIRE(j < scores.size(), errc::invalid_argument,
                 "plan: " + std::to_string(scores.size()) + " scores, too few for " + std::to_string(layers) + " layers x " +
                     std::to_string(kv_heads) + " KV heads x " + std::to_string(num_blocks()) + " blocks");
    return scores[j];
  }

  friend bool operator==(const plan&, const plan&) = default;
};

//! Groups from widths: blocks of equal width form one group, groups ordered by their
//! first block; each group gets `rotation_for(dim)` and the seed
//! mix_seed(head_seed, group index).
inline head_plan make_head_plan(const std::vector<int>& widths, std::uint64_t head_seed, int haar_max_dim = 64) {
  head_plan hp;
  hp.widths = widths;
  for (int i = 0; i < static_cast<int>(widths.size()); ++i) {
    const int b = widths[static_cast<std::size_t>(i)];
    BGTQ_REQUIRE(b >= 0 && b <= 8, errc::invalid_argument,
                 "block " + std::to_string(i) + " has width " + std::to_string(b) + " (allowed 0..8)");
    group_spec* g = nullptr;
    for (auto& cand : hp.groups)
      if (cand.bits == b) g = &cand;
    if (!g) {
      hp.groups.push_back(group_spec{});
      g = &hp.groups.back();
      g->bits = b;
    }
    g->blocks.push_back(i);
  }
  for (std::size_t gi = 0; gi < hp.groups.size(); ++gi) {
    auto& g = hp.groups[gi];
    g.rotation = default_rotation_for(g.dim(), haar_max_dim);
    g.seed = mix_seed(head_seed, gi);
  }
  return hp;
}

//! Checks one head plan against a layout of L RoPE blocks: L widths; groups in order of
//! their first block, each non-empty, of 0-8 bits, with a known rotation (Hadamard only at
//! a power-of-two dimension), its blocks ascending in [0, L) with that width; every block
//! in exactly one group. Throws bgtq::error(invalid_argument) with `where` ("plan: layer
//! 3 kv_head 1") leading the message.
inline void validate_head(const head_plan& hp, int L, const std::string& where) {
  BGTQ_REQUIRE(static_cast<int>(hp.widths.size()) == L, errc::invalid_argument,
               where + " has " + std::to_string(hp.widths.size()) + " widths, expected " + std::to_string(L));
  std::vector<int> seen(static_cast<std::size_t>(L), 0);
  int prev_first = -1;
  for (std::size_t gi = 0; gi < hp.groups.size(); ++gi) {
    const group_spec& g = hp.groups[gi];
    const std::string gw = where + " group " + std::to_string(gi);
    BGTQ_REQUIRE(g.bits >= 0 && g.bits <= 8, errc::invalid_argument, gw + " bits = " + std::to_string(g.bits));
    BGTQ_REQUIRE(!g.blocks.empty(), errc::invalid_argument, gw + " is empty");
    BGTQ_REQUIRE(g.blocks.front() > prev_first, errc::invalid_argument, gw + " is out of order");
    prev_first = g.blocks.front();
    BGTQ_REQUIRE(static_cast<unsigned>(g.rotation) <= 3u, errc::invalid_argument, gw + " rotation kind");
    if (g.rotation == rotation_kind::hadamard)
      BGTQ_REQUIRE((g.dim() & (g.dim() - 1)) == 0, errc::invalid_argument,
                   gw + " uses hadamard at dimension " + std::to_string(g.dim()) + " (not a power of two)");
    int last = -1;
    for (int b : g.blocks) {
      BGTQ_REQUIRE(b > last && b < L, errc::invalid_argument, gw + " block " + std::to_string(b) + " is out of range or order");
      last = b;
      BGTQ_REQUIRE(hp.widths[static_cast<std::size_t>(b)] == g.bits, errc::invalid_argument,
                   gw + " block " + std::to_string(b) + " has width " + std::to_string(hp.widths[static_cast<std::size_t>(b)]) +
                       " but the group has " + std::to_string(g.bits));
      ++seen[static_cast<std::size_t>(b)];
    }
  }
  for (int i = 0; i < L; ++i)
    BGTQ_REQUIRE(seen[static_cast<std::size_t>(i)] == 1, errc::invalid_argument,
                 where + " block " + std::to_string(i) + " appears in " + std::to_string(seen[static_cast<std::size_t>(i)]) +
                     " groups");
}

//! Checks every invariant of a plan and throws bgtq::error(invalid_argument) naming the
//! first problem (layer, head, group, block, value).
inline void validate(const plan& p) {
  auto where = [](int l, int h) { return "layer " + std::to_string(l) + " kv_head " + std::to_string(h); };
  BGTQ_REQUIRE(p.layers >= 1 && p.layers <= max_plan_layers, errc::invalid_argument, "plan: layers = " + std::to_string(p.layers));
  BGTQ_REQUIRE(p.kv_heads >= 1 && p.kv_heads <= max_plan_kv_heads, errc::invalid_argument,
               "plan: kv_heads = " + std::to_string(p.kv_heads));
  BGTQ_REQUIRE(p.q_heads >= p.kv_heads && p.q_heads % p.kv_heads == 0, errc::invalid_argument,
               "plan: q_heads = " + std::to_string(p.q_heads) + " is not a multiple of kv_heads = " +
                   std::to_string(p.kv_heads));
  BGTQ_REQUIRE(p.q_heads <= max_plan_q_heads, errc::invalid_argument,
               "plan: q_heads = " + std::to_string(p.q_heads) + " > " + std::to_string(max_plan_q_heads));
  BGTQ_REQUIRE(static_cast<unsigned>(p.rope.pairing) <= 1u, errc::invalid_argument, "plan: unknown RoPE pairing");
  BGTQ_REQUIRE(static_cast<unsigned>(p.codebook) <= 2u, errc::invalid_argument, "plan: unknown codebook kind");
  BGTQ_REQUIRE(static_cast<unsigned>(p.key_radius) <= 1u && static_cast<unsigned>(p.value_radius) <= 1u,
               errc::invalid_argument, "plan: unknown radius format");
  BGTQ_REQUIRE(static_cast<unsigned>(p.scope) <= 2u, errc::invalid_argument, "plan: unknown allocation scope");
  BGTQ_REQUIRE(static_cast<unsigned>(p.distortion) <= 1u, errc::invalid_argument, "plan: unknown distortion law");
  BGTQ_REQUIRE(static_cast<unsigned>(p.value_rotation) <= 3u, errc::invalid_argument, "plan: unknown value rotation");
  BGTQ_REQUIRE(std::isfinite(p.avg_bits) && p.avg_bits >= 0.0, errc::invalid_argument, "plan: avg_bits is not finite and >= 0");
  BGTQ_REQUIRE(p.calib_tokens >= 0, errc::invalid_argument, "plan: calib_tokens < 0");
  p.rope.validate();
  BGTQ_REQUIRE(p.rope.head_dim <= 1024, errc::invalid_argument, "plan: head_dim > 1024");
  BGTQ_REQUIRE(p.b_min >= 0 && p.b_min <= p.b_max && p.b_max <= 8, errc::invalid_argument,
               "plan: b_min/b_max = " + std::to_string(p.b_min) + "/" + std::to_string(p.b_max));
  BGTQ_REQUIRE(p.value_bits >= 0 && p.value_bits <= 8, errc::invalid_argument,
               "plan: value_bits = " + std::to_string(p.value_bits));
  const std::size_t nh = static_cast<std::size_t>(p.layers) * static_cast<std::size_t>(p.kv_heads);
  const int L = p.num_blocks();
  BGTQ_REQUIRE(p.heads.size() == nh, errc::invalid_argument,
               "plan: " + std::to_string(p.heads.size()) + " head plans for " + std::to_string(nh) + " heads");
  BGTQ_REQUIRE(p.value_seeds.size() == nh, errc::invalid_argument, "plan: value_seeds has the wrong size");
  BGTQ_REQUIRE(p.scores.size() == nh * static_cast<std::size_t>(L), errc::invalid_argument,
               "plan: scores has the wrong size");
  for (std::size_t i = 0; i < p.scores.size(); ++i)
    BGTQ_REQUIRE(std::isfinite(p.scores[i]) && p.scores[i] >= 0.0, errc::invalid_argument,
                 "plan: scores[" + std::to_string(i) + "] (an energy) is negative or not finite");
  for (int l = 0; l < p.layers; ++l) {
    for (int h = 0; h < p.kv_heads; ++h) {
      validate_head(p.head(l, h), L, "plan: " + where(l, h));
    }
  }
  if (p.value_rotation == rotation_kind::hadamard)
    BGTQ_REQUIRE((p.rope.head_dim & (p.rope.head_dim - 1)) == 0, errc::invalid_argument,
                 "plan: value rotation hadamard needs a power-of-two head_dim");
}

}  // namespace bgtq
