// compare_attention (bgtq eval's metrics) against a direct evaluation of its definitions:
// every (query head, query, key) triple in double, one query at a time. Awkward shapes:
// more queries than one 64-query block of scores (and not a multiple of it), a first
// query inside the sequence, GQA, K-only and K+V.
#include <bgtq/core/rng.hpp>
#include <bgtq/eval/metrics.hpp>

#include <algorithm>
#include <atomic>
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

// A layer's Q, K, V ~ N(0, 1) and "quantized" copies of K and V with N(0, 0.3^2) noise
// added, large enough to move the top-10 sets.
struct noisy_layer {
  std::vector<float> q, k, v, kh, vh;
  noisy_layer(const bgtq::layer_shape& sh, std::uint64_t seed) {
    const std::size_t nq = static_cast<std::size_t>(sh.tokens) * sh.q_heads * sh.head_dim;
    const std::size_t nk = static_cast<std::size_t>(sh.tokens) * sh.kv_heads * sh.head_dim;
    q = normal(nq, seed, 1.0);
    k = normal(nk, seed + 1, 1.0);
    v = normal(nk, seed + 2, 1.0);
    kh = k;
    vh = v;
    const auto ek = normal(nk, seed + 3, 0.3), ev = normal(nk, seed + 4, 0.3);
    for (std::size_t i = 0; i < nk; ++i) {
      kh[i] += ek[i];
      vh[i] += ev[i];
    }
  }
};

// The definitions of metrics.hpp's header comment, written out.
// The rows a cache holds unquantized after n appends, by replaying kv_cache's append
// rule (not metrics.hpp's closed form): the first `sink` tokens stay; the others enter the
// tail, which hands its oldest `block` tokens to the pages once it holds recent + block.
struct held_rows {
  int sink = 0, recent = 0, block = 1;
  std::vector<bool> at(int n) const {
    std::vector<bool> held(static_cast<std::size_t>(n), false);
    std::vector<int> tail;
    for (int i = 0; i < n; ++i) {
      if (i < sink) {
        held[static_cast<std::size_t>(i)] = true;
        continue;
      }
      tail.push_back(i);
      if (static_cast<int>(tail.size()) >= recent + block) tail.erase(tail.begin(), tail.begin() + block);
    }
    for (int i : tail) held[static_cast<std::size_t>(i)] = true;
    return held;
  }
};

