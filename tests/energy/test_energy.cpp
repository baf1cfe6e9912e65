#include <catch2/catch.hpp>

#include <bgtq/core/rng.hpp>
#include <bgtq/energy/energy.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common.hpp"


namespace {

using bgtq::energy_estimator;
using bgtq::rope_layout;
using bgtq::rope_pairing;

// Random data with a different scale per dim (so blocks differ), [layers][T][H][D].
std::vector<float> random_acts(std::uint64_t seed, int layers, std::size_t tokens, int heads, int d) {
  bgtq::counter_rng rng(seed);
  std::vector<float> x(static_cast<std::size_t>(layers) * tokens * heads * d);
  std::size_t j = 0;
  for (int l = 0; l < layers; ++l)
    for (std::size_t t = 0; t < tokens; ++t)
      for (int h = 0; h < heads; ++h)
        for (int e = 0; e < d; ++e) x[j++] = static_cast<float>((0.2 + 0.3 * e + 0.1 * h) * rng.normal());
  return x;
}

// Naive definition: s = 1/2 mean_{t, g in G(h)} ||q_g,t(i)||^2 + 1/2 mean_t ||k_h,t(i)||^2.
std::vector<double> naive_scores(const std::vector<float>& q, const std::vector<float>& k, int layers, std::size_t tokens,
                                 int hq, int hkv, const rope_layout& r) {
  const int d = r.head_dim, nb = r.num_blocks(), group = hq / hkv;
  std::vector<double> out;
  for (int l = 0; l < layers; ++l)
    for (int h = 0; h < hkv; ++h)
      for (int i = 0; i < nb; ++i) {
        const auto dd = r.block_dims(i);
        double qs = 0, ks = 0;
        for (std::size_t t = 0; t < tokens; ++t) {
          for (int g = 0; g < hq; ++g) {
            if (g / group != h) continue;
            const float* x = q.data() + ((l * tokens + t) * hq + g) * d;
            qs += double(x[dd[0]]) * x[dd[0]] + double(x[dd[1]]) * x[dd[1]];
          }
          const float* y = k.data() + ((l * tokens + t) * hkv + h) * d;
          ks += double(y[dd[0]]) * y[dd[0]] + double(y[dd[1]]) * y[dd[1]];
        }
        out.push_back(0.5 * qs / (double(tokens) * group) + 0.5 * ks / double(tokens));
      }
  return out;
}

void require_close(const std::vector<double>& a, const std::vector<double>& b, double rel) {
  REQUIRE(a.size() == b.size());
  for (std::size_t j = 0; j < a.size(); ++j) {
    INFO("index " << j << ": " << a[j] << " vs " << b[j]);
    REQUIRE(std::abs(a[j] - b[j]) <= rel * std::abs(b[j]));
  }
}

void add_all(energy_estimator& est, const std::vector<float>& q, const std::vector<float>& k, int layers, std::size_t tokens) {
  const std::size_t qs = tokens * est.q_heads() * est.rope().head_dim, ks = tokens * est.kv_heads() * est.rope().head_dim;
  for (int l = 0; l < layers; ++l) est.add(l, q.data() + l * qs, k.data() + l * ks, tokens);
}

struct shape_case {
  const char* name;
  rope_layout rope;
  int hq, hkv;
  std::size_t tokens;
};

const shape_case cases[] = {
    {"interleaved D=10 MHA", rope_layout(10, rope_pairing::interleaved), 3, 3, 17},
    {"half D=12 GQA 6/2", rope_layout(12, rope_pairing::half), 6, 2, 54},
    {"partial rotary half D=16 R=6 GQA 4/1", rope_layout(16, rope_pairing::half, 6), 4, 1, 23},
    {"partial rotary interleaved D=14 R=8", rope_layout(14, rope_pairing::interleaved, 8), 2, 2, 9},
    {"D=2", rope_layout(2, rope_pairing::half), 2, 1, 5},
};

}  // namespace

