#pragma once
//! @file synth/synth.hpp
//! Synthetic post-RoPE Q/K/V activations that look like real LLM attention inputs,
//! deterministic from a seed. The generative model (docs/synth.md has the rationale
//! and a comparison with a real Llama-2-7b layer):
//!
//! Per (layer l, KV head h), with L = D/2 blocks and u_i = i/(L-1) (u = 1 is the
//! lowest-frequency block: theta_i = base^(-2i/R) falls with i in both pairings, and
//! non-rotary blocks of a partial-rotary head come last):
//!  1. Block-score profile. Spread S ~ log-uniform[spread_min, spread_max]. Log profile
//!     p_i = trend_share*ln(S)*shape(u_i) + N(0, block_jitter^2), shape(u) = (u + 1-(1-u)^2)/2
//!     (rising, concave), plus n_o ~ U{outliers_min..outliers_max} (at most L/4)
//!     outlier blocks near the low-frequency end (u ~ N(0.8, 0.12^2) clipped to
//!     [0.5, 1]) lifted by (1-trend_share)*ln(S)*c, c = 1 for the first and
//!     U[0.4, 1] for the others. p is then mapped affinely onto [0, ln S], so the
//!     expected scores s_i = A*exp(p_i) have max/min = S exactly.
//!  2. Query/key split. Per block, key energy e_k(i) and per query head g energy
//!     e_q(g,i) start as s_i*exp(+d_i) and s_i*exp(-d_i + e_gi/2), d, e ~ N(0, qk_jitter^2),
//!     then every block is rescaled (q and k alike) so that 1/2 mean_g e_q + 1/2 e_k =
//!     A s_i, with E||q||^2 / E||k||^2 = query_key_energy (per KV head group) and
//!     E||k||^2 = D * key_rms^2. So the estimator's score converges to
//!     `synth_data::expected_scores`.
//!  3. Pre-RoPE vectors, block i (dims `rope.block_dims(i)`):
//!        k_t(i)   = m(i)   + sk(i)   * (sqrt(rho) W_i a_t    + sqrt(1-rho) z)
//!        q_g,t(i) = n_g(i) + sq_g(i) * (sqrt(rho) W_i b_g,t  + sqrt(1-rho) z')
//!     m, n: fixed per-head mean vectors (random angle) carrying a share c of the
//!     block's energy: c ~ U[0, base_coherence_max] in ordinary blocks and
//!     outlier_coherence +- 0.05 in outlier blocks (the large, consistent outlier
//!     channels of real keys and queries). W_i: 2 x r with orthonormal rows, shared by
//!     the key head and its GQA query heads (the "shared per-head directions": q.k has
//!     a low-rank structure, so attention is peaky). a_t = sal_t * N(0, I_r) with a
//!     per-token salience sal_t = exp(salience_sigma*N - salience_sigma^2) (E sal^2 = 1),
//!     b ~ N(0, I_r), z, z' ~ N(0, I_2); sk, sq set the remaining energy
//!     ((1-c) e / 2 per coordinate). rho = qk_coupling, r = latent_rank (0: max(2, D/8)).
//!  4. RoPE at position t (t = 0..T-1) with `apply_rope`.
//!  5. Values (no RoPE): v_t[d] = value_rms * nu_t * c_d * N(0,1), channel scales c_d
//!     log-uniform over a range of ratio value_channel_spread (normalised to mean
//!     c^2 = 1), per-token lognormal nu_t with coefficient of variation value_token_cv.
//!
//! Randomness: counter_rng only. Head parameters use seed mix_seed(mix_seed(seed, l), h)
//! stream 0; token t uses stream 1 + t, so T tokens are a prefix of T' > T tokens with
//! otherwise equal settings. The same config gives identical bytes on one platform;
//! across C libraries exp/log/cos/sin may differ in the last bit.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/rng.hpp"
#include "../rope/layout.hpp"

