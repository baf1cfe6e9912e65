#pragma once
// Summary statistics of one layer of Q/K/V activations, used by the synth tests and to
// compare synthetic with real data (docs/synth.md). Per KV head:
//   spread        max/min of the block energy scores (energy_estimator)
//   max_median    max/median of the scores
//   q_spread, k_spread   the same for the q and k parts alone
//   qk_log_corr   Pearson correlation over blocks of ln q_energy and ln k_energy
//   low_freq_share share of the total score in blocks i >= L/2 (low frequency)
//   k_outlier     max_d |mean_t k[d]| / rms of k (a large consistent channel mean)
//   attn_max      mean over query heads of the group and positions t >= 1 of the
//                 largest causal softmax probability, logits q.k / sqrt(D)
//   attn_uniform  the same mean of 1/(t+1): what uniform attention would give
//   logit_sd      mean over those queries of the sd of their causal logits (t >= 1)
//   v_channel_ratio max/min over channels of the rms of v; v_token_cv cv of ||v_t||
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include <bgtq/energy/energy.hpp>

namespace bgtq_test {

struct head_stats {
  double spread = 0, max_median = 0, q_spread = 0, k_spread = 0, qk_log_corr = 0, low_freq_share = 0;
  double k_outlier = 0, attn_max = 0, attn_uniform = 0, logit_sd = 0, v_channel_ratio = 0, v_token_cv = 0;
};

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline double max_over_min(const std::vector<double>& v) {
  const auto [mn, mx] = std::minmax_element(v.begin(), v.end());
  return *mx / *mn;
}

// q [T, Hq, D], k and v [T, Hkv, D] (v may be empty), one layer.
inline std::vector<head_stats> layer_stats(const float* q, const float* k, const float* v, std::size_t T, int hq, int hkv,
                                           const bgtq::rope_layout& rope, bool attention = true) {
  const int d = rope.head_dim, nb = rope.num_blocks(), group = hq / hkv;
  bgtq::energy_estimator est(1, hq, hkv, rope);
  est.add(0, q, k, T);
  std::vector<head_stats> out(static_cast<std::size_t>(hkv));
  for (int h = 0; h < hkv; ++h) {
    head_stats& s = out[static_cast<std::size_t>(h)];
    std::vector<double> sc(nb), qe(nb), ke(nb);
    double tot = 0, low = 0;
    for (int i = 0; i < nb; ++i) {
      sc[i] = est.score(0, h, i);
      qe[i] = est.q_energy(0, h, i);
      ke[i] = est.k_energy(0, h, i);
      tot += sc[i];
      if (i >= nb / 2) low += sc[i];
    }
    s.spread = max_over_min(sc);
    s.max_median = *std::max_element(sc.begin(), sc.end()) / median_of(sc);
    s.q_spread = max_over_min(qe);
    s.k_spread = max_over_min(ke);
    s.low_freq_share = low / tot;
    {
      double mx = 0, my = 0;
      for (int i = 0; i < nb; ++i) mx += std::log(qe[i]), my += std::log(ke[i]);
      mx /= nb, my /= nb;
      double sxy = 0, sxx = 0, syy = 0;
      for (int i = 0; i < nb; ++i) {
        const double a = std::log(qe[i]) - mx, b = std::log(ke[i]) - my;
        sxy += a * b, sxx += a * a, syy += b * b;
      }
      s.qk_log_corr = sxy / std::sqrt(sxx * syy);
    }
    {
      std::vector<double> mean(d, 0.0);
      double ss = 0;
      for (std::size_t t = 0; t < T; ++t)
        for (int j = 0; j < d; ++j) {
          const double x = k[(t * hkv + h) * d + j];
          mean[j] += x;
          ss += x * x;
        }
      double mm = 0;
      for (int j = 0; j < d; ++j) mm = std::max(mm, std::abs(mean[j]) / T);
      s.k_outlier = mm / std::sqrt(ss / (static_cast<double>(T) * d));
    }
    if (attention && T > 1) {
      double am = 0, au = 0, lsd = 0;
      std::size_t n = 0;
      std::vector<double> lg(T);
      for (int g = h * group; g < (h + 1) * group; ++g)
        for (std::size_t t = 1; t < T; ++t) {
          const float* qt = q + (t * hq + g) * d;
          double mx = -1e300, m1 = 0, m2 = 0;
          for (std::size_t u = 0; u <= t; ++u) {
            const float* ku = k + (u * hkv + h) * d;
            double dot = 0;
            for (int j = 0; j < d; ++j) dot += static_cast<double>(qt[j]) * ku[j];
            lg[u] = dot / std::sqrt(static_cast<double>(d));
            mx = std::max(mx, lg[u]);
            m1 += lg[u], m2 += lg[u] * lg[u];
          }
          double z = 0;
          for (std::size_t u = 0; u <= t; ++u) z += std::exp(lg[u] - mx);
          am += 1.0 / z;
          au += 1.0 / static_cast<double>(t + 1);
          m1 /= static_cast<double>(t + 1);
          lsd += std::sqrt(std::max(0.0, m2 / static_cast<double>(t + 1) - m1 * m1));
          ++n;
        }
      s.attn_max = am / n;
      s.attn_uniform = au / n;
      s.logit_sd = lsd / n;
    }
    if (v) {
      std::vector<double> ch(d, 0.0);
      double n1 = 0, n2 = 0;
      for (std::size_t t = 0; t < T; ++t) {
        double nn = 0;
        for (int j = 0; j < d; ++j) {
          const double x = v[(t * hkv + h) * d + j];
          ch[j] += x * x;
          nn += x * x;
        }
        n1 += std::sqrt(nn), n2 += nn;
      }
      s.v_channel_ratio = max_over_min(ch);
      s.v_channel_ratio = std::sqrt(s.v_channel_ratio);
      n1 /= T, n2 /= T;
      s.v_token_cv = std::sqrt(std::max(0.0, n2 - n1 * n1)) / n1;
    }
  }
  return out;
}

struct summary {
  double min = 0, median = 0, max = 0;
};

template <class F>
summary summarize(const std::vector<head_stats>& hs, F field) {
  std::vector<double> x;
  for (const auto& s : hs) x.push_back(field(s));
  return {*std::min_element(x.begin(), x.end()), median_of(x), *std::max_element(x.begin(), x.end())};
}

}  // namespace bgtq_test