TEST_CASE("energy scores match a naive triple loop", "[energy]") {
  for (const auto& c : cases) {
    INFO(c.name);
    const int layers = 3;
    const auto q = random_acts(11, layers, c.tokens, c.hq, c.rope.head_dim);
    const auto k = random_acts(12, layers, c.tokens, c.hkv, c.rope.head_dim);
    energy_estimator est(layers, c.hq, c.hkv, c.rope);
    add_all(est, q, k, layers, c.tokens);
    const auto want = naive_scores(q, k, layers, c.tokens, c.hq, c.hkv, c.rope);
    require_close(est.scores(), want, 1e-12);
    // score()/q_energy()/k_energy() agree with scores() and with each other
    const auto all = est.scores();
    const int nb = c.rope.num_blocks();
    for (int l = 0; l < layers; ++l)
      for (int h = 0; h < c.hkv; ++h)
        for (int i = 0; i < nb; ++i) {
          REQUIRE(est.score(l, h, i) == all[(l * c.hkv + h) * nb + i]);
          REQUIRE(est.score(l, h, i) == 0.5 * est.q_energy(l, h, i) + 0.5 * est.k_energy(l, h, i));
        }
    REQUIRE(est.tokens(1) == static_cast<std::int64_t>(c.tokens));
  }
}

TEST_CASE("energy lands in the block that rope_layout pairs", "[energy]") {
  // One non-zero dim j in the keys: only block containing j may get energy.
  struct pc {
    rope_layout r;
    int dim, block;
  };
  const pc pcs[] = {
      {rope_layout(8, rope_pairing::interleaved), 5, 2}, {rope_layout(8, rope_pairing::half), 5, 1},
      {rope_layout(8, rope_pairing::half), 2, 2},        {rope_layout(12, rope_pairing::half, 4), 3, 1},
      {rope_layout(12, rope_pairing::half, 4), 7, 3},    {rope_layout(12, rope_pairing::interleaved, 4), 9, 4},
  };
  for (const auto& p : pcs) {
    INFO("pairing " << bgtq::to_string(p.r.pairing) << " D=" << p.r.head_dim << " R=" << p.r.rotary_dim << " dim "
                    << p.dim);
    const int d = p.r.head_dim;
    std::vector<float> q(d * 2, 0.0f), k(d * 2, 0.0f);
    k[p.dim] = 3.0f;      // token 0
    k[d + p.dim] = 1.0f;  // token 1
    energy_estimator est(1, 1, 1, p.r);
    est.add(0, q.data(), k.data(), 2);
    for (int i = 0; i < p.r.num_blocks(); ++i) {
      INFO("block " << i);
      REQUIRE(est.k_energy(0, 0, i) == (i == p.block ? 5.0 : 0.0));
      REQUIRE(est.score(0, 0, i) == (i == p.block ? 2.5 : 0.0));
    }
  }
}

TEST_CASE("GQA: query heads feed only their KV head", "[energy]") {
  const int hq = 8, hkv = 2, d = 6;
  const std::size_t T = 13;
  rope_layout r(d, rope_pairing::half);
  auto q = random_acts(21, 1, T, hq, d);
  for (std::size_t t = 0; t < T; ++t)
    for (int g = 0; g < 4; ++g)
      for (int e = 0; e < d; ++e) q[(t * hq + g) * d + e] = 0.0f;  // energy only in query heads 4..7
  const std::vector<float> k(T * hkv * d, 0.0f);
  energy_estimator est(1, hq, hkv, r);
  est.add(0, q.data(), k.data(), T);
  REQUIRE(est.kv_head_of(3) == 0);
  REQUIRE(est.kv_head_of(4) == 1);
  for (int i = 0; i < r.num_blocks(); ++i) {
    REQUIRE(est.q_energy(0, 0, i) == 0.0);
    REQUIRE(est.score(0, 0, i) == 0.0);
    REQUIRE(est.k_energy(0, 1, i) == 0.0);
    // kv head 1: mean over t and g in {4..7}
    const auto dd = r.block_dims(i);
    double s = 0;
    for (std::size_t t = 0; t < T; ++t)
      for (int g = 4; g < 8; ++g)
        for (int e : dd) s += double(q[(t * hq + g) * d + e]) * q[(t * hq + g) * d + e];
    REQUIRE(est.q_energy(0, 1, i) == Approx(s / (T * 4)).epsilon(1e-12));
    REQUIRE(est.q_energy(0, 1, i) > 0.0);
  }
}

