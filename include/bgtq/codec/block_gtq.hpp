#pragma once
//! @file codec/block_gtq.hpp
//! Block-GTQ key codec: the RoPE blocks of a head are grouped by allocated bit width;
//! each group's sub-vector (its blocks' dims, in block order, dimension 2*|group|) is
//! one TQ-MSE vector with its own rotation, seed and radius.
//!
//! Record layout: `// [group 0 codes (bit_tight, ceil(n0*b0/8) bytes)] ... [group G-1
//! codes] [radius of group 0] ... [radius of group G-1]`; radii are fp16 (2 bytes) or
//! fp32 (4 bytes); groups of width 0 store nothing and decode to zero.

#include <cstdint>
#include <string>
#include <vector>

#include "../pack/bit_tight.hpp"
#include "../plan/plan.hpp"
#include "../rope/layout.hpp"
#include "concepts.hpp"
#include "tq_quantizer.hpp"

namespace bgtq {

//! Options shared by every key group of a head.
struct key_codec_options {
  codebook_kind codebook = codebook_kind::sphere;
  radius_format radius = radius_format::fp16;
  bool norm_correction = false;
};

//! One group of a Block-GTQ head: a TQ-MSE quantizer over the gathered dims.
struct gtq_group {
  tq_quantizer quantizer;    //!< dimension 2*|blocks|
  std::vector<int> dims;     //!< head dims of the sub-vector, in order (block order, then pair order)
  std::size_t code_offset = 0;   //!< byte offset of this group's codes in a record
  std::size_t code_bytes = 0;    //!< ceil(n*b/8)
  std::size_t radius_offset = 0; //!< byte offset of this group's radius in a record
};

//! Block-GTQ codec of one (layer, KV head).
class block_gtq_codec {
 public:
  block_gtq_codec() = default;
  //! @throws bgtq::error if the head plan does not fit the RoPE layout.
  block_gtq_codec(const head_plan& hp, const rope_layout& rope, const key_codec_options& o) : dim_(rope.head_dim) {
    BGTQ_REQUIRE(static_cast<int>(hp.widths.size()) == rope.num_blocks(), errc::shape_mismatch,
                 "head plan has " + std::to_string(hp.widths.size()) + " widths for " +
                     std::to_string(rope.num_blocks()) + " RoPE blocks");
    // the groups must cover the layout's blocks exactly once (a hand-built head plan with
    // a block past the layout would make append read outside the token's row)
    validate_head(hp, rope.num_blocks(), "head plan");
    std::size_t off = 0;
    for (const group_spec& g : hp.groups) {
      if (g.bits == 0) continue;
      gtq_group gg;
      tq_params p;
      p.dim = g.dim();
      p.bits = g.bits;
      p.rotation = g.rotation;
      p.seed = g.seed;
      p.codebook = o.codebook;
      p.norm_correction = o.norm_correction;
      p.radius = o.radius;
      gg.quantizer = tq_quantizer(p);
      for (int b : g.blocks) {
        const auto d = rope.block_dims(b);
        gg.dims.push_back(d[0]);
        gg.dims.push_back(d[1]);
      }
      gg.code_offset = off;
      gg.code_bytes = bit_tight::bytes(static_cast<std::size_t>(p.dim), p.bits);
      off += gg.code_bytes;
      groups_.push_back(std::move(gg));
    }
    for (auto& g : groups_) {
      g.radius_offset = off;
      off += static_cast<std::size_t>(radius_bytes(o.radius));
    }
    bytes_ = off;
  }

  //! The codec of (layer, h) in a plan.
  static block_gtq_codec from_plan(const plan& p, int layer, int h) {
    return block_gtq_codec(p.head(layer, h), p.rope, key_codec_options{p.codebook, p.key_radius, p.norm_correction});
  }

  int dim() const noexcept { return dim_; }
  std::size_t bytes() const noexcept { return bytes_; }
  const std::vector<gtq_group>& groups() const noexcept { return groups_; }

  //! Encodes x[dim] into out[bytes()]; nothing is written for non-finite input.
  errc encode(const float* x, std::uint8_t* out, encode_stats* st = nullptr) const {
    if (!detail::all_finite(x, static_cast<std::size_t>(dim_))) return errc::non_finite;
    alignas(64) float sub[max_codec_dim];
    alignas(64) std::uint8_t codes[max_codec_dim];
    for (const gtq_group& g : groups_) {
      const int n = g.quantizer.dim();
      for (int j = 0; j < n; ++j) sub[j] = x[g.dims[static_cast<std::size_t>(j)]];
      float r = 0.0f;
      (void)g.quantizer.quantize(sub, codes, r, st);
      bit_tight::pack(codes, static_cast<std::size_t>(n), g.quantizer.bits(), out + g.code_offset);
      detail::store_radius(out + g.radius_offset, r, g.quantizer.fp32_radius());
    }
    return errc::ok;
  }
  //! Decodes in[bytes()] into x[dim].
  void decode(const std::uint8_t* in, float* x) const {
    for (int j = 0; j < dim_; ++j) x[j] = 0.0f;
    alignas(64) float sub[max_codec_dim];
    alignas(64) std::uint8_t codes[max_codec_dim];
    for (const gtq_group& g : groups_) {
      const int n = g.quantizer.dim();
      bit_tight::unpack(in + g.code_offset, static_cast<std::size_t>(n), g.quantizer.bits(), codes);
      g.quantizer.dequantize(codes, detail::load_radius(in + g.radius_offset, g.quantizer.fp32_radius()), sub);
      for (int j = 0; j < n; ++j) x[g.dims[static_cast<std::size_t>(j)]] = sub[j];
    }
  }

 private:
  int dim_ = 0;
  std::size_t bytes_ = 0;
  std::vector<gtq_group> groups_;
};

static_assert(vector_codec<block_gtq_codec>);

//! A head plan that gives every block the same width b: Block-GTQ with it is uniform
//! TQ-MSE over the whole head (one group, dimension D).
inline head_plan uniform_head_plan(int num_blocks, int bits, std::uint64_t seed, int haar_max_dim = 64) {
  return make_head_plan(std::vector<int>(static_cast<std::size_t>(num_blocks), bits), seed, haar_max_dim);
}

}  // namespace bgtq
