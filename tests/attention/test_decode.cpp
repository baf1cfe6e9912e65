// Decode attention against the double-precision reference, for every codec, on awkward
// sizes, GQA ratios, batches, fp16 windows and page boundaries. Tolerance: 1e-4 relative
// to the largest output magnitude (fp32 accumulation vs double).
#include <catch2/catch.hpp>

#include <bgtq/attention/decode.hpp>
#include <bgtq/attention/reference.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>

#include "cache_fixtures.hpp"

using namespace bgtq_test;

namespace {

struct case_spec {
  int D, T, gqa, batch, sink, recent;
};

// scale: the logit scale passed to both (0 = the default 1 / sqrt(D)).
template <class Cache>
double max_rel_error(Cache& cache, const case_spec& cs, std::uint64_t seed, float scale = 0.0f) {
  const auto& cfg = cache.config();
  const int Hkv = cfg.kv_heads, Hq = cfg.q_heads, D = cfg.head_dim, L = cfg.layers;
  std::vector<int> seqs;
  bgtq::counter_rng lens(seed);
  for (int b = 0; b < cs.batch; ++b) {
    const int s = cache.add_sequence();
    seqs.push_back(s);
    const int T = cs.batch == 1 ? cs.T : 1 + static_cast<int>(lens.below(static_cast<std::uint32_t>(cs.T)));
    std::vector<float> k(static_cast<std::size_t>(T) * Hkv * D), v(k.size());
    fill_normal(k, seed * 31 + static_cast<std::uint64_t>(b), 1.0f);
    fill_normal(v, seed * 37 + static_cast<std::uint64_t>(b), 1.0f);
    for (int l = 0; l < L; ++l) {
      int done = 0;  // append in uneven chunks to cross page and block boundaries
      while (done < T) {
        const int n = std::min(T - done, 1 + static_cast<int>(lens.below(70)));
        cache.append(s, l, k.data() + static_cast<std::size_t>(done) * Hkv * D, v.data() + static_cast<std::size_t>(done) * Hkv * D, n);
        done += n;
      }
    }
  }
  std::vector<float> q(static_cast<std::size_t>(cs.batch) * Hq * D), out(q.size(), NAN), ref(static_cast<std::size_t>(Hq) * D);
  fill_normal(q, seed * 41, 1.5f);
  bgtq::attention_workspace ws(cache);
  double worst = 0;
  for (int l = 0; l < L; ++l) {
    bgtq::decode_attention(cache, l, std::span<const int>(seqs), q.data(), out.data(), ws, scale);
    for (int b = 0; b < cs.batch; ++b) {
      bgtq::reference_attention(cache, l, seqs[static_cast<std::size_t>(b)], q.data() + static_cast<std::size_t>(b) * Hq * D, ref.data(),
                                scale);
      double mag = 0, err = 0;
      for (int i = 0; i < Hq * D; ++i) {
        const double o = out[static_cast<std::size_t>(b) * Hq * D + static_cast<std::size_t>(i)];
        REQUIRE(std::isfinite(o));
        mag = std::max(mag, std::fabs(static_cast<double>(ref[static_cast<std::size_t>(i)])));
        err = std::max(err, std::fabs(o - ref[static_cast<std::size_t>(i)]));
      }
      worst = std::max(worst, err / std::max(mag, 1e-30));
    }
  }
  return worst;
}

// The cases cycle through three logit scales: the default (0 = 1 / sqrt(D)) and an
// engine's own, flatter (0.37 / sqrt(D)) and sharper (3 / sqrt(D)) than the default.
template <class Maker, class Layout = bgtq::bit_plane_layout>
void run_matrix(const std::vector<case_spec>& cases) {
  std::uint64_t seed = 100;
  int index = 0;
  for (const auto& cs : cases) {
    const int Hkv = 2;
    const auto cfg = small_config(2, Hkv, Hkv * cs.gqa, cs.D, 2 * cs.batch * ((cs.T + 63) / 64 + 1), cs.sink, cs.recent);
    auto cache = Maker::template build<Layout>(cfg, ++seed);
    const float factor[3] = {0.0f, 0.37f, 3.0f};
    const float scale = factor[index++ % 3] / std::sqrt(static_cast<float>(cs.D));
    const double e = max_rel_error(cache, cs, seed, scale);
    INFO(Maker::name << " " << Layout::name << " D=" << cs.D << " T=" << cs.T << " gqa=" << cs.gqa << " batch=" << cs.batch
                     << " sink=" << cs.sink << " recent=" << cs.recent << " scale=" << scale << " rel err=" << e);
    CHECK(e < 1e-4);
  }
}

const std::vector<case_spec> k_cases = {
    {8, 1, 1, 1, 0, 0},    {8, 54, 2, 1, 0, 0},   {64, 97, 4, 1, 0, 0},   {128, 1000, 8, 1, 0, 0},
    {128, 97, 4, 1, 4, 0}, {64, 130, 2, 1, 0, 9}, {8, 300, 1, 1, 3, 40}, {128, 200, 4, 17, 0, 0},
    {64, 70, 8, 17, 2, 3},
};

}  // namespace

