#pragma once
//! @file eval/summary.hpp
//! The summary of `bgtq eval` (its JSON "summary" object, docs/formats.md): each method's
//! metrics and bytes averaged over the layers, and Block-GTQ against uniform TQ-MSE at
//! one width.

#include <cstddef>
#include <limits>
#include <span>
#include <string>

#include "../core/error.hpp"
#include "metrics.hpp"

namespace bgtq {

//! One method's result on one layer: its attention metrics and the bytes it stores per
//! token per KV head for the keys and for the values.
struct method_result {
  attention_metrics m;
  double key_bytes = 0.0, value_bytes = 0.0;
};

//! Block-GTQ against uniform TQ-MSE at one width (a JSON "bgtq_vs_tq" entry).
struct method_comparison {
  int bits = 0;
  int layers_won = 0;                //!< layers where Block-GTQ's logit MAE is strictly lower
  int layers = 0;
  double logit_mae_reduction = 0.0;  //!< 1 - mean MAE(bgtq) / mean MAE(tq); NaN when tq's is 0
  double kl_reduction = 0.0;         //!< 1 - mean KL(bgtq) / mean KL(tq); NaN when tq's is 0
};

//! Plain means over the layers of the logit MAE, KL, top-10 overlap, output error (NaN
//! when any layer has none: a K-only run) and the key and value bytes. The counts
//! (queries, pairs) are sums.
//! @throws bgtq::error (invalid_argument) for an empty span
inline method_result mean_over_layers(std::span<const method_result> layers) {
  BGTQ_REQUIRE(!layers.empty(), errc::invalid_argument, "mean_over_layers: no layers");
  const double n = static_cast<double>(layers.size());
  method_result s;
  s.m.out_rel_l2 = 0.0;
  for (const method_result& r : layers) {
    s.m.logit_mae += r.m.logit_mae / n;
    s.m.kl += r.m.kl / n;
    s.m.top10 += r.m.top10 / n;
    s.m.out_rel_l2 += r.m.out_rel_l2 / n;
    s.m.queries += r.m.queries;
    s.m.pairs += r.m.pairs;
    s.key_bytes += r.key_bytes / n;
    s.value_bytes += r.value_bytes / n;
  }
  return s;
}

//! Block-GTQ's per-layer results against uniform TQ-MSE's at the same width `bits`
//! (layer l of one span against layer l of the other): the relative reductions of the
//! layer-mean logit MAE and KL, and the layers won.
//! @throws bgtq::error (shape_mismatch) when the spans differ in length or are empty
inline method_comparison compare_methods(std::span<const method_result> bgtq, std::span<const method_result> tq, int bits) {
  BGTQ_REQUIRE(!bgtq.empty() && bgtq.size() == tq.size(), errc::shape_mismatch,
               "compare_methods: " + std::to_string(bgtq.size()) + " Block-GTQ layers against " + std::to_string(tq.size()) +
                   " TQ-MSE layers");
  const method_result b = mean_over_layers(bgtq), t = mean_over_layers(tq);
  method_comparison c;
  c.bits = bits;
  c.layers = static_cast<int>(bgtq.size());
  for (std::size_t l = 0; l < bgtq.size(); ++l) c.layers_won += bgtq[l].m.logit_mae < tq[l].m.logit_mae;
  auto reduction = [](double x, double base) { return base == 0.0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 - x / base; };
  c.logit_mae_reduction = reduction(b.m.logit_mae, t.m.logit_mae);
  c.kl_reduction = reduction(b.m.kl, t.m.kl);
  return c;
}

}  // namespace bgtq
