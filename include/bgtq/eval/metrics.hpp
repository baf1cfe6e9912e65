#pragma once
//! @file eval/metrics.hpp
//! Attention-fidelity metrics of quantized keys (and values) against the originals, for
//! one layer. Queries t in [t_begin, T) attend causally to keys s <= t; query head g
//! reads KV head g / (Hq / Hkv).
//!
//! - logit MAE: mean over query heads and causal pairs of |q_t.k_s - q_t.k_hat_s| / sqrt(D)
//! - KL: mean over queries and heads of KL(p || p_hat), p = softmax(q.k / sqrt(D)) over s <= t
//! - top-10 overlap: |top10(p) and top10(p_hat)| / min(10, t+1), averaged
//! - output error (with values): mean over queries and heads of ||o - o_hat|| / ||o||,
//!   o = sum_s p_s v_s, o_hat = sum_s p_hat_s v_hat_s

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "../core/error.hpp"

namespace bgtq {

//! Metrics of one layer (means over the evaluated queries and query heads).
struct attention_metrics {
  double logit_mae = 0.0;
  double kl = 0.0;
  double top10 = 0.0;
  double out_rel_l2 = std::numeric_limits<double>::quiet_NaN();  //!< NaN without values
  std::int64_t queries = 0;                                       //!< (query, head) pairs
  std::int64_t pairs = 0;                                         //!< causal (query, key, head) triples
};

//! Shape of one layer's activations (all arrays C order, [T][heads][D]).
struct layer_shape {
  int tokens = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
};

//! Compares attention with keys `k` (and values `v`) against `k_hat` (and `v_hat`).
//! v and v_hat may be null (K-only evaluation).
inline attention_metrics compare_attention(const layer_shape& sh, const float* q, const float* k, const float* k_hat,
                                           const float* v, const float* v_hat, int t_begin) {
  const int T = sh.tokens, Hq = sh.q_heads, Hkv = sh.kv_heads, D = sh.head_dim;
  BGTQ_REQUIRE(T >= 1 && Hq >= 1 && Hkv >= 1 && D >= 1 && Hq % Hkv == 0, errc::shape_mismatch,
               "compare_attention: bad shape T=" + std::to_string(T) + " Hq=" + std::to_string(Hq) +
                   " Hkv=" + std::to_string(Hkv) + " D=" + std::to_string(D));
  BGTQ_REQUIRE(t_begin >= 0 && t_begin < T, errc::invalid_argument,
               "compare_attention: first query " + std::to_string(t_begin) + " outside [0, " + std::to_string(T) + ")");
  using mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  constexpr int query_block = 64;
  const int G = Hq / Hkv;
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(D));
  auto gather = [&](const float* x, int heads, int h, int t0, int t1) {
    mat m(t1 - t0, D);
    for (int t = t0; t < t1; ++t)
      for (int j = 0; j < D; ++j) m(t - t0, j) = x[(static_cast<std::size_t>(t) * heads + h) * D + j];
    return m;
  };
  attention_metrics r;
  double mae = 0, kl = 0, top = 0, rel = 0;
  std::vector<int> idx(static_cast<std::size_t>(T)), idx2(static_cast<std::size_t>(T));
  std::vector<double> dif(static_cast<std::size_t>(T));  // S - Sh of one query's row
  mat S(std::min(query_block, T - t_begin), T), Sh(S.rows(), T), O(S.rows(), D), Oh(S.rows(), D);
  for (int h = 0; h < Hkv; ++h) {
    const mat K = gather(k, Hkv, h, 0, T), Kh = gather(k_hat, Hkv, h, 0, T);
    mat V, Vh;
    if (v && v_hat) {
      V = gather(v, Hkv, h, 0, T);
      Vh = gather(v_hat, Hkv, h, 0, T);
    }
    for (int g = h * G; g < (h + 1) * G; ++g) {
      const mat Q = gather(q, Hq, g, t_begin, T);
      // the scores of query_block queries at a time against the keys they see (causal):
      // memory linear in T (a whole [Tq][T] pair of matrices would be 2 * 8 * T^2 bytes,
      // 17 GB at T = 32K); the blocks are allocated once, at their largest
      for (int i = 0; i < T - t_begin; ++i) {
        const int t = t_begin + i;
        const int n = t + 1;
        const int ib = i % query_block;  // row of this query in the block
        const int rows = std::min(query_block, T - t_begin - (i - ib));  // queries in this block
        const int cols = t - ib + rows;  // keys [0, cols) cover the block's last query
        if (ib == 0) {
          S.topLeftCorner(rows, cols).noalias() = inv_sqrt_d * (Q.middleRows(i, rows) * K.topRows(cols).transpose());
          Sh.topLeftCorner(rows, cols).noalias() = inv_sqrt_d * (Q.middleRows(i, rows) * Kh.topRows(cols).transpose());
        }
        double mx = -INFINITY, mxh = -INFINITY;
        for (int s = 0; s < n; ++s) {
          mae += std::fabs(dif[static_cast<std::size_t>(s)] = S(ib, s) - Sh(ib, s));
          mx = std::max(mx, S(ib, s));
          mxh = std::max(mxh, Sh(ib, s));
        }
        // the softmax weights replace this query's scores in its (contiguous) row, which
        // is then the row of the block's output product below
        double* p = &S(ib, 0);
        double* ph = &Sh(ib, 0);
        double z = 0, zh = 0, pd = 0;
        for (int s = 0; s < n; ++s) {
          z += (p[s] = std::exp(p[s] - mx));
          zh += (ph[s] = std::exp(ph[s] - mxh));
          pd += p[s] * dif[static_cast<std::size_t>(s)];
        }
        // KL(p || p_hat) = sum_s p_s (log p_s - log p_hat_s), with log p_s = S_s - mx - log z
        // and log p_hat_s = Sh_s - mxh - log zh: sum_s p_s (S_s - Sh_s) - (mx - mxh) -
        // log(z / zh), no logarithm per key (and exact where p_hat_s underflows to 0)
        kl += std::max(pd / z - (mx - mxh) - std::log(z / zh), 0.0);
        for (int s = 0; s < n; ++s) {
          p[s] /= z;
          ph[s] /= zh;
        }
        const int m = std::min(10, n);
        std::iota(idx.begin(), idx.begin() + n, 0);
        std::iota(idx2.begin(), idx2.begin() + n, 0);
        auto by = [](const double* w) { return [w](int a, int b) { return w[a] > w[b] || (w[a] == w[b] && a < b); }; };
        std::partial_sort(idx.begin(), idx.begin() + m, idx.begin() + n, by(p));
        std::partial_sort(idx2.begin(), idx2.begin() + m, idx2.begin() + n, by(ph));
        int common = 0;
        for (int a = 0; a < m; ++a)
          for (int b = 0; b < m; ++b) common += idx[static_cast<std::size_t>(a)] == idx2[static_cast<std::size_t>(b)];
        top += static_cast<double>(common) / m;
        if (v && v_hat) {
          // the block's outputs o = p^T V as one product per block: the weight rows are
          // zero past the keys each query sees
          S.row(ib).segment(n, cols - n).setZero();
          Sh.row(ib).segment(n, cols - n).setZero();
          if (ib == rows - 1) {
            O.topRows(rows).noalias() = S.topLeftCorner(rows, cols) * V.topRows(cols);
            Oh.topRows(rows).noalias() = Sh.topLeftCorner(rows, cols) * Vh.topRows(cols);
            for (int b = 0; b < rows; ++b) {
              const double num = (O.row(b) - Oh.row(b)).squaredNorm(), den = O.row(b).squaredNorm();
              rel += den > 0 ? std::sqrt(num / den) : std::sqrt(num);
            }
          }
        }
        r.pairs += n;
        ++r.queries;
      }
    }
  }
  r.logit_mae = mae / static_cast<double>(r.pairs);
  r.kl = kl / static_cast<double>(r.queries);
  r.top10 = top / static_cast<double>(r.queries);
  if (v && v_hat) r.out_rel_l2 = rel / static_cast<double>(r.queries);
  return r;
}

}  // namespace bgtq
