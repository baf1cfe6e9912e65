#include <catch2/catch.hpp>

#include <bgtq/core/half.hpp>
#include <bgtq/energy/energy.hpp>
#include <bgtq/synth/synth.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "activation_stats.hpp"
#include "common.hpp"

namespace {

using bgtq::rope_layout;
using bgtq::rope_pairing;
using bgtq::synth_config;

synth_config small_config(rope_pairing p = rope_pairing::half, int d = 64, int tokens = 512) {
  synth_config c;
  c.layers = 2;
  c.tokens = tokens;
  c.q_heads = 8;
  c.kv_heads = 4;
  c.rope = rope_layout(d, p);
  c.seed = 7;
  return c;
}

// Per-layer pointers into synth_data.
const float* q_layer(const bgtq::synth_data& s, int l) {
  return s.q.data() + static_cast<std::size_t>(l) * s.cfg.tokens * s.cfg.q_heads * s.cfg.rope.head_dim;
}
const float* kv_layer(const std::vector<float>& x, const bgtq::synth_data& s, int l) {
  return x.data() + static_cast<std::size_t>(l) * s.cfg.tokens * s.cfg.kv_heads * s.cfg.rope.head_dim;
}

bgtq::energy_estimator estimate(const bgtq::synth_data& s) {
  const auto& c = s.cfg;
  bgtq::energy_estimator est(c.layers, c.q_heads, c.kv_heads, c.rope);
  for (int l = 0; l < c.layers; ++l) est.add(l, q_layer(s, l), kv_layer(s.k, s, l), static_cast<std::size_t>(c.tokens));
  return est;
}

// Minimal reader for the real data files: little-endian fp16, C order, 3-D.
std::vector<float> read_f16_npy(const std::string& path, std::size_t expect_values) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> b((std::istreambuf_iterator<char>(f)), {});
  REQUIRE(b.size() > 10);
  REQUIRE(std::memcmp(b.data(), "\x93NUMPY", 6) == 0);
  std::uint16_t hl;
  std::memcpy(&hl, b.data() + 8, 2);
  const std::string header(b.data() + 10, hl);
  REQUIRE(header.find("'<f2'") != std::string::npos);
  const std::size_t off = 10 + hl;
  REQUIRE((b.size() - off) == 2 * expect_values);
  std::vector<float> out(expect_values);
  for (std::size_t j = 0; j < expect_values; ++j) {
    std::uint16_t h;
    std::memcpy(&h, b.data() + off + 2 * j, 2);
    out[j] = bgtq::half_bits_to_float(h);
  }
  return out;
}

}  // namespace

TEST_CASE("synth is deterministic, seed-dependent and prefix-stable", "[energy][synth]") {
  synth_config c = small_config(rope_pairing::interleaved, 16, 40);
  const auto a = bgtq::generate_synth(c);
  const auto b = bgtq::generate_synth(c);
  REQUIRE(a.q.size() == b.q.size());
  REQUIRE(std::memcmp(a.q.data(), b.q.data(), a.q.size() * sizeof(float)) == 0);
  REQUIRE(std::memcmp(a.k.data(), b.k.data(), a.k.size() * sizeof(float)) == 0);
  REQUIRE(std::memcmp(a.v.data(), b.v.data(), a.v.size() * sizeof(float)) == 0);
  REQUIRE(a.expected_scores == b.expected_scores);

  c.seed = 8;
  const auto d = bgtq::generate_synth(c);
  std::size_t same_q = 0, same_k = 0, same_v = 0;
  for (std::size_t j = 0; j < a.q.size(); ++j) same_q += a.q[j] == d.q[j];
  for (std::size_t j = 0; j < a.k.size(); ++j) same_k += a.k[j] == d.k[j], same_v += a.v[j] == d.v[j];
  REQUIRE(same_q < a.q.size() / 100);
  REQUIRE(same_k < a.k.size() / 100);
  REQUIRE(same_v < a.v.size() / 100);
  REQUIRE(a.expected_scores != d.expected_scores);

  // T tokens are a prefix of T' > T tokens
  c.seed = 7;
  c.tokens = 57;
  const auto longer = bgtq::generate_synth(c);
  const int dd = c.rope.head_dim;
  for (int l = 0; l < c.layers; ++l) {
    REQUIRE(std::memcmp(q_layer(a, l), q_layer(longer, l), 40u * c.q_heads * dd * sizeof(float)) == 0);
    REQUIRE(std::memcmp(kv_layer(a.k, a, l), kv_layer(longer.k, longer, l), 40u * c.kv_heads * dd * sizeof(float)) == 0);
    REQUIRE(std::memcmp(kv_layer(a.v, a, l), kv_layer(longer.v, longer, l), 40u * c.kv_heads * dd * sizeof(float)) == 0);
  }
}