namespace bgtq {

//! Largest output `generate_synth` accepts: q, k and v together, as float32.
inline constexpr std::uint64_t synth_max_bytes = 4ull << 30;

//! Settings of the synthetic activation model (see the file comment for the model).
//! Defaults are calibrated against a real Llama-2-7b layer (docs/synth.md).
struct synth_config {
  int layers = 4;                               //!< L >= 1
  int tokens = 512;                             //!< T >= 1 (positions 0..T-1)
  int q_heads = 32;                             //!< Hq, a multiple of kv_heads
  int kv_heads = 8;                             //!< Hkv >= 1
  rope_layout rope{128, rope_pairing::half};    //!< head_dim, pairing, rotary_dim, base
  std::uint64_t seed = 1;                       //!< everything is a function of this
  // block-energy profile
  double spread_min = 10.0;                     //!< per-head max/min expected block score: lower end (>= 1)
  double spread_max = 1000.0;                   //!< upper end (>= spread_min); drawn log-uniform
  double trend_share = 0.45;                    //!< share of ln(spread) in the smooth trend (rest: outlier blocks), [0, 1]
  double block_jitter = 0.3;                    //!< sd of ln(block energy) around the trend, [0, 5]
  double qk_jitter = 0.2;                       //!< sd of ln(q/k energy ratio) per block, [0, 5]
  int outliers_min = 1;                         //!< outlier blocks per KV head, lower end (>= 0)
  int outliers_max = 4;                         //!< upper end (>= outliers_min); capped at D/8
  double outlier_coherence = 0.9;               //!< share of an outlier block's energy in its fixed mean, [0, 0.99]
  double base_coherence_max = 0.35;             //!< other blocks: share ~ U[0, this], [0, 0.99]
  // magnitudes
  double key_rms = 1.45;                        //!< E||k||^2 = D * key_rms^2
  double query_key_energy = 0.7;                //!< E||q||^2 / E||k||^2
  // attention structure
  double qk_coupling = 0.5;                     //!< rho: share of non-mean variance in the shared latent, [0, 1]
  int latent_rank = 0;                          //!< r >= 2, or 0 for max(2, D/8)
  double salience_sigma = 0.5;                  //!< lognormal sd of the per-token key latent scale, [0, 3]
  // values
  double value_rms = 0.35;                      //!< per-coordinate rms of V
  double value_channel_spread = 2.0;            //!< max/min of V channel scales, [1, 100]
  double value_token_cv = 0.2;                  //!< coefficient of variation of V token norms, [0, 5]

  //! Number of float32 values in q, k and v together.
  double total_values() const noexcept {
    return static_cast<double>(layers) * tokens * rope.head_dim * (static_cast<double>(q_heads) + 2.0 * kv_heads);
  }
  //! The latent rank actually used.
  int effective_latent_rank() const noexcept { return latent_rank > 0 ? latent_rank : std::max(2, rope.head_dim / 8); }