TEST_CASE("decode attention matches the reference: Block-GTQ", "[attention]") { run_matrix<make_bgtq>(k_cases); }
TEST_CASE("decode attention matches the reference: uniform TQ-MSE", "[attention]") { run_matrix<make_tq>(k_cases); }
TEST_CASE("decode attention matches the reference: fp16", "[attention]") { run_matrix<make_fp16>(k_cases); }
TEST_CASE("decode attention matches the reference: KIVI", "[attention]") { run_matrix<make_kivi>(k_cases); }
TEST_CASE("decode attention matches the reference: token-major layout", "[attention]") {
  const std::vector<case_spec> few = {{8, 54, 2, 1, 0, 0}, {64, 97, 4, 3, 2, 5}, {128, 300, 8, 1, 0, 0}};
  run_matrix<make_bgtq, bgtq::token_major_layout>(few);
  run_matrix<make_kivi, bgtq::token_major_layout>(few);
}

TEST_CASE("decode attention matches the reference at every code width and GQA ratios 3 and 6", "[attention]") {
  // Odd widths: key blocks of random widths 1..8 (many groups); even: one width for all.
  // T = 200 leaves an odd number of 16-token chunks in the last page; pages of 64, 128
  // and 192 tokens.
  std::uint64_t seed = 500;
  for (int vb = 1; vb <= 8; ++vb) {
    const case_spec cs{64, 200, vb % 2 ? 3 : 6, 2, 1, 5};
    const int Hkv = 2, Hq = Hkv * cs.gqa;
    auto cfg = small_config(1, Hkv, Hq, cs.D, 2 * cs.batch * ((cs.T + 63) / 64 + 1), cs.sink, cs.recent);
    cfg.page_tokens = 64 * (1 + vb % 3);  // 64, 128, 192
    const auto p = random_plan(1, Hkv, Hq, cs.D, bgtq::rope_pairing::half, vb % 2 ? 1 : vb, vb % 2 ? 8 : vb, vb, ++seed);
    auto cache = bgtq::bgtq_cache<>(cfg, bgtq::plan_key_states(p), bgtq::plan_value_states(p));
    const double e = max_rel_error(cache, cs, seed);
    INFO("value bits " << vb << " gqa " << cs.gqa << " page " << cfg.page_tokens << " rel err " << e);
    CHECK(e < 1e-4);
  }
}

TEST_CASE("decode attention matches the reference with one 320-coordinate key group", "[attention]") {
  // Larger than the AVX2 key kernel's 256-coordinate code buffer: the per-chunk path.
  const case_spec cs{320, 150, 2, 1, 0, 3};
  const int Hkv = 2, Hq = Hkv * cs.gqa;
  const auto cfg = small_config(1, Hkv, Hq, cs.D, (cs.T + 63) / 64 + 1, cs.sink, cs.recent);
  const auto p = random_plan(1, Hkv, Hq, cs.D, bgtq::rope_pairing::interleaved, 2, 2, 3, 77);
  auto cache = bgtq::bgtq_cache<>(cfg, bgtq::plan_key_states(p), bgtq::plan_value_states(p));
  const double e = max_rel_error(cache, cs, 77);
  INFO("rel err " << e);
  CHECK(e < 1e-4);
}