// `w` given: the keys and values it holds are read from kf / vf (metrics.hpp's held_window).
bgtq::attention_metrics direct_at(const bgtq::layer_shape& sh, const std::vector<float>& q, const std::vector<float>& k,
                                  const std::vector<float>& kh, const std::vector<float>* v, const std::vector<float>* vh,
                                  const std::vector<int>& queries, const held_rows* w = nullptr,
                                  const std::vector<float>* kf = nullptr, const std::vector<float>* vf = nullptr) {
  const int Hq = sh.q_heads, Hkv = sh.kv_heads, D = sh.head_dim, G = Hq / Hkv;
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
    for (const int t : queries) {
      std::vector<double> s(t + 1), shat(t + 1);
      const std::vector<bool> held = w ? w->at(t + 1) : std::vector<bool>(static_cast<std::size_t>(t + 1), false);
      auto key_hat = [&](int u) -> const std::vector<float>& { return held[static_cast<std::size_t>(u)] ? *kf : kh; };
      auto value_hat = [&](int u) -> const std::vector<float>& { return held[static_cast<std::size_t>(u)] ? *vf : *vh; };
      for (int u = 0; u <= t; ++u) {
        for (int j = 0; j < D; ++j) {
          s[u] += at(q, Hq, t, g, j) * at(k, Hkv, u, h, j);
          shat[u] += at(q, Hq, t, g, j) * at(key_hat(u), Hkv, u, h, j);
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
            oh += ph[u] * at(value_hat(u), Hkv, u, h, j);
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

bgtq::attention_metrics direct(const bgtq::layer_shape& sh, const std::vector<float>& q, const std::vector<float>& k,
                               const std::vector<float>& kh, const std::vector<float>* v, const std::vector<float>* vh,
                               int t_begin) {
  std::vector<int> all(static_cast<std::size_t>(sh.tokens - t_begin));
  std::iota(all.begin(), all.end(), t_begin);
  return direct_at(sh, q, k, kh, v, vh, all);
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
    const noisy_layer d(sh, 1);
    const auto &q = d.q, &k = d.k, &v = d.v, &kh = d.kh, &vh = d.vh;
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

TEST_CASE("spaced_queries: evenly spaced positions ending at the last token", "[eval][metrics]") {
  CHECK(bgtq::spaced_queries(10, 4) == std::vector<int>{4, 5, 6, 7, 8, 9});
  CHECK(bgtq::spaced_queries(10, 4, 0) == bgtq::spaced_queries(10, 4, 6));
  CHECK(bgtq::spaced_queries(10, 4, 99) == bgtq::spaced_queries(10, 4));
  CHECK(bgtq::spaced_queries(10, 4, 3) == std::vector<int>{5, 7, 9});
  CHECK(bgtq::spaced_queries(10, 4, 1) == std::vector<int>{9});
  CHECK(bgtq::spaced_queries(1, 0) == std::vector<int>{0});
  for (const int count : {1, 2, 7, 63, 64, 65, 200, 999}) {
    const auto t = bgtq::spaced_queries(1000, 1, count);
    INFO("count " << count);
    REQUIRE(static_cast<int>(t.size()) == std::min(count, 999));
    CHECK(t.front() >= 1);
    CHECK(t.back() == 999);
    for (std::size_t i = 1; i < t.size(); ++i) {
      CHECK(t[i] > t[i - 1]);
      CHECK(t[i] - t[i - 1] <= 999 / static_cast<int>(t.size()) + 1);  // even: no gap above the mean spacing + 1
    }
  }
  CHECK_THROWS_AS(bgtq::spaced_queries(10, 10), bgtq::error);
  CHECK_THROWS_AS(bgtq::spaced_queries(10, -1), bgtq::error);
  CHECK_THROWS_AS(bgtq::spaced_queries(10, 0, -1), bgtq::error);
}

TEST_CASE("compare_attention at chosen query positions matches the definitions there", "[eval][metrics]") {
  // positions that leave gaps, two and a half blocks of 64, the first at t = 0 (one key)
  const bgtq::layer_shape sh{300, 4, 2, 8};
  const noisy_layer d(sh, 12);
  const auto &q = d.q, &k = d.k, &v = d.v, &kh = d.kh, &vh = d.vh;
  std::vector<int> pos{0};
  for (int t = 3; t < 300 && pos.size() < 160; t += 1 + t % 3) pos.push_back(t);
  REQUIRE(pos.size() == 160);
  for (const bool with_v : {false, true}) {
    const auto got = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), with_v ? v.data() : nullptr,
                                             with_v ? vh.data() : nullptr, std::span<const int>(pos));
    const auto want = direct_at(sh, q, k, kh, with_v ? &v : nullptr, with_v ? &vh : nullptr, pos);
    CHECK(got.queries == 160 * 4);
    CHECK(got.pairs == want.pairs);
    CHECK(close(got.logit_mae, want.logit_mae));
    CHECK(close(got.kl, want.kl));
    CHECK(close(got.top10, want.top10));
    if (with_v) CHECK(close(got.out_rel_l2, want.out_rel_l2));
  }
  // a position list of every query is the t_begin form, bit for bit
  const auto all = bgtq::spaced_queries(300, 37);
  const auto a = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), v.data(), vh.data(), std::span<const int>(all));
  const auto b = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), v.data(), vh.data(), 37);
  CHECK(a.logit_mae == b.logit_mae);
  CHECK(a.kl == b.kl);
  CHECK(a.out_rel_l2 == b.out_rel_l2);
  // bad lists are refused with the entry named
  for (const std::vector<int>& bad : {std::vector<int>{}, std::vector<int>{5, 5}, std::vector<int>{7, 6},
                                      std::vector<int>{-1, 4}, std::vector<int>{3, 300}}) {
    try {
      (void)bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), nullptr, nullptr, std::span<const int>(bad));
      FAIL("no error for a list of " << bad.size());
    } catch (const bgtq::error& e) {
      CHECK(e.code() == bgtq::errc::invalid_argument);
      CHECK(std::string(e.what()).find(bad.empty() ? "no query" : "entry") != std::string::npos);
    }
  }
}

TEST_CASE("compare_attention on a thread pool gives the single-threaded result bit for bit", "[eval][metrics]") {
  const bgtq::layer_shape sh{200, 6, 2, 8};
  const noisy_layer d(sh, 17);
  const auto &q = d.q, &k = d.k, &v = d.v, &kh = d.kh, &vh = d.vh;
  const auto one = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), v.data(), vh.data(), 5);
  CHECK(close(one.kl, direct(sh, q, k, kh, &v, &vh, 5).kl));
  for (const int threads : {1, 2, 3, 7}) {
    INFO(threads << " threads");
    bgtq::thread_pool pool(threads);
    const auto m = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), v.data(), vh.data(), 5, &pool);
    CHECK(m.logit_mae == one.logit_mae);
    CHECK(m.kl == one.kl);
    CHECK(m.top10 == one.top10);
    CHECK(m.out_rel_l2 == one.out_rel_l2);
    CHECK(m.pairs == one.pairs);
    CHECK(m.queries == one.queries);
  }
}

