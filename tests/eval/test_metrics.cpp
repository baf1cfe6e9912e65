// compare_attention (bgtq eval's metrics) against a direct evaluation of its definitions:
// every (query head, query, key) triple in double, one query at a time. Awkward shapes:
// more queries than one 64-query block of scores (and not a multiple of it), a first
// query inside the sequence, GQA, K-only and K+V.
#include <bgtq/core/rng.hpp>
#include <bgtq/eval/metrics.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "common.hpp"

namespace {

std::vector<float> normal(std::size_t n, std::uint64_t seed, double scale) {
  bgtq::counter_rng r(seed);
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(scale * r.normal());
  return x;
}

// The definitions of metrics.hpp's header comment, written out.
bgtq::attention_metrics direct(const bgtq::layer_shape& sh, const std::vector<float>& q, const std::vector<float>& k,
                               const std::vector<float>& kh, const std::vector<float>* v, const std::vector<float>* vh,
                               int t_begin) {
  const int T = sh.tokens, Hq = sh.q_heads, Hkv = sh.kv_heads, D = sh.head_dim, G = Hq / Hkv;
  auto at = [&](const std::vector<float>& x, int heads, int t, int h, int j) {
    return static_cast<double>(x[(static_cast<std::size_t>(t) * heads + h) * D + j]);
  };
  auto softmax = [](std::vector<double> s) {
    const double m = *std::max_element(s.begin(), s.end());
    double z = 0;
    for (double& x : s) z += (x = std::exp(x - m));
    for (double& x : s) x /= z;
    return s;
  };
  auto top = [](const std::vector<double>& p, int m) {
    std::vector<int> i(p.size());
    std::iota(i.begin(), i.end(), 0);
    std::stable_sort(i.begin(), i.end(), [&](int a, int b) { return p[a] > p[b]; });
    i.resize(m);
    return i;
  };
  bgtq::attention_metrics r;
  double mae = 0, kl = 0, tops = 0, rel = 0;
  for (int g = 0; g < Hq; ++g) {
    const int h = g / G;
    for (int t = t_begin; t < T; ++t) {
      std::vector<double> s(t + 1), shat(t + 1);
      for (int u = 0; u <= t; ++u) {
        for (int j = 0; j < D; ++j) {
          s[u] += at(q, Hq, t, g, j) * at(k, Hkv, u, h, j);
          shat[u] += at(q, Hq, t, g, j) * at(kh, Hkv, u, h, j);
        }
        s[u] /= std::sqrt(static_cast<double>(D));
        shat[u] /= std::sqrt(static_cast<double>(D));
        mae += std::fabs(s[u] - shat[u]);
      }
      const auto p = softmax(s), ph = softmax(shat);
      double kli = 0;  // (the guard matters only where p_hat underflows: a case below has the exact value)
      for (int u = 0; u <= t; ++u)
        if (p[u] > 0) kli += p[u] * (std::log(p[u]) - std::log(std::max(ph[u], 1e-300)));
      kl += std::max(kli, 0.0);
      const int m = std::min(10, t + 1);
      const auto a = top(p, m), b = top(ph, m);
      int common = 0;
      for (int x : a) common += static_cast<int>(std::count(b.begin(), b.end(), x));
      tops += static_cast<double>(common) / m;
      if (v) {
        double num = 0, den = 0;
        for (int j = 0; j < D; ++j) {
          double o = 0, oh = 0;
          for (int u = 0; u <= t; ++u) {
            o += p[u] * at(*v, Hkv, u, h, j);
            oh += ph[u] * at(*vh, Hkv, u, h, j);
          }
          num += (o - oh) * (o - oh);
          den += o * o;
        }
        rel += std::sqrt(num / den);
      }
      r.pairs += t + 1;
      ++r.queries;
    }
  }
  r.logit_mae = mae / static_cast<double>(r.pairs);
  r.kl = kl / static_cast<double>(r.queries);
  r.top10 = tops / static_cast<double>(r.queries);
  if (v) r.out_rel_l2 = rel / static_cast<double>(r.queries);
  return r;
}

bool close(double a, double b) { return std::fabs(a - b) <= 1e-10 * std::max(1.0, std::fabs(b)); }

}  // namespace