TEST_CASE("streaming in chunks equals one add, and merge equals both", "[energy]") {
  const shape_case& c = cases[1];
  const int layers = 2;
  const std::size_t T = c.tokens;
  const int d = c.rope.head_dim;
  const auto q = random_acts(31, layers, T, c.hq, d);
  const auto k = random_acts(32, layers, T, c.hkv, d);
  energy_estimator once(layers, c.hq, c.hkv, c.rope);
  add_all(once, q, k, layers, T);

  energy_estimator chunked(layers, c.hq, c.hkv, c.rope), part_a(layers, c.hq, c.hkv, c.rope), part_b(layers, c.hq, c.hkv, c.rope);
  const std::size_t cuts[] = {0, 1, 8, 8, 31, T};  // includes an empty chunk
  for (int l = 0; l < layers; ++l)
    for (std::size_t j = 0; j + 1 < std::size(cuts); ++j) {
      const std::size_t t0 = cuts[j], n = cuts[j + 1] - cuts[j];
      const float* qp = q.data() + (l * T + t0) * c.hq * d;
      const float* kp = k.data() + (l * T + t0) * c.hkv * d;
      chunked.add(l, qp, kp, n);
      (j % 2 ? part_a : part_b).add(l, qp, kp, n);
    }
  REQUIRE(chunked.tokens(0) == static_cast<std::int64_t>(T));
  require_close(chunked.scores(), once.scores(), 1e-12);
  part_a.merge(part_b);
  require_close(part_a.scores(), once.scores(), 1e-12);
  // every shape field must match, not only the layer count: estimators that differ in
  // query heads (another GQA normalisation) or in the RoPE pairing or rotary dim (other
  // dims per block) have sums of the same size, which a check of the layers alone
  // would add together silently
  const auto merged = part_a.scores();
  const energy_estimator others[] = {
      energy_estimator(layers + 1, c.hq, c.hkv, c.rope),
      energy_estimator(layers, 2 * c.hkv, c.hkv, c.rope),
      energy_estimator(layers, c.hq, c.hq, c.rope),
      energy_estimator(layers, c.hq, c.hkv, rope_layout(d, rope_pairing::interleaved)),
      energy_estimator(layers, c.hq, c.hkv, rope_layout(d, c.rope.pairing, d / 2)),
  };
  REQUIRE(c.rope.pairing == rope_pairing::half);
  REQUIRE(c.rope.rotary_dim == d);
  for (std::size_t j = 0; j < std::size(others); ++j) {
    energy_estimator other = others[j];
    for (int l = 0; l < other.layers(); ++l) {
      std::vector<float> oq(T * other.q_heads() * d, 1.0f), ok(T * other.kv_heads() * d, 1.0f);
      other.add(l, oq.data(), ok.data(), T);
    }
    INFO("mismatch " << j);
    try {
      part_a.merge(other);
      FAIL("estimators of different shapes were merged");
    } catch (const bgtq::error& e) {
      CHECK(e.code() == bgtq::errc::shape_mismatch);
    }
    REQUIRE(part_a.scores() == merged);  // nothing was added
  }
}

TEST_CASE("pre-RoPE and post-RoPE inputs give the same scores", "[energy]") {
  for (const auto& c : cases) {
    INFO(c.name);
    const int d = c.rope.head_dim;
    const std::size_t T = c.tokens;
    auto q = random_acts(41, 1, T, c.hq, d);
    auto k = random_acts(42, 1, T, c.hkv, d);
    energy_estimator pre(1, c.hq, c.hkv, c.rope), post(1, c.hq, c.hkv, c.rope);
    pre.add(0, q.data(), k.data(), T);
    bgtq::counter_rng rng(43);
    for (std::size_t t = 0; t < T; ++t) {
      const long pos = static_cast<long>(rng.below(100000));  // random positions, far apart
      for (int g = 0; g < c.hq; ++g) bgtq::apply_rope(c.rope, q.data() + (t * c.hq + g) * d, pos);
      for (int h = 0; h < c.hkv; ++h) bgtq::apply_rope(c.rope, k.data() + (t * c.hkv + h) * d, pos);
    }
    post.add(0, q.data(), k.data(), T);
    require_close(post.scores(), pre.scores(), 1e-5);
  }
}