TEST_CASE("synth shapes and validation", "[energy][synth]") {
  synth_config c = small_config(rope_pairing::half, 10, 9);
  c.layers = 3;
  c.q_heads = 6;
  c.kv_heads = 2;
  const auto s = bgtq::generate_synth(c);
  REQUIRE(s.cfg == c);
  REQUIRE(s.q.size() == 3u * 9 * 6 * 10);
  REQUIRE(s.k.size() == 3u * 9 * 2 * 10);
  REQUIRE(s.v.size() == s.k.size());
  REQUIRE(s.expected_scores.size() == 3u * 2 * 5);
  REQUIRE(s.outlier_blocks.size() == s.expected_scores.size());
  for (float x : s.q) REQUIRE(std::isfinite(x));

  // D = 2: one block, spread 1; partial rotary works
  c.rope = rope_layout(2, rope_pairing::interleaved);
  REQUIRE(bgtq::generate_synth(c).expected_scores.size() == 6u);
  c.rope = rope_layout(24, rope_pairing::half, 8);
  REQUIRE(bgtq::generate_synth(c).q.size() == 3u * 9 * 6 * 24);

  auto rejects = [](synth_config bad, const char* what) {
    try {
      bgtq::generate_synth(bad);
      FAIL("accepted " << what);
    } catch (const bgtq::error& e) {
      INFO(e.what());
      REQUIRE(e.code() == bgtq::errc::invalid_argument);
      REQUIRE(std::string(e.what()).find(what) != std::string::npos);
    }
  };
  synth_config bad = small_config();
  bad.q_heads = 6;
  rejects(bad, "q_heads");
  bad = small_config();
  bad.tokens = 0;
  rejects(bad, "tokens");
  bad = small_config();
  bad.layers = -1;
  rejects(bad, "layers");
  bad = small_config();
  bad.spread_max = 5;
  rejects(bad, "spread_max");
  bad = small_config();
  bad.rope.head_dim = 7;
  rejects(bad, "head_dim");
  bad = small_config();
  bad.qk_coupling = 1.5;
  rejects(bad, "qk_coupling");
  bad = small_config();
  bad.layers = 32;
  bad.tokens = 1 << 20;
  bad.q_heads = 32;
  bad.kv_heads = 32;
  bad.rope = rope_layout(128, rope_pairing::half);
  rejects(bad, "exceeds the 4 GiB limit");
  bad.tokens = 1 << 30;  // products far beyond 2^64 / 4 must not overflow into a pass
  bad.layers = 1 << 30;
  rejects(bad, "exceeds the 4 GiB limit");
}

TEST_CASE("synth expected spreads are log-uniform in [spread_min, spread_max]", "[energy][synth]") {
  // many heads, one token each: the drawn parameters only
  synth_config c = small_config(rope_pairing::half, 128, 1);
  c.layers = 16;
  c.kv_heads = 16;
  c.q_heads = 16;
  const auto s = bgtq::generate_synth(c);
  const int nb = 64;
  std::vector<double> spreads;
  for (std::size_t h = 0; h < s.expected_scores.size() / nb; ++h) {
    const auto b = s.expected_scores.begin() + static_cast<std::ptrdiff_t>(h * nb);
    const auto [mn, mx] = std::minmax_element(b, b + nb);
    spreads.push_back(*mx / *mn);
  }
  std::sort(spreads.begin(), spreads.end());
  REQUIRE(spreads.front() >= 10.0 * (1 - 1e-9));
  REQUIRE(spreads.back() <= 1000.0 * (1 + 1e-9));
  // 256 log-uniform draws: quartiles near 10^1.5, 10^2, 10^2.5
  REQUIRE(std::log10(spreads[64]) == Approx(1.5).margin(0.2));
  REQUIRE(std::log10(spreads[128]) == Approx(2.0).margin(0.2));
  REQUIRE(std::log10(spreads[192]) == Approx(2.5).margin(0.2));
}