TEST_CASE("compare_attention reports its progress: non-decreasing fractions, one call at a time, 1 at the end", "[eval][metrics]") {
  // 300 queries of 6 heads: 5 blocks of 64 per head, 30 blocks in all
  const bgtq::layer_shape sh{300, 6, 2, 8};
  const noisy_layer d(sh, 23);
  const auto &q = d.q, &k = d.k, &v = d.v, &kh = d.kh, &vh = d.vh;
  const auto plain = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), v.data(), vh.data(), 0);
  for (const int threads : {1, 3}) {
    INFO(threads << " threads");
    bgtq::thread_pool pool(threads);
    std::vector<double> seen;
    std::atomic<int> inside{0}, overlapped{0};
    const auto m = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), v.data(), vh.data(), bgtq::spaced_queries(300, 0),
                                           threads > 1 ? &pool : nullptr, [&](double f) {
                                             if (inside.fetch_add(1) != 0) overlapped.fetch_add(1);
                                             seen.push_back(f);
                                             inside.fetch_sub(1);
                                           });
    CHECK(m.kl == plain.kl);  // the same result with a progress callback
    CHECK(overlapped.load() == 0);
    REQUIRE(seen.size() >= 2);
    CHECK(seen.back() == 1.0);
    CHECK(seen.front() > 0.0);
    CHECK(seen.front() < 0.5);
    CHECK(std::is_sorted(seen.begin(), seen.end()));
    if (threads == 1) {  // every block, then the final 1; only the last block completes the pairs
      REQUIRE(seen.size() == 31);
      for (std::size_t i = 0; i + 2 < seen.size(); ++i) CHECK(seen[i] < 1.0);
      CHECK(seen[29] == 1.0);
    }
  }
}

TEST_CASE("compare_attention: the KL is never negative, even where rounding would make it so", "[eval][metrics]") {
  // k_hat one float step above k: p_hat and p differ by rounding only, and the closed form
  // can come out a few 1e-18 below 0 (seed 137 without the clamp, found by a mutation check)
  const bgtq::layer_shape sh{64, 1, 1, 8};
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const auto q = normal(64 * 8, seed, 1.0), k = normal(64 * 8, seed + 1000, 1.0);
    auto kh = k;
    for (float& x : kh) x = std::nextafter(x, 10.0f);
    const int last = 63;
    const auto m = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), nullptr, nullptr, std::span<const int>(&last, 1));
    INFO("seed " << seed);
    CHECK(m.kl >= 0.0);
  }
}