TEST_CASE("fp16 input equals float input of the same values", "[energy]") {
  const shape_case& c = cases[2];
  const int d = c.rope.head_dim;
  const std::size_t T = c.tokens;
  auto q = random_acts(51, 1, T, c.hq, d);
  auto k = random_acts(52, 1, T, c.hkv, d);
  std::vector<bgtq::half> qh(q.size()), kh(k.size());
  for (std::size_t j = 0; j < q.size(); ++j) {
    qh[j] = bgtq::half(q[j]);
    q[j] = static_cast<float>(qh[j]);  // the exact values the half path sees
  }
  for (std::size_t j = 0; j < k.size(); ++j) {
    kh[j] = bgtq::half(k[j]);
    k[j] = static_cast<float>(kh[j]);
  }
  energy_estimator ef(1, c.hq, c.hkv, c.rope), eh(1, c.hq, c.hkv, c.rope);
  ef.add(0, q.data(), k.data(), T);
  eh.add(0, qh.data(), kh.data(), T);
  REQUIRE(eh.scores() == ef.scores());  // same values, same summation order: bit-identical
}

TEST_CASE("strided views equal contiguous arrays", "[energy]") {
  SECTION("fused MHA QKV buffer [T, 3*H, D]") {
    const int h = 3, d = 10;
    const std::size_t T = 19;
    rope_layout r(d, rope_pairing::interleaved);
    const auto fused = random_acts(61, 1, T, 3 * h, d);
    std::vector<float> q(T * h * d), k(T * h * d);
    for (std::size_t t = 0; t < T; ++t)
      for (int e = 0; e < h * d; ++e) {
        q[t * h * d + e] = fused[t * 3 * h * d + e];
        k[t * h * d + e] = fused[t * 3 * h * d + h * d + e];
      }
    energy_estimator a(1, h, h, r), b(1, h, h, r);
    a.add(0, q.data(), k.data(), T);
    const std::ptrdiff_t ts = 3 * h * d;
    b.add(0, bgtq::strided_heads<float>{fused.data(), T, h, d, ts, d},
          bgtq::strided_heads<float>{fused.data() + h * d, T, h, d, ts, d});
    REQUIRE(b.scores() == a.scores());
  }
  SECTION("fused GQA buffer [T, Hq + 2 Hkv, D] in fp16, heads padded") {
    const int hq = 4, hkv = 2, d = 8, hstride = 12;  // each head padded to 12 elements
    const std::size_t T = 7;
    rope_layout r(d, rope_pairing::half);
    const auto raw = random_acts(62, 1, T, hq + 2 * hkv, hstride);
    std::vector<bgtq::half> fused(raw.size());
    for (std::size_t j = 0; j < raw.size(); ++j) fused[j] = bgtq::half(raw[j]);
    std::vector<bgtq::half> q(T * hq * d), k(T * hkv * d);
    const std::ptrdiff_t ts = (hq + 2 * hkv) * hstride;
    for (std::size_t t = 0; t < T; ++t) {
      for (int g = 0; g < hq; ++g)
        for (int e = 0; e < d; ++e) q[(t * hq + g) * d + e] = fused[t * ts + g * hstride + e];
      for (int g = 0; g < hkv; ++g)
        for (int e = 0; e < d; ++e) k[(t * hkv + g) * d + e] = fused[t * ts + (hq + g) * hstride + e];
    }
    energy_estimator a(1, hq, hkv, r), b(1, hq, hkv, r);
    a.add(0, q.data(), k.data(), T);
    b.add(0, bgtq::strided_heads<bgtq::half>{fused.data(), T, hq, d, ts, hstride},
          bgtq::strided_heads<bgtq::half>{fused.data() + hq * hstride, T, hkv, d, ts, hstride});
    REQUIRE(b.scores() == a.scores());
  }
}