TEST_CASE("synth: measured block energies follow the model", "[energy][synth]") {
  for (auto p : {rope_pairing::half, rope_pairing::interleaved}) {
    INFO("pairing " << bgtq::to_string(p));
    const synth_config c = small_config(p, 64, 512);
    const auto s = bgtq::generate_synth(c);
    const auto est = estimate(s);
    const auto sc = est.scores();
    const int nb = c.rope.num_blocks(), d = c.rope.head_dim;
    std::vector<double> rel;
    for (std::size_t j = 0; j < sc.size(); ++j) rel.push_back(std::abs(sc[j] / s.expected_scores[j] - 1.0));
    std::sort(rel.begin(), rel.end());
    // sampling error of a mean over 512 tokens: a few percent typically
    REQUIRE(rel[rel.size() / 2] < 0.06);
    REQUIRE(rel.back() < 0.35);

    for (int l = 0; l < c.layers; ++l)
      for (int h = 0; h < c.kv_heads; ++h) {
        INFO("layer " << l << " kv head " << h);
        const std::size_t o = (static_cast<std::size_t>(l) * c.kv_heads + h) * nb;
        std::vector<double> e(sc.begin() + o, sc.begin() + o + nb), x(s.expected_scores.begin() + o, s.expected_scores.begin() + o + nb);
        const double spread = bgtq_test::max_over_min(e), want = bgtq_test::max_over_min(x);
        REQUIRE(spread == Approx(want).epsilon(0.15));
        REQUIRE(spread >= 10.0 / 1.15);
        REQUIRE(spread <= 1000.0 * 1.15);
        // low-frequency end (high block index, both pairings) carries most energy
        double tot = 0, low = 0;
        for (int i = 0; i < nb; ++i) tot += e[i], low += (i >= nb / 2 ? e[i] : 0.0);
        REQUIRE(low / tot > 0.55);
      }

    // Independent of rope_layout: which *dims* carry the energy. Low frequency is
    // dims [D/2, D) for interleaved, [D/4, D/2) and [3D/4, D) for half.
    double hi = 0, lo = 0;
    for (std::size_t j = 0; j < s.k.size(); ++j) {
      const int dim = static_cast<int>(j % d);
      const bool low_freq = p == rope_pairing::interleaved ? dim >= d / 2 : (dim % (d / 2)) >= d / 4;
      (low_freq ? hi : lo) += double(s.k[j]) * s.k[j];
    }
    REQUIRE(hi > 2.0 * lo);
  }
}