  //! Checks every field; throws bgtq::error(invalid_argument) naming the field and value,
  //! including outputs above `synth_max_bytes`.
  void validate() const {
    auto req = [](bool ok, const std::string& what) { BGTQ_REQUIRE(ok, errc::invalid_argument, "synth_config: " + what); };
    auto num = [](double x) {
      char b[32];
      std::snprintf(b, sizeof b, "%g", x);
      return std::string(b);
    };
    auto gib = [](double bytes) {
      char b[32];
      std::snprintf(b, sizeof b, "%.1f", bytes / (1u << 30));
      return std::string(b);
    };
    req(layers >= 1, "layers must be >= 1, got " + std::to_string(layers));
    req(tokens >= 1, "tokens must be >= 1, got " + std::to_string(tokens));
    req(kv_heads >= 1, "kv_heads must be >= 1, got " + std::to_string(kv_heads));
    req(q_heads >= 1 && q_heads % kv_heads == 0,
        "q_heads must be a positive multiple of kv_heads=" + std::to_string(kv_heads) + ", got " + std::to_string(q_heads));
    rope.validate();
    req(std::isfinite(spread_min) && spread_min >= 1.0 && spread_min <= 1e12, "spread_min must be in [1, 1e12], got " + num(spread_min));
    req(std::isfinite(spread_max) && spread_max >= spread_min && spread_max <= 1e12,
        "spread_max must be in [spread_min, 1e12], got " + num(spread_max));
    req(trend_share >= 0.0 && trend_share <= 1.0, "trend_share must be in [0, 1], got " + num(trend_share));
    req(block_jitter >= 0.0 && block_jitter <= 5.0, "block_jitter must be in [0, 5], got " + num(block_jitter));
    req(qk_jitter >= 0.0 && qk_jitter <= 5.0, "qk_jitter must be in [0, 5], got " + num(qk_jitter));
    req(outliers_min >= 0 && outliers_max >= outliers_min && outliers_max <= 100000,
        "outliers must satisfy 0 <= outliers_min <= outliers_max, got " + std::to_string(outliers_min) + ".." +
            std::to_string(outliers_max));
    req(outlier_coherence >= 0.0 && outlier_coherence <= 0.99, "outlier_coherence must be in [0, 0.99], got " + num(outlier_coherence));
    req(base_coherence_max >= 0.0 && base_coherence_max <= 0.99,
        "base_coherence_max must be in [0, 0.99], got " + num(base_coherence_max));
    req(std::isfinite(key_rms) && key_rms > 0.0 && key_rms <= 1e6, "key_rms must be in (0, 1e6], got " + num(key_rms));
    req(std::isfinite(query_key_energy) && query_key_energy > 0.0 && query_key_energy <= 1e6,
        "query_key_energy must be in (0, 1e6], got " + num(query_key_energy));
    req(qk_coupling >= 0.0 && qk_coupling <= 1.0, "qk_coupling must be in [0, 1], got " + num(qk_coupling));
    req(latent_rank == 0 || (latent_rank >= 2 && latent_rank <= 4096),
        "latent_rank must be 0 (auto) or in [2, 4096], got " + std::to_string(latent_rank));
    req(salience_sigma >= 0.0 && salience_sigma <= 3.0, "salience_sigma must be in [0, 3], got " + num(salience_sigma));
    req(std::isfinite(value_rms) && value_rms > 0.0 && value_rms <= 1e6, "value_rms must be in (0, 1e6], got " + num(value_rms));
    req(value_channel_spread >= 1.0 && value_channel_spread <= 100.0,
        "value_channel_spread must be in [1, 100], got " + num(value_channel_spread));
    req(value_token_cv >= 0.0 && value_token_cv <= 5.0, "value_token_cv must be in [0, 5], got " + num(value_token_cv));
    const double bytes = 4.0 * total_values();
    req(bytes <= static_cast<double>(synth_max_bytes),
        "output of " + std::to_string(layers) + " layers x " + std::to_string(tokens) + " tokens x (" +
            std::to_string(q_heads) + " + 2*" + std::to_string(kv_heads) + ") heads x " + std::to_string(rope.head_dim) +
            " dims = " + gib(bytes) + " GiB exceeds the 4 GiB limit");
  }