TEST_CASE("non-finite input is reported with its position and changes nothing", "[energy]") {
  const int hq = 4, hkv = 2, d = 6;
  const std::size_t T = 9;
  rope_layout r(d, rope_pairing::interleaved);
  auto q = random_acts(71, 1, T, hq, d);
  auto k = random_acts(72, 1, T, hkv, d);
  energy_estimator est(2, hq, hkv, r);
  est.add(1, q.data(), k.data(), T);
  auto snapshot = [&] {
    std::vector<double> s;
    for (int h = 0; h < hkv; ++h)
      for (int i = 0; i < r.num_blocks(); ++i) s.push_back(est.score(1, h, i));
    return s;
  };
  const auto before = snapshot();
  auto expect_error = [&](const std::vector<float>& qq, const std::vector<float>& kk, const std::vector<std::string>& parts) {
    try {
      est.add(1, qq.data(), kk.data(), T);
      FAIL("no error");
    } catch (const bgtq::error& e) {
      INFO(e.what());
      REQUIRE(e.code() == bgtq::errc::non_finite);
      for (const auto& p : parts) REQUIRE(std::string(e.what()).find(p) != std::string::npos);
    }
    REQUIRE(est.tokens(1) == static_cast<std::int64_t>(T));
    REQUIRE(snapshot() == before);
  };
  {
    auto qq = q;
    qq[(5 * hq + 2) * d + 3] = std::numeric_limits<float>::quiet_NaN();
    qq[(7 * hq + 0) * d + 0] = std::numeric_limits<float>::quiet_NaN();  // a later one: not the one reported
    // token 5 of this call is token 14 of the layer (9 tokens were added before)
    expect_error(qq, k, {"NaN", "in q", "layer 1", "token 5 of this call", "token 14 of the layer", "head 2", "dim 3"});
  }
  {
    auto kk = k;
    kk[(8 * hkv + 1) * d + 5] = -std::numeric_limits<float>::infinity();
    expect_error(q, kk, {"Inf", "in k", "layer 1", "token 8 ", "head 1", "dim 5"});
  }
  {
    std::vector<bgtq::half> qh(q.size()), kh(k.size());
    for (std::size_t j = 0; j < q.size(); ++j) qh[j] = bgtq::half(q[j]);
    for (std::size_t j = 0; j < k.size(); ++j) kh[j] = bgtq::half(k[j]);
    kh[(0 * hkv + 0) * d + 1] = bgtq::half::from_bits(0x7e00);  // fp16 NaN
    REQUIRE_THROWS_WITH(est.add(1, qh.data(), kh.data(), T), Catch::Contains("token 0 of this call") && Catch::Contains("dim 1"));
    REQUIRE(snapshot() == before);
  }
}

TEST_CASE("a layer without tokens cannot be scored", "[energy]") {
  rope_layout r(4, rope_pairing::half);
  energy_estimator est(3, 2, 1, r);
  const std::vector<float> q(2 * 4, 1.0f), k(4, 1.0f);
  est.add(0, q.data(), k.data(), 1);
  est.add(2, q.data(), k.data(), 1);
  est.add(1, static_cast<const float*>(nullptr), static_cast<const float*>(nullptr), 0);  // zero tokens: allowed, adds nothing
  REQUIRE(est.tokens(1) == 0);
  REQUIRE(est.score(0, 0, 1) == 2.0);  // two dims of 1.0 in q and in k
  REQUIRE_THROWS_WITH(est.scores(), Catch::Contains("layer 1 has no calibration tokens"));
  REQUIRE_THROWS_AS(est.score(1, 0, 0), bgtq::error);
  REQUIRE_THROWS_AS(est.q_energy(1, 0, 0), bgtq::error);
  est.add(1, q.data(), k.data(), 1);
  REQUIRE(est.scores().size() == 3 * 1 * 2);
}

TEST_CASE("a block with zero energy scores exactly zero", "[energy]") {
  const int hq = 2, hkv = 2, d = 8;
  const std::size_t T = 11;
  rope_layout r(d, rope_pairing::half);
  auto q = random_acts(81, 1, T, hq, d);
  auto k = random_acts(82, 1, T, hkv, d);
  const auto zero_dims = r.block_dims(2);  // dims 2 and 6
  for (std::size_t t = 0; t < T; ++t) {
    for (int e : zero_dims) {
      for (int g = 0; g < hq; ++g) q[(t * hq + g) * d + e] = (g == 1 ? -0.0f : 0.0f);
      k[(t * hkv + 0) * d + e] = 0.0f;
    }
  }
  energy_estimator est(1, hq, hkv, r);
  est.add(0, q.data(), k.data(), T);
  REQUIRE(est.q_energy(0, 1, 2) == 0.0);
  REQUIRE(est.score(0, 0, 2) == 0.0);
  REQUIRE(est.score(0, 1, 2) > 0.0);  // only query head 1 was zeroed for kv head 1; key head 1 is not
  REQUIRE(est.score(0, 0, 1) > 0.0);
}