TEST_CASE("synth keys have outlier channels with large consistent means", "[energy][synth]") {
  const synth_config c = small_config(rope_pairing::half, 64, 512);
  const auto s = bgtq::generate_synth(c);
  const int d = c.rope.head_dim, nb = c.rope.num_blocks();
  const std::size_t T = static_cast<std::size_t>(c.tokens);
  std::vector<double> post_ratio;
  for (int l = 0; l < c.layers; ++l) {
    const auto st = bgtq_test::layer_stats(q_layer(s, l), kv_layer(s.k, s, l), nullptr, T, c.q_heads, c.kv_heads, c.rope, false);
    for (const auto& h : st) post_ratio.push_back(h.k_outlier);
    for (int h = 0; h < c.kv_heads; ++h) {
      INFO("layer " << l << " head " << h);
      // undo RoPE, then per block |mean|^2 / E||k(i)||^2
      std::vector<double> m(d, 0.0), e2(d, 0.0);
      std::vector<float> x(d);
      for (std::size_t t = 0; t < T; ++t) {
        const float* src = kv_layer(s.k, s, l) + (t * c.kv_heads + h) * d;
        std::copy(src, src + d, x.begin());
        bgtq::apply_rope(c.rope, x.data(), -static_cast<long>(t));
        for (int j = 0; j < d; ++j) m[j] += x[j], e2[j] += double(x[j]) * x[j];
      }
      int n_out = 0;
      for (int i = 0; i < nb; ++i) {
        const auto dd = c.rope.block_dims(i);
        const double coh = (m[dd[0]] * m[dd[0]] + m[dd[1]] * m[dd[1]]) / double(T) / (e2[dd[0]] + e2[dd[1]]);
        if (s.outlier_blocks[(l * c.kv_heads + h) * nb + i]) {
          ++n_out;
          REQUIRE(coh > 0.75);
        } else {
          REQUIRE(coh < 0.5);
        }
      }
      REQUIRE(n_out >= 1);
      REQUIRE(n_out <= 4);
    }
  }
  // post-RoPE, as a real-data statistic: the largest channel mean is several rms
  std::sort(post_ratio.begin(), post_ratio.end());
  REQUIRE(post_ratio[post_ratio.size() / 2] > 2.5);
}

TEST_CASE("synth attention is peaky, and the q-k coupling makes it so", "[energy][synth]") {
  synth_config c = small_config(rope_pairing::half, 64, 256);
  c.layers = 1;
  auto mean_max = [&](const bgtq::synth_data& s, bool per_head_check) {
    const auto st = bgtq_test::layer_stats(s.q.data(), s.k.data(), nullptr, 256, c.q_heads, c.kv_heads, c.rope);
    double m = 0;
    for (const auto& h : st) {
      if (per_head_check) REQUIRE(h.attn_max > 5.0 * h.attn_uniform);
      m += h.attn_max;
    }
    return m / st.size();
  };
  const auto s = bgtq::generate_synth(c);
  const double coupled = mean_max(s, true);
  const auto st = bgtq_test::layer_stats(s.q.data(), s.k.data(), nullptr, 256, c.q_heads, c.kv_heads, c.rope);
  INFO("uniform " << st[0].attn_uniform << " coupled " << coupled);
  REQUIRE(coupled > 10.0 * st[0].attn_uniform);
  c.qk_coupling = 0.0;
  c.salience_sigma = 0.0;
  const double uncoupled = mean_max(bgtq::generate_synth(c), false);
  INFO("uncoupled " << uncoupled);
  REQUIRE(coupled > 1.25 * uncoupled);  // 1.5x to 1.8x over seeds 1..25
}

TEST_CASE("synth values are near-isotropic with mild spread", "[energy][synth]") {
  const synth_config c = small_config(rope_pairing::interleaved, 64, 512);
  const auto s = bgtq::generate_synth(c);
  double ss = 0;
  for (float x : s.v) ss += double(x) * x;
  REQUIRE(std::sqrt(ss / s.v.size()) == Approx(c.value_rms).epsilon(0.05));
  for (int l = 0; l < c.layers; ++l) {
    const auto st = bgtq_test::layer_stats(q_layer(s, l), kv_layer(s.k, s, l), kv_layer(s.v, s, l), 512, c.q_heads,
                                           c.kv_heads, c.rope, false);
    for (const auto& h : st) {
      REQUIRE(h.v_channel_ratio < 2.0 * 1.3);  // channel scales within 2x, plus sampling noise
      REQUIRE(h.v_token_cv == Approx(c.value_token_cv).margin(0.06));
    }
  }
}

TEST_CASE("synth energy scales: E k^2 per coordinate = key_rms^2, E|q|^2 / E|k|^2 = query_key_energy", "[energy][synth]") {
  // the estimator tests compare against expected_scores, which would scale with a wrong
  // amplitude: these pin the absolute levels (8%: sampling over 2 x 1024 tokens)
  const synth_config c = small_config(rope_pairing::half, 64, 1024);
  const auto s = bgtq::generate_synth(c);
  double kk = 0, qq = 0;
  for (float x : s.k) kk += double(x) * x;
  for (float x : s.q) qq += double(x) * x;
  const double k2 = kk / static_cast<double>(s.k.size()), q_over_k = (qq / static_cast<double>(s.q.size())) / k2;
  INFO("mean k^2 " << k2 << " (key_rms^2 " << c.key_rms * c.key_rms << "), E|q|^2/E|k|^2 " << q_over_k);
  CHECK(k2 == Approx(c.key_rms * c.key_rms).epsilon(0.08));
  CHECK(q_over_k == Approx(c.query_key_energy).epsilon(0.08));
}