TEST_CASE("compare_attention with a held window reads the rows the cache holds, as defined", "[eval][metrics]") {
  // kf / vf: a third copy with smaller noise, standing for the fp16 window. Windows: KIVI's
  // unfinished 32-token block alone, blocks of 7 (straddling the 64-query score blocks),
  // blocks of 1 with nothing else (holds nothing), a block longer than T (every key
  // held), a sink, a recent window, and all three together
  const bgtq::layer_shape sh{150, 4, 2, 6};
  const noisy_layer d(sh, 31);
  const auto &q = d.q, &k = d.k, &v = d.v, &kh = d.kh, &vh = d.vh;
  auto kf = k, vf = v;
  const auto ek = normal(kf.size(), 33, 0.01), ev = normal(vf.size(), 34, 0.01);
  for (std::size_t i = 0; i < kf.size(); ++i) {
    kf[i] += ek[i];
    vf[i] += ev[i];
  }
  std::vector<int> pos;
  for (int t = 0; t < 150; t += 1 + t % 4) pos.push_back(t);
  pos.push_back(149);
  const auto none = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), v.data(), vh.data(), std::span<const int>(pos));
  for (const held_rows hw : {held_rows{0, 0, 32}, held_rows{0, 0, 7}, held_rows{0, 0, 1}, held_rows{0, 0, 500},
                             held_rows{4, 0, 1}, held_rows{0, 16, 1}, held_rows{4, 16, 32}, held_rows{3, 5, 7}})
    for (const bool with_v : {false, true}) {
      INFO("sink " << hw.sink << " recent " << hw.recent << " block " << hw.block << (with_v ? " K+V" : " K only"));
      const bgtq::held_window f{hw.sink, hw.recent, hw.block, kf.data(), with_v ? vf.data() : nullptr};
      for (int n = 1; n <= 150; ++n) {  // the closed form is the cache's append rule
        const auto held = hw.at(n);
        const std::int64_t from = f.tail_from(n);
        for (int s = 0; s < n; ++s) REQUIRE(held[static_cast<std::size_t>(s)] == (s < hw.sink || s >= from));
      }
      const auto got = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), with_v ? v.data() : nullptr,
                                               with_v ? vh.data() : nullptr, std::span<const int>(pos), nullptr, {}, f);
      const auto want = direct_at(sh, q, k, kh, with_v ? &v : nullptr, with_v ? &vh : nullptr, pos, &hw, &kf, &vf);
      CHECK(got.pairs == want.pairs);
      CHECK(close(got.logit_mae, want.logit_mae));
      CHECK(close(got.kl, want.kl));
      CHECK(close(got.top10, want.top10));
      if (with_v) CHECK(close(got.out_rel_l2, want.out_rel_l2));
      if (!f.holds()) {
        CHECK(got.logit_mae == none.logit_mae);
      } else {  // the held rows' smaller noise lowers every error
        CHECK(got.logit_mae < none.logit_mae);
        CHECK(got.kl < none.kl);
        if (with_v) CHECK(got.out_rel_l2 < none.out_rel_l2);
      }
      // on a pool, bit for bit
      bgtq::thread_pool pool(3);
      const auto pooled = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), with_v ? v.data() : nullptr,
                                                  with_v ? vh.data() : nullptr, std::span<const int>(pos), &pool, {}, f);
      CHECK(pooled.kl == got.kl);
      CHECK(pooled.logit_mae == got.logit_mae);
    }
  // a window that holds rows without them, or with a negative size, is refused
  for (const bgtq::held_window bad :
       {bgtq::held_window{0, 0, 32, nullptr, vf.data()}, bgtq::held_window{0, 4, 1, kf.data(), nullptr},
        bgtq::held_window{-1, 0, 1, kf.data(), vf.data()}, bgtq::held_window{0, -1, 1, kf.data(), vf.data()},
        bgtq::held_window{0, 0, 0, kf.data(), vf.data()}}) {
    try {
      (void)bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), v.data(), vh.data(), std::span<const int>(pos), nullptr,
                                    {}, bad);
      FAIL("accepted sink " << bad.sink << " recent " << bad.recent << " block " << bad.block);
    } catch (const bgtq::error& e) {
      CHECK(e.code() == bgtq::errc::invalid_argument);
      CHECK(std::string(e.what()).find("held window") != std::string::npos);
    }
  }
}

TEST_CASE("compare_attention: the KL keeps its digits when k_hat's scores are shifted by 2^39", "[eval][metrics]") {
  // D = 4 (1/sqrt(D) = 0.5, exact): q = (1, 1, 0, 0), k_s = (a_s, 0, 0, 0), k_hat_s = (a_s +
  // e_s, 2^40, 0, 0), so S_s = a_s / 2 and S_hat_s = (a_s + e_s) / 2 + 2^39, all exact in
  // double. The shift leaves p_hat alone: the KL is that of the small scores. Formed from
  // the weighted sum of S - S_hat minus the difference of the maxima (both ~2^39, ulp 1e-4),
  // it was off by ~1e-4 of a KL of ~0.1 (and read 0 where the logits reach ~1e38)
  const int T = 40;
  const bgtq::layer_shape sh{T, 1, 1, 4};
  bgtq::counter_rng rng(5);
  std::vector<float> q(T * 4, 0.0f), k(T * 4, 0.0f), kh(T * 4, 0.0f), ks(T * 4, 0.0f);
  for (int t = 0; t < T; ++t) {
    q[t * 4] = q[t * 4 + 1] = 1.0f;
    const float a = static_cast<float>(static_cast<int>(rng.below(9)) - 4);
    const float e = 0.5f * static_cast<float>(static_cast<int>(rng.below(5)) - 2);
    k[t * 4] = a;
    kh[t * 4] = ks[t * 4] = a + e;
    kh[t * 4 + 1] = 1099511627776.0f;  // 2^40
  }
  const std::vector<int> pos{9, 20, 39};
  const auto shifted = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), nullptr, nullptr, std::span<const int>(pos));
  const auto plain = bgtq::compare_attention(sh, q.data(), k.data(), ks.data(), nullptr, nullptr, std::span<const int>(pos));
  const auto want = direct_at(sh, q, k, ks, nullptr, nullptr, pos);
  REQUIRE(want.kl > 0.01);
  CHECK(plain.kl == Approx(want.kl).epsilon(1e-12));
  CHECK(shifted.kl == Approx(want.kl).epsilon(1e-12));
}
