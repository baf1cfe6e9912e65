#pragma once
//! @file eval/metrics.hpp
//! Attention-fidelity metrics of quantized keys (and values) against the originals, for
//! one layer. The evaluated queries t (every t in [t_begin, T), or chosen positions: see
//! spaced_queries) attend causally to keys s <= t; query head g reads KV head g / (Hq / Hkv).
//!
//! - logit MAE: mean over query heads and causal pairs of |q_t.k_s - q_t.k_hat_s| / sqrt(D)
//! - KL: mean over queries and heads of KL(p || p_hat), p = softmax(q.k / sqrt(D)) over s <= t
//! - top-10 overlap: |top10(p) and top10(p_hat)| / min(10, t+1), averaged
//! - output error (with values): mean over queries and heads of ||o - o_hat|| / ||o||,
//!   o = sum_s p_s v_s, o_hat = sum_s p_hat_s v_hat_s
//!
//! A cache holds some rows unquantized, in its fp16 window: the first `sink` tokens, the
//! last `recent`, and (a method that quantizes blocks of tokens, such as KIVI's keys with
//! per-channel statistics over 32) the block still filling. Pass a `held_window` and each
//! query reads those keys and values from its rows, as the cache would.

#include "../core/intrinsics.hpp"  // before Eigen, which includes <immintrin.h> too

#include <Eigen/Dense>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/thread_pool.hpp"

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

//! The rows a cache holds unquantized when a query attends (kv_cache's fp16 window, with
//! cache_config's sink and recent and the codec's encoding block): of the n = t + 1 keys
//! query t sees, the first min(n, sink) and those from sink + q(n - sink) on, where
//! q(m) = block * floor((m - recent) / block) for m >= recent, else 0, is how many the
//! cache has quantized (it encodes a block once `recent` tokens have arrived after it;
//! a block completed by token t is quantized when t attends). Those keys and values are
//! read from `k` and `v` instead of k_hat and v_hat. The default (no sink, no recent,
//! blocks of 1) holds nothing.
struct held_window {
  int sink = 0;              //!< first tokens held (cache_config::sink)
  int recent = 0;            //!< last tokens held (cache_config::recent)
  int block = 1;             //!< tokens per encoding block: 1 (TQ-MSE, Block-GTQ), 32 (KIVI)
  const float* k = nullptr;  //!< [T][Hkv][D] held keys, e.g. rounded to fp16
  const float* v = nullptr;  //!< [T][Hkv][D] held values, read when values are compared
  //! Whether any row is held.
  bool holds() const noexcept { return sink > 0 || recent > 0 || block > 1; }
  //! First key of the tail still held at n keys (the first min(n, sink) are held too).
  std::int64_t tail_from(std::int64_t n) const noexcept {
    const std::int64_t m = n - sink;
    if (m <= 0) return n;
    const std::int64_t quantized = m < recent ? 0 : (m - recent) / block * block;
    return sink + quantized;
  }
  //! How many of the n keys are held: min(n, sink) + n - tail_from(n) (tail_from(n) is n,
  //! or at least sink, so the two parts never overlap).
  std::int64_t count(std::int64_t n) const noexcept { return std::min<std::int64_t>(n, sink) + (n - tail_from(n)); }
};