TEST_CASE("synth queries and keys are both post-RoPE: their per-head means rotate with the position", "[energy][synth]") {
  // block 0 turns by 1 rad per token: a fixed per-head mean averages away over positions
  // unless RoPE is undone first. Both q and k must show it (a generator that forgot to
  // rotate the queries would show the opposite for q).
  synth_config c = small_config(rope_pairing::half, 64, 512);
  c.base_coherence_max = 0.9;
  const auto s = bgtq::generate_synth(c);
  const int d = c.rope.head_dim;
  const auto dd = c.rope.block_dims(0);
  for (const bool queries : {false, true}) {
    const int H = queries ? c.q_heads : c.kv_heads;
    const std::vector<float>& a = queries ? s.q : s.k;
    double post = 0, pre = 0;
    std::vector<float> x(static_cast<std::size_t>(d));
    for (int l = 0; l < c.layers; ++l)
      for (int h = 0; h < H; ++h) {
        double mp[2] = {0, 0}, mu[2] = {0, 0};
        for (int t = 0; t < c.tokens; ++t) {
          const float* src = a.data() + ((static_cast<std::size_t>(l) * c.tokens + t) * H + h) * d;
          x.assign(src, src + d);
          mp[0] += x[static_cast<std::size_t>(dd[0])];
          mp[1] += x[static_cast<std::size_t>(dd[1])];
          bgtq::apply_rope(c.rope, x.data(), -static_cast<long>(t));
          mu[0] += x[static_cast<std::size_t>(dd[0])];
          mu[1] += x[static_cast<std::size_t>(dd[1])];
        }
        post += mp[0] * mp[0] + mp[1] * mp[1];
        pre += mu[0] * mu[0] + mu[1] * mu[1];
      }
    INFO((queries ? "queries" : "keys") << ": |mean|^2 as stored " << post << ", with RoPE undone " << pre);
    CHECK(pre > 20.0 * post);  // measured: over 400x for the queries
  }
}

TEST_CASE("synth value scale holds at a large per-token spread (E nu^2 = 1 for any cv)", "[energy][synth]") {
  synth_config c = small_config(rope_pairing::interleaved, 64, 2048);
  c.q_heads = 4;
  c.value_token_cv = 1.0;  // the default 0.2 hides a wrong log-normal correction inside 5%
  const auto s = bgtq::generate_synth(c);
  double ss = 0;
  for (float x : s.v) ss += double(x) * x;
  CHECK(std::sqrt(ss / static_cast<double>(s.v.size())) == Approx(c.value_rms).epsilon(0.06));
}

TEST_CASE("real Llama-2 layer: the estimator reproduces the documented spreads", "[energy][synth][data]") {
  const std::string dir = bgtq_test::require_data("llama2_7b_layer9/q.npy");
  const std::string base = dir.substr(0, dir.size() - 5);
  const std::size_t n = 66u * 32 * 128;
  const auto q = read_f16_npy(base + "q.npy", n), k = read_f16_npy(base + "k.npy", n), v = read_f16_npy(base + "v.npy", n);
  const rope_layout rope(128, rope_pairing::half);
  const auto st = bgtq_test::layer_stats(q.data(), k.data(), v.data(), 66, 32, 32, rope);
  const auto sp = bgtq_test::summarize(st, [](const auto& h) { return h.spread; });
  const auto mm = bgtq_test::summarize(st, [](const auto& h) { return h.max_median; });
  // README: strongest block 84x to 670x the weakest and 17x to 85x the median
  CHECK(sp.min == Approx(84).epsilon(0.01));
  CHECK(sp.max == Approx(670).epsilon(0.01));
  CHECK(mm.min == Approx(17.8).epsilon(0.01));
  CHECK(mm.max == Approx(85.6).epsilon(0.01));
  for (const auto& h : st) CHECK(h.low_freq_share > 0.6);
}

