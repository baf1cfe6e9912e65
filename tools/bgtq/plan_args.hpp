#pragma once
// Command-line options shared by the commands that build plans (calibrate, eval, ppl, demo).
#include <bgtq/plan/build.hpp>

#include <iomanip>
#include <sstream>
#include <string>

#include "cli.hpp"

namespace bgtq::cli {

//! --rope interleaved|half as a usage-checked pairing (bad names exit 2).
inline rope_pairing pairing_from_args(args& a) {
  const std::string r = a.require("rope");
  try {
    return parse_rope_pairing(r);
  } catch (const error& e) {
    throw usage_error(std::string("--rope: ") + e.what());
  }
}

//! Allocation options: --b-min --b-max --scope --distortion --value-bits --seed --norm-correction
//! --charge-radii.
inline plan_options plan_options_from_args(args& a, double avg_bits) {
  plan_options o;
  o.avg_bits = avg_bits;
  o.b_min = static_cast<int>(a.get_int("b-min", 1, 0, 8));
  o.b_max = static_cast<int>(a.get_int("b-max", 8, 0, 8));
  if (o.b_min > o.b_max) throw usage_error("--b-min must not exceed --b-max");
  const std::string scope = a.get_or("scope", "head");
  if (scope == "head") o.scope = alloc_scope::head;
  else if (scope == "layer") o.scope = alloc_scope::layer;
  else if (scope == "model") o.scope = alloc_scope::model;
  else throw usage_error("--scope must be head, layer or model");
  const std::string dist = a.get_or("distortion", "rate4");
  if (dist == "rate4") o.distortion = distortion_kind::rate4;
  else if (dist == "codebook") o.distortion = distortion_kind::codebook;
  else throw usage_error("--distortion must be rate4 or codebook");
  o.value_bits = static_cast<int>(a.get_int("value-bits", -1, -1, 8));
  o.seed = static_cast<std::uint64_t>(a.get_int("seed", 0x5eed, 0, (1L << 62)));
  o.norm_correction = a.flag("norm-correction");
  o.charge_radii = a.flag("charge-radii");
  if (o.charge_radii && o.scope != alloc_scope::head)
    throw usage_error("--charge-radii needs --scope head (the radii are charged to each head's own budget), not --scope " +
                      scope);
  return o;
}

//! A plan file given on the command line (eval --plan, the llama2.c commands' --kv
//! plan:FILE) must be one for the model at hand: its layers, heads and head geometry. A
//! plan for a swapped layers x heads shape would give each (layer, head) another's widths,
//! one for the other pairing would quantize the wrong coordinate pairs; rope.base does not
//! enter the codecs. `what` names the plan ("--plan P"), `against` the model with its verb
//! ("the dumps are").
//! @throws bgtq::error(shape_mismatch) naming both shapes
inline void require_plan_fits(const plan& p, const std::string& what, int layers, int q_heads, int kv_heads,
                              const rope_layout& rope, const std::string& against) {
  const auto shape = [](int l, int hq, int hkv, const rope_layout& r) {
    return std::to_string(l) + " layer" + (l == 1 ? "" : "s") + " x " + std::to_string(hkv) + " KV head" + (hkv == 1 ? "" : "s") +
           " (" + std::to_string(hq) + " query head" + (hq == 1 ? "" : "s") + "), head_dim " + std::to_string(r.head_dim) + ", " +
           to_string(r.pairing) + " pairing, rotary_dim " + std::to_string(r.rotary_dim);
  };
  BGTQ_REQUIRE(p.layers == layers && p.q_heads == q_heads && p.kv_heads == kv_heads && p.rope.head_dim == rope.head_dim &&
                   p.rope.pairing == rope.pairing && p.rope.rotary_dim == rope.rotary_dim,
               errc::shape_mismatch,
               what + " is a plan for " + shape(p.layers, p.q_heads, p.kv_heads, p.rope) + "; " + against + " " +
                   shape(layers, q_heads, kv_heads, rope));
}

//! An average width below --b-min is infeasible whatever the head dimension
//! (B = floor(avg_bits * L) < L * b_min for every L >= 1; docs/errors.md, row 7): refused
//! before the activations are read, which for a large dump can take minutes. The message
//! reads `prefix` (e.g. "bgtq@1: "), then `option` and its value.
inline void require_feasible_average(double avg_bits, int b_min, const std::string& prefix, const char* option) {
  if (!(avg_bits < b_min - 1e-6)) return;
  std::ostringstream avg;
  avg << std::setprecision(10) << avg_bits;
  fail(errc::infeasible, prefix + option + " " + avg.str() + " is below --b-min " + std::to_string(b_min) +
                             ": every block takes at least " + std::to_string(b_min) + (b_min == 1 ? " bit" : " bits") +
                             ", so no plan averages " +
                             avg.str() + " (B = floor(avg_bits * L) < L * b_min for every number of blocks L)");
}

}  // namespace bgtq::cli