TEST_CASE("key scores of 1- and 2-bit groups equal the decoded keys' dot products", "[attention]") {
  // On AVX-512 these groups are scored by table lookups over coordinate pairs (2 bits) and
  // fours (1 bit; a last pair when n % 4 == 2: gtq_pages::lut_units); elsewhere by the
  // coordinate loop. Uniform 1- and 2-bit keys and mixed 1..3-bit ones, 1..5 query heads
  // per KV head (table blocks of 4, 2 and 1 heads), pages of 64 and 128 tokens, partial
  // last chunks. Tolerance: 1e-5 of sum_j |q_j k_j| (fp32 sums in other orders than the
  // double dot product with the decoded key).
  struct spec {
    int D, lo, hi, G, P, T;
  };
  const spec specs[] = {{6, 1, 1, 1, 64, 37},   {10, 1, 1, 3, 64, 64},  {64, 1, 1, 5, 128, 100}, {130, 1, 1, 4, 64, 64},
                        {8, 2, 2, 2, 64, 20},   {128, 2, 2, 4, 64, 64}, {66, 2, 2, 5, 128, 128}, {64, 1, 2, 4, 64, 50},
                        {128, 1, 3, 3, 128, 121}};
  std::uint64_t seed = 900;
  for (const spec& sp : specs) {
    auto cfg = small_config(1, 1, sp.G, sp.D, 2);
    cfg.page_tokens = sp.P;
    const auto p = random_plan(1, 1, sp.G, sp.D, bgtq::rope_pairing::half, sp.lo, sp.hi, 3, ++seed);
    auto cache = bgtq::bgtq_cache<>(cfg, bgtq::plan_key_states(p), bgtq::plan_value_states(p));
    const int s = cache.add_sequence();
    std::vector<float> k(static_cast<std::size_t>(sp.T) * sp.D), v(k.size()), q(static_cast<std::size_t>(sp.G) * sp.D);
    fill_normal(k, seed, 1.0f);
    fill_normal(v, seed + 1, 1.0f);
    fill_normal(q, seed + 2, 1.0f);
    cache.append(s, 0, k.data(), v.data(), sp.T);
    const auto& ks = cache.key(0, 0);
    std::vector<float> qbuf(bgtq::gtq_pages::query_floats(ks, sp.G), NAN);
    bgtq::gtq_pages::prepare_query(ks, q.data(), sp.G, qbuf.data());
    const auto view = cache.view(s, 0);
    const std::uint8_t* page = cache.page_ptr(view.pages[0], 0, 0);
    std::vector<float> scores(static_cast<std::size_t>(sp.G) * sp.P, NAN), kd(static_cast<std::size_t>(sp.D));
    bgtq::gtq_pages::score_page<bgtq::bit_plane_layout>(ks, qbuf.data(), sp.G, page, sp.T, scores.data());
    double worst = 0;
    for (int t = 0; t < sp.T; ++t) {
      bgtq::gtq_pages::decode_token<bgtq::bit_plane_layout>(ks, page, t, kd.data());
      for (int h = 0; h < sp.G; ++h) {
        double dot = 0, bound = 0;
        for (int j = 0; j < sp.D; ++j) {
          const double x = static_cast<double>(q[static_cast<std::size_t>(h) * sp.D + static_cast<std::size_t>(j)]) * kd[static_cast<std::size_t>(j)];
          dot += x;
          bound += std::fabs(x);
        }
        const double got = scores[static_cast<std::size_t>(h) * sp.P + static_cast<std::size_t>(t)];
        REQUIRE(std::isfinite(got));
        worst = std::max(worst, std::fabs(got - dot) / std::max(bound, 1e-30));
      }
    }
    INFO("D " << sp.D << " widths " << sp.lo << ".." << sp.hi << " G " << sp.G << " page " << sp.P << " T " << sp.T
              << " worst error / sum |q k| " << worst);
    CHECK(worst < 1e-5);
  }
}

#if defined(BGTQ_EXPECT_SIMD)
TEST_CASE("this program runs the SIMD path its build variant asks for", "[attention]") {
  CHECK(std::string(bgtq::simd_path()) == BGTQ_EXPECT_SIMD);
}
#endif