// Prints the real-vs-synthetic table of docs/synth.md (hidden; needs the real data):
//   build/bin/test_energy "[synth_table]"
TEST_CASE("print the real vs synthetic statistics table", "[.][synth_table]") {
  const std::string dir = bgtq_test::require_data("llama2_7b_layer9/q.npy");
  const std::string base = dir.substr(0, dir.size() - 5);
  const std::size_t n = 66u * 32 * 128;
  const auto q = read_f16_npy(base + "q.npy", n), k = read_f16_npy(base + "k.npy", n), v = read_f16_npy(base + "v.npy", n);
  const rope_layout rope(128, rope_pairing::half);
  std::vector<std::vector<bgtq_test::head_stats>> cols;
  cols.push_back(bgtq_test::layer_stats(q.data(), k.data(), v.data(), 66, 32, 32, rope));
  synth_config c;
  c.layers = 1;
  c.tokens = 66;
  c.q_heads = 32;
  c.kv_heads = 32;
  c.rope = rope;
  c.seed = 1;
  const auto s1 = bgtq::generate_synth(c);
  cols.push_back(bgtq_test::layer_stats(s1.q.data(), s1.k.data(), s1.v.data(), 66, 32, 32, rope));
  c.spread_min = 80;
  c.spread_max = 700;
  const auto s2 = bgtq::generate_synth(c);
  cols.push_back(bgtq_test::layer_stats(s2.q.data(), s2.k.data(), s2.v.data(), 66, 32, 32, rope));
  c = synth_config{};
  c.layers = 1;
  c.kv_heads = 32;
  const auto s3 = bgtq::generate_synth(c);  // T = 512, 32 MHA heads
  cols.push_back(bgtq_test::layer_stats(s3.q.data(), s3.k.data(), s3.v.data(), 512, 32, 32, c.rope));

  using field = double (*)(const bgtq_test::head_stats&);
  const std::pair<const char*, field> rows[] = {
      {"block-score spread max/min", [](const bgtq_test::head_stats& h) { return h.spread; }},
      {"max/median block score", [](const bgtq_test::head_stats& h) { return h.max_median; }},
      {"q-part spread", [](const bgtq_test::head_stats& h) { return h.q_spread; }},
      {"k-part spread", [](const bgtq_test::head_stats& h) { return h.k_spread; }},
      {"corr(ln q energy, ln k energy)", [](const bgtq_test::head_stats& h) { return h.qk_log_corr; }},
      {"share in low-freq half (i >= L/2)", [](const bgtq_test::head_stats& h) { return h.low_freq_share; }},
      {"k max channel mean / rms", [](const bgtq_test::head_stats& h) { return h.k_outlier; }},
      {"mean max attention prob", [](const bgtq_test::head_stats& h) { return h.attn_max; }},
      {"  (uniform attention gives)", [](const bgtq_test::head_stats& h) { return h.attn_uniform; }},
      {"logit sd (q.k/sqrt(D))", [](const bgtq_test::head_stats& h) { return h.logit_sd; }},
      {"v channel rms max/min", [](const bgtq_test::head_stats& h) { return h.v_channel_ratio; }},
      {"v token-norm cv", [](const bgtq_test::head_stats& h) { return h.v_token_cv; }},
  };
  std::printf("| statistic (min / median / max over 32 heads) | real Llama-2-7b L9, T=66 | synth default, T=66 | "
              "synth spread 80-700, T=66 | synth default, T=512 |\n|---|---|---|---|---|\n");
  for (const auto& [name, f] : rows) {
    std::printf("| %s |", name);
    for (const auto& col : cols) {
      const auto sm = bgtq_test::summarize(col, f);
      std::printf(" %.3g / %.3g / %.3g |", sm.min, sm.median, sm.max);
    }
    std::printf("\n");
  }
}
