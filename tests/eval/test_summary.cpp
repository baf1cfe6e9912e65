// bgtq eval's summary (eval/summary.hpp): means over layers and Block-GTQ against uniform
// TQ-MSE, on hand-made per-layer results whose means and ratios are exact in binary.
#include <bgtq/eval/summary.hpp>

#include <cmath>
#include <utility>
#include <vector>

#include "common.hpp"

namespace {

bgtq::method_result layer(double mae, double kl, double top10, double out, double kb, double vb, std::int64_t queries) {
  bgtq::method_result r;
  r.m.logit_mae = mae;
  r.m.kl = kl;
  r.m.top10 = top10;
  r.m.out_rel_l2 = out;
  r.m.queries = queries;
  r.m.pairs = 3 * queries;
  r.key_bytes = kb;
  r.value_bytes = vb;
  return r;
}

}  // namespace

TEST_CASE("mean_over_layers: every metric and byte count is its plain mean over the layers", "[eval][summary]") {
  const std::vector<bgtq::method_result> ls{layer(0.5, 0.25, 1.0, 0.125, 10, 20, 4), layer(1.5, 0.75, 0.5, 0.375, 14, 28, 6),
                                            layer(1.0, 0.5, 0.75, 0.25, 12, 12, 5), layer(2.0, 1.5, 0.25, 0.5, 16, 20, 1)};
  const auto s = bgtq::mean_over_layers(ls);
  CHECK(s.m.logit_mae == Approx(1.25).margin(1e-15));
  CHECK(s.m.kl == Approx(0.75).margin(1e-15));
  CHECK(s.m.top10 == Approx(0.625).margin(1e-15));
  CHECK(s.m.out_rel_l2 == Approx(0.3125).margin(1e-15));
  CHECK(s.key_bytes == Approx(13.0).margin(1e-13));
  CHECK(s.value_bytes == Approx(20.0).margin(1e-13));
  CHECK(s.m.queries == 16);
  CHECK(s.m.pairs == 48);
  // a K-only run: no output error in any layer, none in the mean
  auto k_only = ls;
  for (auto& r : k_only) r.m.out_rel_l2 = std::nan("");
  CHECK(std::isnan(bgtq::mean_over_layers(k_only).m.out_rel_l2));
  CHECK(bgtq::mean_over_layers(k_only).m.kl == Approx(0.75).margin(1e-15));
  // one layer is its own mean
  const auto one = bgtq::mean_over_layers(std::span(ls.data(), 1));
  CHECK(one.m.logit_mae == 0.5);
  CHECK(one.value_bytes == 20.0);
  CHECK_THROWS_AS(bgtq::mean_over_layers({}), bgtq::error);
}

TEST_CASE("compare_methods: reductions of the layer means, and the layers won", "[eval][summary]") {
  // tq: MAE 1, 2, 1 (mean 4/3), KL 0.5, 0.25, 0.75 (mean 0.5); bgtq: MAE 0.5, 2, 1.5 (mean 4/3
  // too: the reduction is of the means, not a mean of per-layer reductions), KL 0.25, 0.125,
  // 0.375 (mean 0.25). Layer 1 ties (not a win), layer 2 is lost.
  const std::vector<bgtq::method_result> tq{layer(1, 0.5, 0.5, 0.5, 10, 10, 1), layer(2, 0.25, 0.5, 0.5, 10, 10, 1),
                                            layer(1, 0.75, 0.5, 0.5, 10, 10, 1)};
  const std::vector<bgtq::method_result> bg{layer(0.5, 0.25, 0.5, 0.5, 11, 10, 1), layer(2, 0.125, 0.5, 0.5, 11, 10, 1),
                                            layer(1.5, 0.375, 0.5, 0.5, 11, 10, 1)};
  const auto c = bgtq::compare_methods(bg, tq, 3);
  CHECK(c.bits == 3);
  CHECK(c.layers == 3);
  CHECK(c.layers_won == 1);
  CHECK(c.logit_mae_reduction == Approx(0.0).margin(1e-15));
  CHECK(c.kl_reduction == Approx(0.5).margin(1e-15));
  // the other way round: TQ-MSE "against" Block-GTQ doubles the KL (-100%) and wins one layer
  const auto r = bgtq::compare_methods(tq, bg, 3);
  CHECK(r.kl_reduction == Approx(-1.0).margin(1e-15));
  CHECK(r.layers_won == 1);
  // a baseline of zero error gives no ratio (NaN: JSON null), not an infinity
  auto zero = tq;
  for (auto& x : zero) x.m.kl = 0.0;
  const auto z = bgtq::compare_methods(bg, zero, 3);
  CHECK(std::isnan(z.kl_reduction));
  CHECK(z.logit_mae_reduction == Approx(0.0).margin(1e-15));
  // the MAE reduction's own direction and scale (above it is 0, which a reduction that
  // is constant, negated or of the inverse ratio also gives): bgtq MAE 0.5, 1, 0.75
  // (mean 0.75) against tq's 4/3 is 1 - 0.75 / (4/3) = 0.4375; the other way round
  // 1 - (4/3) / 0.75 = -7/9; against a zero baseline no ratio
  auto better = bg;
  better[0].m.logit_mae = 0.5;
  better[1].m.logit_mae = 1.0;
  better[2].m.logit_mae = 0.75;
  CHECK(bgtq::compare_methods(better, tq, 3).logit_mae_reduction == Approx(0.4375).margin(1e-15));
  CHECK(bgtq::compare_methods(better, tq, 3).layers_won == 3);
  CHECK(bgtq::compare_methods(tq, better, 3).logit_mae_reduction == Approx(-7.0 / 9.0).margin(1e-15));
  auto exact = tq;
  for (auto& x : exact) x.m.logit_mae = 0.0;
  CHECK(std::isnan(bgtq::compare_methods(better, exact, 3).logit_mae_reduction));
  // spans of different lengths either way, or empty ones: shape_mismatch
  for (const auto& [b, t] : {std::pair{std::span(bg.data(), 3), std::span(tq.data(), 2)},
                             std::pair{std::span(bg.data(), 2), std::span(tq.data(), 3)},
                             std::pair{std::span(bg.data(), 0), std::span(tq.data(), 0)}}) {
    INFO(b.size() << " Block-GTQ layers, " << t.size() << " TQ-MSE layers");
    try {
      (void)bgtq::compare_methods(b, t, 3);
      FAIL("no error");
    } catch (const bgtq::error& e) {
      CHECK(e.code() == bgtq::errc::shape_mismatch);
    }
  }
}