  friend bool operator==(const synth_config&, const synth_config&) = default;
};

//! Generated activations plus the model's ground truth.
struct synth_data {
  synth_config cfg;              //!< the settings that produced this
  std::vector<float> q;          //!< [L][T][Hq][D], C order, post-RoPE
  std::vector<float> k;          //!< [L][T][Hkv][D], C order, post-RoPE
  std::vector<float> v;          //!< [L][T][Hkv][D], C order (no RoPE)
  //! [L][Hkv][D/2]: the expected energy score of each block (what
  //! energy_estimator::scores converges to as T grows); max/min per head is the drawn spread.
  std::vector<double> expected_scores;
  //! [L][Hkv][D/2]: 1 for the outlier blocks (large fixed mean), else 0.
  std::vector<std::uint8_t> outlier_blocks;
};

namespace detail {

//! Parameters of one (layer, KV head) of the synthetic model.
struct synth_head_params {
  std::vector<double> expected;          // [nb] A*s_i
  std::vector<std::uint8_t> outlier;     // [nb]
  std::vector<double> k_mean, k_sd;      // [nb][2] mean per dim of the block / [nb] sd per coordinate
  std::vector<double> q_mean, q_sd;      // [group][nb][2] / [group][nb]
  std::vector<double> w;                 // [nb][2][r] orthonormal rows
  std::vector<double> v_scale;           // [D] value_rms * c_d
};

inline double synth_shape(double u) { return 0.5 * (u + 1.0 - (1.0 - u) * (1.0 - u)); }

inline synth_head_params synth_make_head(const synth_config& c, std::uint64_t head_seed) {
  const int nb = c.rope.num_blocks();
  const int d = c.rope.head_dim;
  const int group = c.q_heads / c.kv_heads;
  const int r = c.effective_latent_rank();
  counter_rng rng(head_seed, 0);
  auto unif = [&rng] { return rng.uniform(); };
  auto norm = [&rng] { return rng.normal(); };

  synth_head_params p;
  // 1. profile in log space
  const double log_s = std::log(c.spread_min) + unif() * (std::log(c.spread_max) - std::log(c.spread_min));
  std::vector<double> lp(static_cast<std::size_t>(nb));
  auto u_of = [nb](int i) { return nb > 1 ? static_cast<double>(i) / (nb - 1) : 1.0; };
  for (int i = 0; i < nb; ++i) lp[static_cast<std::size_t>(i)] = c.trend_share * log_s * synth_shape(u_of(i)) + c.block_jitter * norm();
  p.outlier.assign(static_cast<std::size_t>(nb), 0);
  int n_out = c.outliers_min + static_cast<int>(rng.below(static_cast<std::uint32_t>(c.outliers_max - c.outliers_min + 1)));
  n_out = std::min(n_out, nb / 4);
  for (int j = 0; j < n_out; ++j) {
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const double u = std::clamp(0.8 + 0.12 * norm(), 0.5, 1.0);
      const int i = static_cast<int>(std::lround(u * (nb - 1)));
      if (p.outlier[static_cast<std::size_t>(i)]) continue;
      p.outlier[static_cast<std::size_t>(i)] = 1;
      const double lift = j == 0 ? 1.0 : 0.4 + 0.6 * unif();
      lp[static_cast<std::size_t>(i)] += (1.0 - c.trend_share) * log_s * lift;
      break;
    }
  }
  const auto [mn, mx] = std::minmax_element(lp.begin(), lp.end());
  const double lo = *mn, range = *mx - *mn;
  std::vector<double> s(static_cast<std::size_t>(nb));
  for (int i = 0; i < nb; ++i) {
    const double x = range > 0.0 ? (lp[static_cast<std::size_t>(i)] - lo) * (log_s / range) : 0.0;
    s[static_cast<std::size_t>(i)] = std::exp(x);
  }

  // 2. query/key split
  std::vector<double> kr(static_cast<std::size_t>(nb)), qr(static_cast<std::size_t>(group) * nb), qm(static_cast<std::size_t>(nb));
  for (int i = 0; i < nb; ++i) {
    const double delta = c.qk_jitter * norm();
    kr[static_cast<std::size_t>(i)] = s[static_cast<std::size_t>(i)] * std::exp(delta);
    double acc = 0.0;
    for (int g = 0; g < group; ++g) {
      const double e = s[static_cast<std::size_t>(i)] * std::exp(-delta + 0.5 * c.qk_jitter * norm());
      qr[static_cast<std::size_t>(g) * nb + i] = e;
      acc += e;
    }
    qm[static_cast<std::size_t>(i)] = acc / group;
  }
  // f_i(lambda) = s_i / (lambda Q_i / 2 + K_i / 2); ratio(lambda) = lambda sum f Q / sum f K rises with lambda
  auto ratio = [&](double lambda) {
    double num = 0.0, den = 0.0;
    for (int i = 0; i < nb; ++i) {
      const auto u = static_cast<std::size_t>(i);
      const double f = s[u] / (0.5 * lambda * qm[u] + 0.5 * kr[u]);
      num += lambda * f * qm[u];
      den += f * kr[u];
    }
    return num / den;
  };
  double llo = -60.0, lhi = 60.0;
  for (int it = 0; it < 200; ++it) {
    const double mid = 0.5 * (llo + lhi);
    (ratio(std::exp(mid)) < c.query_key_energy ? llo : lhi) = mid;
  }
  const double lambda = std::exp(0.5 * (llo + lhi));
  std::vector<double> f(static_cast<std::size_t>(nb));
  double ksum = 0.0;
  for (int i = 0; i < nb; ++i) {
    const auto u = static_cast<std::size_t>(i);
    f[u] = s[u] / (0.5 * lambda * qm[u] + 0.5 * kr[u]);
    ksum += f[u] * kr[u];
  }
  const double amp = d * c.key_rms * c.key_rms / ksum;
  p.expected.resize(static_cast<std::size_t>(nb));
  for (int i = 0; i < nb; ++i) p.expected[static_cast<std::size_t>(i)] = amp * s[static_cast<std::size_t>(i)];