//! Evenly spaced query positions for compare_attention: `count` of [t_begin, T) ending at
//! T - 1 (the longest context), t_i = t_begin + floor((i + 1) (T - t_begin) / count) - 1;
//! every position when count is 0 or at least T - t_begin.
//! @throws bgtq::error (invalid_argument) for t_begin outside [0, T) or a negative count
inline std::vector<int> spaced_queries(int T, int t_begin, int count = 0) {
  BGTQ_REQUIRE(t_begin >= 0 && t_begin < T, errc::invalid_argument,
               "spaced_queries: first query " + std::to_string(t_begin) + " outside [0, " + std::to_string(T) + ")");
  BGTQ_REQUIRE(count >= 0, errc::invalid_argument, "spaced_queries: count " + std::to_string(count) + " < 0");
  const std::int64_t M = T - t_begin;
  const std::int64_t n = count == 0 || count >= M ? M : count;
  std::vector<int> t(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = static_cast<int>(t_begin + (i + 1) * M / n - 1);
  return t;
}

//! Compares attention with keys `k` (and values `v`) against `k_hat` (and `v_hat`) for the
//! queries at the positions `queries` (strictly increasing, in [0, T)); each sees the keys
//! s <= t. v and v_hat may be null (K-only evaluation). With a pool, the query heads are
//! spread over its threads; the result does not depend on the pool (each head's sums are
//! formed by one thread, then added in head order).
//! `progress` (optional; a long dump takes minutes per layer): called with the fraction
//! of the causal (query, key, head) triples done, after blocks of 64 queries of one head,
//! from the pool's threads but never two calls at once (a block finishing while another
//! thread reports is not reported), and a last time with 1 from the calling thread.
//! `held` (optional): the rows the cache holds unquantized (see held_window).
//! @throws bgtq::error (shape_mismatch) for a bad shape, (invalid_argument) for an empty,
//!         unsorted or out-of-range query list, a negative sink or recent, a block below 1,
//!         or a window that holds rows without its key rows (or without value rows when
//!         values are compared)
inline attention_metrics compare_attention(const layer_shape& sh, const float* q, const float* k, const float* k_hat,
                                           const float* v, const float* v_hat, std::span<const int> queries,
                                           thread_pool* pool = nullptr, const std::function<void(double)>& progress = {},
                                           const held_window& held = {}) {
  const int T = sh.tokens, Hq = sh.q_heads, Hkv = sh.kv_heads, D = sh.head_dim;
  BGTQ_REQUIRE(T >= 1 && Hq >= 1 && Hkv >= 1 && D >= 1 && Hq % Hkv == 0, errc::shape_mismatch,
               "compare_attention: bad shape T=" + std::to_string(T) + " Hq=" + std::to_string(Hq) +
                   " Hkv=" + std::to_string(Hkv) + " D=" + std::to_string(D));
  BGTQ_REQUIRE(!queries.empty(), errc::invalid_argument, "compare_attention: no query to evaluate");
  for (std::size_t i = 0; i < queries.size(); ++i)
    BGTQ_REQUIRE(queries[i] >= 0 && queries[i] < T && (i == 0 || queries[i] > queries[i - 1]), errc::invalid_argument,
                 "compare_attention: query position " + std::to_string(queries[i]) + " (entry " + std::to_string(i) +
                     ") is outside [0, " + std::to_string(T) + ") or not above the one before");
  using mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  constexpr int query_block = 64;
  const int G = Hq / Hkv;
  const int nq = static_cast<int>(queries.size());
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(D));
  const bool with_v = v && v_hat;
  BGTQ_REQUIRE(held.sink >= 0 && held.recent >= 0 && held.block >= 1, errc::invalid_argument,
               "compare_attention: held window with sink " + std::to_string(held.sink) + ", recent " +
                   std::to_string(held.recent) + ", block " + std::to_string(held.block) +
                   " (sink and recent must be >= 0, block >= 1)");
  const bool holds = held.holds();
  BGTQ_REQUIRE(!holds || (held.k && (!with_v || held.v)), errc::invalid_argument,
               "compare_attention: a held window needs its key rows, and its value rows when values are compared");
  // calls f(s) for each key s < n that the cache holds unquantized at n keys (held.count(n) of them)
  auto for_each_held = [&](int n, auto&& f) {
    for (int s = 0, head = std::min(n, held.sink); s < head; ++s) f(s);
    for (int s = static_cast<int>(held.tail_from(n)); s < n; ++s) f(s);
  };
  auto gather = [&](const float* x, int heads, int h, int rows, auto&& row_of) {
    mat m(rows, D);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < D; ++j) m(r, j) = x[(static_cast<std::size_t>(row_of(r)) * heads + h) * D + j];
    return m;
  };
  struct block_sums {
    double mae = 0, kl = 0, top = 0, rel = 0;
    std::int64_t pairs = 0;
  };
  struct scratch {  // one per thread, allocated once at its largest
    mat S, Sh, Sf, O, Oh;  // Sf: scores against the held rows (a held window only)
    std::vector<int> idx, idx2;
    std::vector<double> dif;  // S - Sh of one query's row
  };
  const int nblocks = (nq + query_block - 1) / query_block;
  const int T1 = queries.back() + 1;  // keys past the last query are never seen
  const int bmax = std::min(query_block, nq);
  const int threads = pool ? pool->size() : 1;
  std::vector<scratch> work(static_cast<std::size_t>(threads));
  for (scratch& w : work) {
    w.S.resize(bmax, T1);
    w.Sh.resize(bmax, T1);
    if (holds) w.Sf.resize(bmax, T1);
    if (with_v) {
      w.O.resize(bmax, D);
      w.Oh.resize(bmax, D);
    }
    w.idx.resize(static_cast<std::size_t>(T1));
    w.idx2.resize(static_cast<std::size_t>(T1));
    w.dif.resize(static_cast<std::size_t>(T1));
  }
  // per (query head, block) sums, added in that order at the end: the same result on any pool
  std::vector<block_sums> sums(static_cast<std::size_t>(Hq) * static_cast<std::size_t>(nblocks));
  double total_pairs = 0;  // for `progress`
  for (const int t : queries) total_pairs += static_cast<double>(t + 1) * Hq;
  std::atomic<std::int64_t> pairs_done{0};
  std::mutex reporting;
  auto ident = [](int r) { return r; };
  for (int h = 0; h < Hkv; ++h) {
    const mat K = gather(k, Hkv, h, T1, ident), Kh = gather(k_hat, Hkv, h, T1, ident);
    mat V, Vh, Kf, Vf;  // Kf, Vf: the held rows
    if (with_v) {
      V = gather(v, Hkv, h, T1, ident);
      Vh = gather(v_hat, Hkv, h, T1, ident);
    }
    if (holds) {
      Kf = gather(held.k, Hkv, h, T1, ident);
      if (with_v) Vf = gather(held.v, Hkv, h, T1, ident);
    }
    std::vector<mat> Q;  // the G query heads of KV head h at the evaluated positions
    for (int g = h * G; g < (h + 1) * G; ++g)
      Q.push_back(gather(q, Hq, g, nq, [&](int r) { return queries[static_cast<std::size_t>(r)]; }));
    // one block of query_block queries of one query head: their scores against the keys
    // the block's last query sees (memory linear in T: a whole [Tq][T] pair of matrices
    // would be 2 * 8 * T^2 bytes, 17 GB at T = 32K); the longest blocks are handed out first
    auto one_block = [&](int task, int worker) {
      const int gi = task % G, blk = nblocks - 1 - task / G;
      scratch& w = work[static_cast<std::size_t>(worker)];
      block_sums& bs = sums[static_cast<std::size_t>(h * G + gi) * static_cast<std::size_t>(nblocks) + static_cast<std::size_t>(blk)];
      const int i0 = blk * query_block;
      const int rows = std::min(query_block, nq - i0);
      const int cols = queries[static_cast<std::size_t>(i0 + rows - 1)] + 1;
      const mat& Qg = Q[static_cast<std::size_t>(gi)];
      double mae = 0, kl = 0, top = 0, rel = 0;  // locals, not bs's fields: stores to those could alias the rows
      std::int64_t pairs = 0;
      w.S.topLeftCorner(rows, cols).noalias() = inv_sqrt_d * (Qg.middleRows(i0, rows) * K.topRows(cols).transpose());
      w.Sh.topLeftCorner(rows, cols).noalias() = inv_sqrt_d * (Qg.middleRows(i0, rows) * Kh.topRows(cols).transpose());
      // the held rows' scores by the same product, so that a held score is bit for bit what
      // a method storing that row (fp16) gets: a window covering every key gives fp16's logit
      // MAE, KL and top-10 exactly (the output error to rounding: held values enter as a
      // correction to the product below)
      if (holds) w.Sf.topLeftCorner(rows, cols).noalias() = inv_sqrt_d * (Qg.middleRows(i0, rows) * Kf.topRows(cols).transpose());
      for (int ib = 0; ib < rows; ++ib) {
        const int n = queries[static_cast<std::size_t>(i0 + ib)] + 1;  // keys s <= t
        if (holds) for_each_held(n, [&](int s) { w.Sh(ib, s) = w.Sf(ib, s); });
        double mx = -INFINITY, mxh = -INFINITY;
        for (int s = 0; s < n; ++s) {
          mae += std::fabs(w.dif[static_cast<std::size_t>(s)] = w.S(ib, s) - w.Sh(ib, s));
          mx = std::max(mx, w.S(ib, s));
          mxh = std::max(mxh, w.Sh(ib, s));
        }
        // the softmax weights replace this query's scores in its (contiguous) row, which
        // is then the row of the block's output product below
        double* p = &w.S(ib, 0);
        double* ph = &w.Sh(ib, 0);
        double z = 0, zh = 0, pd = 0;
        for (int s = 0; s < n; ++s) {
          // (S_s - mx) - (Sh_s - mxh) per key, before the weighting: the two shifted scores
          // are small where p_s matters, so the difference keeps its digits even when the
          // scores themselves are huge (subtracting mx - mxh from the weighted sum lost
          // everything below ~1e-16 of the largest score)
          const double lp = p[s] - mx, lph = ph[s] - mxh;
          z += (p[s] = std::exp(lp));
          zh += (ph[s] = std::exp(lph));
          pd += p[s] * (lp - lph);
        }
        // KL(p || p_hat) = sum_s p_s (log p_s - log p_hat_s), with log p_s = S_s - mx - log z
        // and log p_hat_s = Sh_s - mxh - log zh: sum_s p_s ((S_s - mx) - (Sh_s - mxh)) -
        // log(z / zh), no logarithm per key (and exact where p_hat_s underflows to 0)
        kl += std::max(pd / z - std::log(z / zh), 0.0);
        // top-10 overlap on the unnormalised weights (the same order as p / z)
        const int m = std::min(10, n);
        std::iota(w.idx.begin(), w.idx.begin() + n, 0);
        std::iota(w.idx2.begin(), w.idx2.begin() + n, 0);
        auto by = [](const double* x) { return [x](int a, int b) { return x[a] > x[b] || (x[a] == x[b] && a < b); }; };
        std::partial_sort(w.idx.begin(), w.idx.begin() + m, w.idx.begin() + n, by(p));
        std::partial_sort(w.idx2.begin(), w.idx2.begin() + m, w.idx2.begin() + n, by(ph));
        int common = 0;
        for (int a = 0; a < m; ++a)
          for (int b = 0; b < m; ++b) common += w.idx[static_cast<std::size_t>(a)] == w.idx2[static_cast<std::size_t>(b)];
        top += static_cast<double>(common) / m;
        // the block's outputs o = p^T V are one product: the weight rows, normalised, are
        // zero past the keys each query sees (a K-only run needs no normalised weights)
        if (with_v) {
          for (int s = 0; s < n; ++s) {
            p[s] /= z;
            ph[s] /= zh;
          }
          w.S.row(ib).segment(n, cols - n).setZero();
          w.Sh.row(ib).segment(n, cols - n).setZero();
        }
        pairs += n;
      }
      if (with_v) {
        w.O.topRows(rows).noalias() = w.S.topLeftCorner(rows, cols) * V.topRows(cols);
        w.Oh.topRows(rows).noalias() = w.Sh.topLeftCorner(rows, cols) * Vh.topRows(cols);
        if (holds)  // the held rows' weights were applied to v_hat's rows: swap those for the held ones
          for (int b = 0; b < rows; ++b)
            for_each_held(queries[static_cast<std::size_t>(i0 + b)] + 1,
                          [&](int s) { w.Oh.row(b) += w.Sh(b, s) * (Vf.row(s) - Vh.row(s)); });
        for (int b = 0; b < rows; ++b) {
          const double num = (w.O.row(b) - w.Oh.row(b)).squaredNorm(), den = w.O.row(b).squaredNorm();
          rel += den > 0 ? std::sqrt(num / den) : std::sqrt(num);
        }
      }
      bs = block_sums{mae, kl, top, rel, pairs};
      if (progress) {
        pairs_done.fetch_add(pairs);
        // the count read under the lock: successive reports never go back
        const std::unique_lock<std::mutex> one_at_a_time(reporting, std::try_to_lock);
        if (one_at_a_time.owns_lock()) progress(std::min(1.0, static_cast<double>(pairs_done.load()) / total_pairs));
      }
    };
    if (threads > 1)
      pool->run(G * nblocks, one_block);
    else
      for (int t = 0; t < G * nblocks; ++t) one_block(t, 0);
  }
  if (progress) progress(1.0);
  attention_metrics r;
  double mae = 0, kl = 0, top = 0, rel = 0;
  for (const block_sums& bs : sums) {
    mae += bs.mae;
    kl += bs.kl;
    top += bs.top;
    rel += bs.rel;
    r.pairs += bs.pairs;
  }
  r.queries = static_cast<std::int64_t>(nq) * Hq;
  r.logit_mae = mae / static_cast<double>(r.pairs);
  r.kl = kl / static_cast<double>(r.queries);
  r.top10 = top / static_cast<double>(r.queries);
  if (with_v) r.out_rel_l2 = rel / static_cast<double>(r.queries);
  return r;
}

//! compare_attention for every query t in [t_begin, T) (spaced_queries rejects a t_begin
//! outside [0, T)).
inline attention_metrics compare_attention(const layer_shape& sh, const float* q, const float* k, const float* k_hat,
                                           const float* v, const float* v_hat, int t_begin, thread_pool* pool = nullptr) {
  const std::vector<int> all = spaced_queries(sh.tokens, t_begin);
  return compare_attention(sh, q, k, k_hat, v, v_hat, std::span<const int>(all), pool);
}

}  // namespace bgtq