TEST_CASE("energy_estimator rejects bad shapes and arguments", "[energy]") {
  rope_layout r(8, rope_pairing::interleaved);
  using bgtq_test::error_code_of;
  using bgtq::errc;
  REQUIRE(error_code_of([&] { energy_estimator(0, 4, 2, r); }) == errc::invalid_argument);
  REQUIRE(error_code_of([&] { energy_estimator(1, 6, 4, r); }) == errc::invalid_argument);
  REQUIRE(error_code_of([&] { energy_estimator(1, 4, 0, r); }) == errc::invalid_argument);
  // q_heads within what a plan holds (build_plan would refuse it only after the whole pass)
  REQUIRE(error_code_of([&] { energy_estimator(1, bgtq::max_plan_q_heads * 2, 2, r); }) == errc::invalid_argument);
  { energy_estimator at_limit(1, bgtq::max_plan_q_heads, 2, r); }
  rope_layout bad = r;
  bad.rotary_dim = 3;
  REQUIRE(error_code_of([&] { energy_estimator(1, 4, 2, bad); }) == errc::invalid_argument);

  energy_estimator est(2, 4, 2, r);
  std::vector<float> q(5 * 4 * 8, 1.0f), k(5 * 2 * 8, 1.0f);
  auto qv = bgtq::strided_heads<float>::contiguous(q.data(), 5, 4, 8);
  auto kv = bgtq::strided_heads<float>::contiguous(k.data(), 5, 2, 8);
  REQUIRE(error_code_of([&] { est.add(2, q.data(), k.data(), 5); }) == errc::invalid_argument);
  REQUIRE(error_code_of([&] { est.add(-1, q.data(), k.data(), 5); }) == errc::invalid_argument);
  REQUIRE(error_code_of([&] { est.add(0, static_cast<const float*>(nullptr), k.data(), 5); }) == errc::invalid_argument);
  auto q_short = qv;
  q_short.tokens = 4;
  REQUIRE(error_code_of([&] { est.add(0, q_short, kv); }) == errc::shape_mismatch);
  auto q_heads = bgtq::strided_heads<float>::contiguous(q.data(), 5, 2, 8);
  REQUIRE(error_code_of([&] { est.add(0, q_heads, kv); }) == errc::shape_mismatch);
  auto k_dim = bgtq::strided_heads<float>::contiguous(k.data(), 5, 2, 6);
  REQUIRE(error_code_of([&] { est.add(0, qv, k_dim); }) == errc::shape_mismatch);
  REQUIRE(est.tokens(0) == 0);
  est.add(0, qv, kv);
  REQUIRE(est.tokens(0) == 5);
  REQUIRE(error_code_of([&] { (void)est.score(0, 2, 0); }) == errc::invalid_argument);
  REQUIRE(error_code_of([&] { (void)est.score(0, 0, 4); }) == errc::invalid_argument);
  REQUIRE(error_code_of([&] { (void)est.tokens(7); }) == errc::invalid_argument);
}

TEST_CASE("energy_estimator refuses shapes beyond what a plan holds, before allocating", "[energy]") {
  const bgtq::rope_layout rope(1024, bgtq::rope_pairing::half);
  // 2^30 layers x 4096 KV heads x 1024 dims of double sums would be std::bad_alloc
  REQUIRE_THROWS_WITH(bgtq::energy_estimator(1 << 30, 4096, 4096, rope), Catch::Contains("layers must be in 1 .. 4096"));
  REQUIRE_THROWS_WITH(bgtq::energy_estimator(1, 8192, 8192, rope), Catch::Contains("kv_heads must be in 1 .. 4096"));
  REQUIRE_THROWS_AS(bgtq::energy_estimator(0, 1, 1, rope), bgtq::error);
  REQUIRE_NOTHROW(bgtq::energy_estimator(4, 8, 2, bgtq::rope_layout(64, bgtq::rope_pairing::half)));
}