  // 3. means and fluctuation scales
  auto coherence = [&](int i) {
    return p.outlier[static_cast<std::size_t>(i)] ? std::clamp(c.outlier_coherence + 0.05 * (2.0 * unif() - 1.0), 0.0, 0.99)
                                                  : c.base_coherence_max * unif();
  };
  constexpr double two_pi = 6.283185307179586;
  p.k_mean.resize(static_cast<std::size_t>(nb) * 2);
  p.k_sd.resize(static_cast<std::size_t>(nb));
  for (int i = 0; i < nb; ++i) {
    const auto u = static_cast<std::size_t>(i);
    const double e = amp * f[u] * kr[u];
    const double coh = coherence(i);
    const double phi = two_pi * unif();
    const double m = std::sqrt(coh * e);
    p.k_mean[2 * u] = m * std::cos(phi);
    p.k_mean[2 * u + 1] = m * std::sin(phi);
    p.k_sd[u] = std::sqrt(0.5 * (1.0 - coh) * e);
  }
  p.q_mean.resize(static_cast<std::size_t>(group) * nb * 2);
  p.q_sd.resize(static_cast<std::size_t>(group) * nb);
  for (int g = 0; g < group; ++g)
    for (int i = 0; i < nb; ++i) {
      const std::size_t u = static_cast<std::size_t>(g) * nb + i;
      const double e = amp * f[static_cast<std::size_t>(i)] * lambda * qr[u];
      const double coh = coherence(i);
      const double phi = two_pi * unif();
      const double m = std::sqrt(coh * e);
      p.q_mean[2 * u] = m * std::cos(phi);
      p.q_mean[2 * u + 1] = m * std::sin(phi);
      p.q_sd[u] = std::sqrt(0.5 * (1.0 - coh) * e);
    }
  // shared latent directions: per block two orthonormal rows in R^r (Gram-Schmidt)
  p.w.resize(static_cast<std::size_t>(nb) * 2 * r);
  for (int i = 0; i < nb; ++i) {
    double* a = p.w.data() + static_cast<std::size_t>(i) * 2 * r;
    double* b = a + r;
    for (;;) {
      double na = 0.0, ab = 0.0, nbb = 0.0;
      for (int j = 0; j < r; ++j) {
        a[j] = norm();
        na += a[j] * a[j];
      }
      for (int j = 0; j < r; ++j) b[j] = norm();
      if (na < 1e-12) continue;
      for (int j = 0; j < r; ++j) a[j] /= std::sqrt(na);
      for (int j = 0; j < r; ++j) ab += a[j] * b[j];
      for (int j = 0; j < r; ++j) {
        b[j] -= ab * a[j];
        nbb += b[j] * b[j];
      }
      if (nbb < 1e-12) continue;
      for (int j = 0; j < r; ++j) b[j] /= std::sqrt(nbb);
      break;
    }
  }
  // values: channel scales log-uniform over ln(spread), normalised to mean square 1
  p.v_scale.resize(static_cast<std::size_t>(d));
  double ms = 0.0;
  for (int j = 0; j < d; ++j) {
    const double x = std::exp((unif() - 0.5) * std::log(c.value_channel_spread));
    p.v_scale[static_cast<std::size_t>(j)] = x;
    ms += x * x;
  }
  for (int j = 0; j < d; ++j) p.v_scale[static_cast<std::size_t>(j)] *= c.value_rms / std::sqrt(ms / d);
  return p;
}

}  // namespace detail