TEST_CASE("decode attention is exact in edge cases", "[attention]") {
  const int D = 64, Hkv = 1, Hq = 4;
  SECTION("one key: the output is that value") {
    auto cache = make_fp16::build(small_config(1, Hkv, Hq, D, 2), 1);
    const int s = cache.add_sequence();
    std::vector<float> k(D), v(D), q(static_cast<std::size_t>(Hq) * D), out(q.size());
    fill_normal(k, 1);
    fill_normal(v, 2);
    fill_normal(q, 3, 50.0f);
    cache.append(s, 0, k.data(), v.data(), 1);
    bgtq::attention_workspace ws(cache);
    const int seqs[1] = {s};
    bgtq::decode_attention(cache, 0, std::span<const int>(seqs, 1), q.data(), out.data(), ws);
    std::vector<float> vd(D);
    cache.decode_value(s, 0, 0, 0, vd.data());
    for (int g = 0; g < Hq; ++g)
      for (int j = 0; j < D; ++j) REQUIRE(out[static_cast<std::size_t>(g) * D + j] == Approx(vd[j]).epsilon(1e-6));
  }
  SECTION("zero query and all-equal logits: the output is the mean value") {
    auto cache = make_bgtq::build(small_config(1, Hkv, Hq, D, 4), 2);
    const int s = cache.add_sequence();
    const int T = 150;
    std::vector<float> k(static_cast<std::size_t>(T) * D), v(k.size()), q(static_cast<std::size_t>(Hq) * D, 0.0f), out(q.size());
    fill_normal(k, 4);
    fill_normal(v, 5);
    cache.append(s, 0, k.data(), v.data(), T);
    bgtq::attention_workspace ws(cache);
    const int seqs[1] = {s};
    bgtq::decode_attention(cache, 0, std::span<const int>(seqs, 1), q.data(), out.data(), ws);
    std::vector<double> mean(D, 0.0);
    std::vector<float> vd(D);
    for (int t = 0; t < T; ++t) {
      cache.decode_value(s, 0, 0, t, vd.data());
      for (int j = 0; j < D; ++j) mean[static_cast<std::size_t>(j)] += vd[static_cast<std::size_t>(j)] / T;
    }
    for (int g = 0; g < Hq; ++g)
      for (int j = 0; j < D; ++j) REQUIRE(out[static_cast<std::size_t>(g) * D + j] == Approx(mean[static_cast<std::size_t>(j)]).margin(1e-5));
  }
  SECTION("very large logits do not overflow the online softmax") {
    auto cache = make_bgtq::build(small_config(1, Hkv, Hq, D, 8), 3);
    const int s = cache.add_sequence();
    const int T = 300;
    std::vector<float> k(static_cast<std::size_t>(T) * D), v(k.size()), q(static_cast<std::size_t>(Hq) * D), out(q.size()), ref(q.size());
    fill_normal(k, 6, 30.0f);  // logits in the thousands
    fill_normal(v, 7);
    fill_normal(q, 8, 30.0f);
    cache.append(s, 0, k.data(), v.data(), T);
    bgtq::attention_workspace ws(cache);
    const int seqs[1] = {s};
    bgtq::decode_attention(cache, 0, std::span<const int>(seqs, 1), q.data(), out.data(), ws);
    bgtq::reference_attention(cache, 0, s, q.data(), ref.data());
    for (std::size_t i = 0; i < out.size(); ++i) {
      REQUIRE(std::isfinite(out[i]));
      REQUIRE(out[i] == Approx(ref[i]).margin(1e-4));
    }
  }
}

TEST_CASE("decode attention rejects bad calls without crashing", "[attention]") {
  auto cache = make_fp16::build(small_config(1, 2, 4, 8, 2), 1);
  const int s = cache.add_sequence();
  bgtq::attention_workspace ws(cache);
  std::vector<float> q(4 * 8, 1.0f), out(q.size());
  const int empty[1] = {s};
  REQUIRE_THROWS_AS(bgtq::decode_attention(cache, 0, std::span<const int>(empty, 1), q.data(), out.data(), ws), bgtq::error);
  const int missing[1] = {s + 5};
  REQUIRE_THROWS_AS(bgtq::decode_attention(cache, 0, std::span<const int>(missing, 1), q.data(), out.data(), ws), bgtq::error);
  auto other = make_fp16::build(small_config(1, 2, 8, 8, 2), 1);
  bgtq::attention_workspace wrong(other);
  std::vector<float> k(2 * 8, 1.0f);
  cache.append(s, 0, k.data(), k.data(), 1);
  REQUIRE_THROWS_AS(bgtq::decode_attention(cache, 0, std::span<const int>(empty, 1), q.data(), out.data(), wrong), bgtq::error);
}