TEST_CASE("compare_attention matches the direct definitions across score blocks, GQA, K-only and K+V", "[eval][metrics]") {
  struct shape_case {
    int T, Hq, Hkv, D, t_begin;
  };
  for (const shape_case c : {shape_case{150, 4, 2, 6, 0}, shape_case{150, 4, 2, 6, 37}, shape_case{64, 2, 1, 4, 0},
                             shape_case{65, 3, 3, 8, 1}, shape_case{9, 2, 1, 2, 8}}) {
    INFO("T=" << c.T << " Hq=" << c.Hq << " Hkv=" << c.Hkv << " D=" << c.D << " t_begin=" << c.t_begin);
    const bgtq::layer_shape sh{c.T, c.Hq, c.Hkv, c.D};
    const std::size_t nq = static_cast<std::size_t>(c.T) * c.Hq * c.D, nk = static_cast<std::size_t>(c.T) * c.Hkv * c.D;
    const auto q = normal(nq, 1, 1.0), k = normal(nk, 2, 1.0), v = normal(nk, 3, 1.0);
    // the "quantized" copies: the originals plus noise large enough to move the top-10 sets
    auto kh = k, vh = v;
    const auto nk1 = normal(nk, 4, 0.3), nv1 = normal(nk, 5, 0.3);
    for (std::size_t i = 0; i < nk; ++i) {
      kh[i] += nk1[i];
      vh[i] += nv1[i];
    }
    for (const bool with_v : {false, true}) {
      const auto got = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), with_v ? v.data() : nullptr,
                                               with_v ? vh.data() : nullptr, c.t_begin);
      const auto want = direct(sh, q, k, kh, with_v ? &v : nullptr, with_v ? &vh : nullptr, c.t_begin);
      CHECK(got.queries == want.queries);
      CHECK(got.pairs == want.pairs);
      CHECK(close(got.logit_mae, want.logit_mae));
      CHECK(close(got.kl, want.kl));
      CHECK(close(got.top10, want.top10));
      if (c.T - c.t_begin > 20) CHECK(want.top10 < 1.0);  // the noise changes some top-10 sets: the metric is exercised
      if (with_v)
        CHECK(close(got.out_rel_l2, want.out_rel_l2));
      else
        CHECK(std::isnan(got.out_rel_l2));
    }
  }
}

TEST_CASE("compare_attention of identical keys and values is exact: zero error, full overlap", "[eval][metrics]") {
  const bgtq::layer_shape sh{130, 2, 1, 4};
  const auto q = normal(130 * 2 * 4, 6, 1.0), k = normal(130 * 4, 7, 1.0), v = normal(130 * 4, 8, 1.0);
  const auto m = bgtq::compare_attention(sh, q.data(), k.data(), k.data(), v.data(), v.data(), 0);
  CHECK(m.logit_mae == 0.0);
  CHECK(m.kl == 0.0);
  CHECK(m.top10 == 1.0);
  CHECK(m.out_rel_l2 == 0.0);
  CHECK(m.queries == 2 * 130);
  CHECK(m.pairs == 2 * 130 * 131 / 2);
}

TEST_CASE("compare_attention: top-10 ties go to the earlier position, as in the definition", "[eval][metrics]") {
  // every key scores 0 for p (all tied: positions 0..9 are its top 10); k_hat lifts the
  // last key, so p_hat's top 10 is position 11 then 0..8: an overlap of 9 / 10
  const int T = 12;
  const bgtq::layer_shape sh{T, 1, 1, 1};
  std::vector<float> q(T, 1.0f), k(T, 0.0f), kh(T, 0.0f);
  kh[T - 1] = 0.5f;
  const auto m = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), nullptr, nullptr, T - 1);
  REQUIRE(m.queries == 1);
  CHECK(m.top10 == Approx(0.9).margin(1e-12));
  const auto want = direct(sh, q, k, kh, nullptr, nullptr, T - 1);
  CHECK(m.top10 == Approx(want.top10).margin(1e-12));
}

TEST_CASE("compare_attention: the KL of nearly equal keys keeps its relative accuracy", "[eval][metrics]") {
  // k_hat = k (1 + 1e-4 noise), about fp16's rounding: the KL is ~1e-9 per query, far below
  // the other metrics' absolute tolerance, so it is compared relatively here (both sides
  // round to ~1e-15 absolute per query)
  const bgtq::layer_shape sh{100, 2, 1, 16};
  const std::size_t nq = 100 * 2 * 16, nk = 100 * 16;
  const auto q = normal(nq, 9, 1.0), k = normal(nk, 10, 1.0), e = normal(nk, 11, 1e-4);
  auto kh = k;
  for (std::size_t i = 0; i < nk; ++i) kh[i] = static_cast<float>(k[i] * (1.0 + e[i]));
  const auto got = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), nullptr, nullptr, 3);
  const auto want = direct(sh, q, k, kh, nullptr, nullptr, 3);
  REQUIRE(want.kl > 1e-12);
  REQUIRE(want.kl < 1e-6);
  CHECK(got.kl == Approx(want.kl).epsilon(1e-6));
}

TEST_CASE("compare_attention: a key weight that underflows in p_hat still counts exactly in the KL", "[eval][metrics]") {
  // D = 1, q = 1: the last query scores the two keys 0, 0 exactly and 0, -800 with k_hat;
  // p = (1/2, 1/2), p_hat = (1, e^-800) (0 in double). KL = 1/2 log(1/2) + 1/2 (log(1/2)
  // + 800) = 400 - log 2, not a value capped by a guard on log(0)
  const bgtq::layer_shape sh{2, 1, 1, 1};
  const std::vector<float> q{1.0f, 1.0f}, k{0.0f, 0.0f}, kh{0.0f, -800.0f};
  const auto m = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), nullptr, nullptr, 1);
  REQUIRE(m.queries == 1);
  CHECK(m.kl == Approx(400.0 - std::log(2.0)).epsilon(1e-12));
  CHECK(m.logit_mae == Approx(400.0).epsilon(1e-12));  // |0 - 0| and |0 + 800| over two pairs
}