//! Generates synthetic post-RoPE Q/K and V for `c` (model in the file comment).
//! Cost: O(L * T * (Hq + 2 Hkv) * D); memory: the output (at most 4 GiB).
//! @throws bgtq::error(invalid_argument) from `c.validate()`
inline synth_data generate_synth(const synth_config& c) {
  c.validate();
  const int nb = c.rope.num_blocks();
  const int d = c.rope.head_dim;
  const int group = c.q_heads / c.kv_heads;
  const int r = c.effective_latent_rank();
  const auto T = static_cast<std::size_t>(c.tokens);
  synth_data out;
  out.cfg = c;
  out.q.resize(static_cast<std::size_t>(c.layers) * T * c.q_heads * d);
  out.k.resize(static_cast<std::size_t>(c.layers) * T * c.kv_heads * d);
  out.v.resize(out.k.size());
  out.expected_scores.resize(static_cast<std::size_t>(c.layers) * c.kv_heads * nb);
  out.outlier_blocks.resize(out.expected_scores.size());

  const double rho = c.qk_coupling, sr = std::sqrt(rho), sn = std::sqrt(1.0 - rho);
  const double ss = c.salience_sigma;
  const double tok_sigma = std::sqrt(std::log1p(c.value_token_cv * c.value_token_cv));
  std::vector<double> lat(static_cast<std::size_t>(r));
  std::vector<float> x(static_cast<std::size_t>(d));

  // Draws one block-structured vector: x(i) = mean(i) + sd(i) * (sr * W_i lat + sn * z).
  auto draw = [&](counter_rng& rng, const detail::synth_head_params& p, const double* mean, const double* sd, long pos,
                  float* dst) {
    for (int i = 0; i < nb; ++i) {
      const double* w0 = p.w.data() + static_cast<std::size_t>(i) * 2 * r;
      const double* w1 = w0 + r;
      double l0 = 0.0, l1 = 0.0;
      for (int j = 0; j < r; ++j) {
        l0 += w0[j] * lat[static_cast<std::size_t>(j)];
        l1 += w1[j] * lat[static_cast<std::size_t>(j)];
      }
      const double z0 = rng.normal(), z1 = rng.normal();
      const auto dd = c.rope.block_dims(i);
      x[static_cast<std::size_t>(dd[0])] = static_cast<float>(mean[2 * i] + sd[i] * (sr * l0 + sn * z0));
      x[static_cast<std::size_t>(dd[1])] = static_cast<float>(mean[2 * i + 1] + sd[i] * (sr * l1 + sn * z1));
    }
    apply_rope(c.rope, x.data(), pos);
    std::copy(x.begin(), x.end(), dst);
  };

  for (int l = 0; l < c.layers; ++l) {
    for (int h = 0; h < c.kv_heads; ++h) {
      const std::uint64_t head_seed = mix_seed(mix_seed(c.seed, static_cast<std::uint64_t>(l)), static_cast<std::uint64_t>(h));
      const detail::synth_head_params p = detail::synth_make_head(c, head_seed);
      const std::size_t so = (static_cast<std::size_t>(l) * c.kv_heads + h) * nb;
      std::copy(p.expected.begin(), p.expected.end(), out.expected_scores.begin() + static_cast<std::ptrdiff_t>(so));
      std::copy(p.outlier.begin(), p.outlier.end(), out.outlier_blocks.begin() + static_cast<std::ptrdiff_t>(so));
      for (std::size_t t = 0; t < T; ++t) {
        counter_rng rng(head_seed, 1 + static_cast<std::uint64_t>(t));
        const long pos = static_cast<long>(t);
        // key: salient latent
        const double sal = std::exp(ss * rng.normal() - ss * ss);
        for (int j = 0; j < r; ++j) lat[static_cast<std::size_t>(j)] = sal * rng.normal();
        const std::size_t kv_off = ((static_cast<std::size_t>(l) * T + t) * c.kv_heads + h) * d;
        draw(rng, p, p.k_mean.data(), p.k_sd.data(), pos, out.k.data() + kv_off);
        // queries of the group
        for (int g = 0; g < group; ++g) {
          for (int j = 0; j < r; ++j) lat[static_cast<std::size_t>(j)] = rng.normal();
          const std::size_t qh = static_cast<std::size_t>(h) * group + g;
          const std::size_t q_off = ((static_cast<std::size_t>(l) * T + t) * c.q_heads + qh) * d;
          const std::size_t pu = static_cast<std::size_t>(g) * nb;
          draw(rng, p, p.q_mean.data() + 2 * pu, p.q_sd.data() + pu, pos, out.q.data() + q_off);
        }
        // value
        const double nu = std::exp(tok_sigma * rng.normal() - tok_sigma * tok_sigma);  // E nu^2 = 1
        float* vd = out.v.data() + kv_off;
        for (int j = 0; j < d; ++j) vd[j] = static_cast<float>(nu * p.v_scale[static_cast<std::size_t>(j)] * rng.normal());
      }
    }
  }
  return out;
}

}  // namespace bgtq