TEST_CASE("decode attention on a thread pool equals the single-threaded call bit for bit", "[attention]") {
  const int D = 64, Hkv = 4, Hq = 16, B = 5;
  auto cache = make_bgtq::build(small_config(1, Hkv, Hq, D, 40, 2, 3), 11);
  std::vector<int> seqs;
  for (int b = 0; b < B; ++b) {
    const int s = cache.add_sequence();
    seqs.push_back(s);
    std::vector<float> k(static_cast<std::size_t>(100 + 37 * b) * Hkv * D), v(k.size());
    fill_normal(k, 70 + static_cast<std::uint64_t>(b));
    fill_normal(v, 80 + static_cast<std::uint64_t>(b));
    cache.append(s, 0, k.data(), v.data(), 100 + 37 * b);
  }
  std::vector<float> q(static_cast<std::size_t>(B) * Hq * D), one(q.size()), many(q.size(), NAN);
  fill_normal(q, 90);
  bgtq::attention_workspace ws(cache);
  bgtq::decode_attention(cache, 0, std::span<const int>(seqs), q.data(), one.data(), ws);
  // an explicit scale reaches the pool's tasks as it reaches the single-threaded loop
  const float scale = 0.5f / std::sqrt(static_cast<float>(D));
  std::vector<float> one_scaled(q.size()), many_scaled(q.size(), NAN);
  bgtq::decode_attention(cache, 0, std::span<const int>(seqs), q.data(), one_scaled.data(), ws, scale);
  REQUIRE(std::memcmp(one.data(), one_scaled.data(), one.size() * sizeof(float)) != 0);
  for (int threads : {1, 2, 3}) {
    bgtq::thread_pool pool(threads);
    std::vector<bgtq::attention_workspace> wss;
    for (int i = 0; i < threads; ++i) wss.emplace_back(cache);
    for (int rep = 0; rep < 3; ++rep) {
      std::fill(many.begin(), many.end(), NAN);
      bgtq::decode_attention(cache, 0, std::span<const int>(seqs), q.data(), many.data(), pool,
                             std::span<bgtq::attention_workspace>(wss));
      REQUIRE(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)) == 0);
    }
    bgtq::decode_attention(cache, 0, std::span<const int>(seqs), q.data(), many_scaled.data(), pool,
                           std::span<bgtq::attention_workspace>(wss), scale);
    REQUIRE(std::memcmp(one_scaled.data(), many_scaled.data(), one.size() * sizeof(float)) == 0);
    std::vector<bgtq::attention_workspace> too_few;
    if (threads > 1) REQUIRE_THROWS_AS(bgtq::decode_attention(cache, 0, std::span<const int>(seqs), q.data(), many.data(), pool,
                                                              std::span<bgtq::attention_workspace>(too_few)),
                                       bgtq::error);
  }
}

TEST_CASE("workspace buffers are aligned, disjoint, 4K-staggered, and survive copies and moves", "[attention]") {
  const int D = 40, Hkv = 2, Hq = 6;
  auto cache = make_bgtq::build(small_config(1, Hkv, Hq, D, 64, 2, 5), 5);
  const int s = cache.add_sequence();
  std::vector<float> k(static_cast<std::size_t>(300) * Hkv * D), v(k.size());
  fill_normal(k, 1);
  fill_normal(v, 2);
  cache.append(s, 0, k.data(), v.data(), 300);
  std::vector<float> q(static_cast<std::size_t>(Hq) * D), want(q.size()), got(q.size());
  fill_normal(q, 3);
  const int seqs[1] = {s};
  bgtq::attention_workspace ws(cache);
  const bgtq::scratch_span b[] = {ws.qbuf, ws.acc, ws.scores, ws.weights, ws.tmp, ws.raw, ws.outbuf, ws.wscores, ws.row};
  for (std::size_t i = 0; i < std::size(b); ++i) {
    INFO("buffer " << i);
    REQUIRE(!b[i].empty());
    REQUIRE(reinterpret_cast<std::uintptr_t>(b[i].data()) % 64 == 0);
    REQUIRE(reinterpret_cast<std::uintptr_t>(b[i].data()) % 4096 == (reinterpret_cast<std::uintptr_t>(b[0].data()) + 448 * i) % 4096);
    if (i > 0) REQUIRE(b[i - 1].end() <= b[i].begin());
  }
  REQUIRE(ws.bytes() >= (b[8].end() - b[0].begin()) * sizeof(float));
  bgtq::decode_attention(cache, 0, std::span<const int>(seqs, 1), q.data(), want.data(), ws);
  bgtq::attention_workspace copy(ws);  // its own arena, not ws's
  REQUIRE(copy.scores.data() != ws.scores.data());
  std::vector<bgtq::attention_workspace> moved;
  moved.push_back(std::move(copy));
  moved.push_back(moved.front());  // copy, then the vector grows (moves)
  bgtq::attention_workspace assigned;
  assigned = moved.back();
  ws = bgtq::attention_workspace(cache);
  for (bgtq::attention_workspace* w : {&ws, &moved[0], &moved[1], &assigned}) {
    std::fill(got.begin(), got.end(), NAN);
    bgtq::decode_attention(cache, 0, std::span<const int>(seqs, 1), q.data(), got.data(), *w);
    for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == want[i]);
  }
}
