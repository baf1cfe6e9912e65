// build_plan: energies -> widths -> groups, per scope, and the radius-charging option.
#include <catch2/catch.hpp>

#include <bgtq/cache/factory.hpp>
#include <bgtq/codec/block_gtq.hpp>
#include <bgtq/plan/build.hpp>

#include <algorithm>
#include <cmath>
#include <set>

namespace {
std::vector<double> decaying_scores(int heads, int L, std::uint64_t seed) {
  bgtq::counter_rng r(seed);
  std::vector<double> s;
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < L; ++i) s.push_back(std::pow(10.0, 3.0 * i / L + 0.5 * r.normal()));
  return s;
}
int code_bits(const bgtq::head_plan& hp) {
  int b = 0;
  for (int w : hp.widths) b += 2 * w;
  return b;
}
}  // namespace

TEST_CASE("build_plan spends exactly the budget per head and groups equal widths", "[plan]") {
  const bgtq::rope_layout rope(128, bgtq::rope_pairing::half);
  const auto s = decaying_scores(2 * 4, 64, 1);
  bgtq::plan_options o;
  o.avg_bits = 2.5;
  const bgtq::plan p = bgtq::build_plan(2, 4, 16, rope, s, o, 100);
  REQUIRE(p.value_bits == 3);  // round(2.5) away from zero
  REQUIRE(p.calib_tokens == 100);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 4; ++h) {
      const auto& hp = p.head(l, h);
      REQUIRE(code_bits(hp) == 2 * 160);  // floor(2.5 * 64) bit-steps
      std::set<int> widths(hp.widths.begin(), hp.widths.end());
      REQUIRE(hp.groups.size() == widths.size());
      // more energy never gets fewer bits
      for (int i = 0; i < 64; ++i)
        for (int j = 0; j < 64; ++j)
          if (p.score(l, h, i) > p.score(l, h, j)) REQUIRE(hp.widths[static_cast<std::size_t>(i)] >= hp.widths[static_cast<std::size_t>(j)]);
    }
}

TEST_CASE("build_plan scopes share one budget per layer or model", "[plan]") {
  const bgtq::rope_layout rope(16, bgtq::rope_pairing::interleaved);
  const auto s = decaying_scores(3 * 2, 8, 2);
  for (auto scope : {bgtq::alloc_scope::layer, bgtq::alloc_scope::model}) {
    bgtq::plan_options o;
    o.avg_bits = 3;
    o.scope = scope;
    const bgtq::plan p = bgtq::build_plan(3, 2, 2, rope, s, o);
    int total = 0;
    for (const auto& hp : p.heads) total += code_bits(hp);
    REQUIRE(total == 2 * 3 * 8 * 6);
    REQUIRE(p.scope == scope);
  }
  // the totals above hold for any split of the budget (per head too): here the pools are
  // pinned. Layer 0's heads carry 1e4 x the energy: one model-wide pool moves bits to
  // layer 0, a per-layer pool cannot, and each scope's widths are greedy's over its pool's
  // concatenated blocks (pooled greedy equals it bit for bit, test_dp)
  auto loud = s;
  for (std::size_t i = 0; i < 2 * 8; ++i) loud[i] *= 1e4;
  for (auto scope : {bgtq::alloc_scope::layer, bgtq::alloc_scope::model}) {
    INFO("scope " << (scope == bgtq::alloc_scope::layer ? "layer" : "model"));
    bgtq::plan_options o;
    o.avg_bits = 3;
    o.scope = scope;
    const bgtq::plan p = bgtq::build_plan(3, 2, 2, rope, loud, o);
    const std::size_t pool = scope == bgtq::alloc_scope::layer ? 2 * 8 : 3 * 2 * 8;
    for (std::size_t first = 0; first < loud.size(); first += pool) {
      bgtq::allocation_request r;
      r.scores = std::span<const double>(loud).subspan(first, pool);
      r.budget = bgtq::budget_for(o.avg_bits, static_cast<int>(pool));
      r.b_min = o.b_min;
      r.b_max = o.b_max;
      r.distortion = bgtq::plan_distortion(o, 16);
      const auto want = bgtq::greedy_allocator::allocate(r).bits;
      std::vector<int> got;
      for (std::size_t hi = first / 8; hi < (first + pool) / 8; ++hi)
        got.insert(got.end(), p.heads[hi].widths.begin(), p.heads[hi].widths.end());
      REQUIRE(got == want);
    }
    int layer0 = 0;
    for (int h = 0; h < 2; ++h) layer0 += code_bits(p.head(0, h));
    if (scope == bgtq::alloc_scope::layer)
      REQUIRE(layer0 == 2 * 3 * 8 * 2);
    else
      REQUIRE(layer0 > 2 * 3 * 8 * 2);
  }
}

TEST_CASE("build_plan with the codebook law, infeasible and capped budgets", "[plan]") {
  const bgtq::rope_layout rope(32, bgtq::rope_pairing::half);
  const auto s = decaying_scores(1, 16, 3);
  bgtq::plan_options o;
  o.distortion = bgtq::distortion_kind::codebook;
  const bgtq::plan p = bgtq::build_plan(1, 1, 1, rope, s, o);
  REQUIRE(code_bits(p.head(0, 0)) == 2 * 48);
  REQUIRE(p.distortion == bgtq::distortion_kind::codebook);
  // the widths are the greedy allocation under the codebook's own D(b) table ...
  bgtq::allocation_request r;
  r.scores = s;
  r.budget = bgtq::budget_for(o.avg_bits, 16);
  r.b_min = o.b_min;
  r.b_max = o.b_max;
  r.distortion = bgtq::plan_distortion(o, 32);
  REQUIRE(p.head(0, 0).widths == bgtq::greedy_allocator::allocate(r).bits);
  // ... which is not 4^-b's: for some energies the two laws give different widths, so
  // an option that were ignored would show
  int differ = 0;
  for (std::uint64_t seed = 3; seed < 43; ++seed) {
    const auto s2 = decaying_scores(1, 16, seed);
    bgtq::plan_options rate4 = o;
    rate4.distortion = bgtq::distortion_kind::rate4;
    differ += bgtq::build_plan(1, 1, 1, rope, s2, o).head(0, 0).widths != bgtq::build_plan(1, 1, 1, rope, s2, rate4).head(0, 0).widths;
  }
  CHECK(differ > 0);
  o.avg_bits = 0.5;  // below b_min = 1
  try {
    (void)bgtq::build_plan(1, 1, 1, rope, s, o);
    FAIL("no error");
  } catch (const bgtq::error& e) {
    REQUIRE(e.code() == bgtq::errc::infeasible);
  }
  o.avg_bits = 8.5;  // above b_max: capped with a warning
  std::string warn;
  const bgtq::plan c = bgtq::build_plan(1, 1, 1, rope, s, o, 0, &warn);
  REQUIRE(!warn.empty());
  for (int w : c.head(0, 0).widths) REQUIRE(w == 8);
  REQUIRE_THROWS_AS(bgtq::build_plan(1, 2, 2, rope, s, o), bgtq::error);  // too few energies
}

TEST_CASE("charge_radii with avg_bits far above b_max gives the capped plan at once", "[plan]") {
  // the candidate budgets start at L * b_max, not at avg_bits * L (1e6 * 64 greedy runs per head before)
  const bgtq::rope_layout rope(128, bgtq::rope_pairing::half);
  const auto s = decaying_scores(2, 64, 3);
  bgtq::plan_options o;
  o.charge_radii = true;
  o.avg_bits = 1e6;
  const bgtq::plan huge = bgtq::build_plan(1, 2, 2, rope, s, o);
  o.avg_bits = o.b_max;
  const bgtq::plan capped = bgtq::build_plan(1, 2, 2, rope, s, o);
  for (int h = 0; h < 2; ++h) REQUIRE(huge.head(0, h).widths == capped.head(0, h).widths);
}

TEST_CASE("charge_radii keeps a head within the bytes of uniform TQ-MSE", "[plan]") {
  for (int D : {8, 64, 128}) {
    const bgtq::rope_layout rope(D, bgtq::rope_pairing::half);
    const int L = D / 2;
    const auto s = decaying_scores(6, L, static_cast<std::uint64_t>(D));
    for (double bits : {2.0, 3.0, 4.0}) {
      bgtq::plan_options o;
      o.avg_bits = bits;
      o.charge_radii = true;
      const bgtq::plan p = bgtq::build_plan(1, 6, 6, rope, s, o);
      o.charge_radii = false;
      const bgtq::plan u = bgtq::uniform_plan(1, 6, 6, rope, static_cast<int>(bits), o);
      const auto dt = bgtq::distortion_table::rate4();
      for (int h = 0; h < 6; ++h) {
        const auto& hp = p.head(0, h);
        const std::size_t nonzero = static_cast<std::size_t>(std::count_if(hp.groups.begin(), hp.groups.end(), [](const auto& g) { return g.bits > 0; }));
        // code bits + 16 bits per radius never exceed uniform TQ-MSE's
        REQUIRE(code_bits(hp) + 16 * static_cast<int>(nonzero) <= code_bits(u.head(0, h)) + 16);
        // and the objective is never worse than uniform's
        std::vector<double> sh(s.begin() + h * L, s.begin() + (h + 1) * L);
        REQUIRE(bgtq::allocation_objective(sh, hp.widths, dt) <= bgtq::allocation_objective(sh, u.head(0, h).widths, dt) + 1e-12);
        INFO("D " << D << " bits " << bits << " head " << h);
      }
    }
  }
}

TEST_CASE("charge_radii: stored bytes within uniform TQ-MSE's in bit-plane pages, not always token-major", "[plan]") {
  // The budget counts code bits and radii. Bit-plane pages store exactly that (b-bit codes
  // packed across the page's tokens); token-major pages round each group's codes up to
  // whole bytes per token, which the budget does not see (docs/integration.md).
  bgtq::counter_rng rng(77);
  int checked = 0;
  for (int D : {8, 16, 32, 64, 128})
    for (auto pairing : {bgtq::rope_pairing::half, bgtq::rope_pairing::interleaved}) {
      const bgtq::rope_layout rope(D, pairing);
      const int L = D / 2, heads = 8;
      std::vector<double> s(static_cast<std::size_t>(heads * L));
      for (double& x : s) x = std::pow(10.0, 4.0 * rng.uniform());  // random, spread over 4 decades
      for (double bits : {2.0, 3.0, 4.0}) {
        bgtq::plan_options o;
        o.avg_bits = bits;
        o.charge_radii = true;
        const bgtq::plan p = bgtq::build_plan(1, heads, heads, rope, s, o);
        const bgtq::plan u = bgtq::uniform_plan(1, heads, heads, rope, static_cast<int>(bits), o);
        for (int h = 0; h < heads; ++h) {
          INFO("D " << D << " bits " << bits << " head " << h);
          const auto c = bgtq::block_gtq_codec::from_plan(p, 0, h), cu = bgtq::block_gtq_codec::from_plan(u, 0, h);
          REQUIRE(bgtq::stored_bytes_per_token<bgtq::bit_plane_layout>(c) <=
                  bgtq::stored_bytes_per_token<bgtq::bit_plane_layout>(cu));
          ++checked;
        }
      }
    }
  REQUIRE(checked == 5 * 2 * 3 * 8);
  // token-major: D = 32, three loud blocks give widths (3, 3, 3, 1 x 13): 18 + 26 code bits
  // and two radii (76 bits) fit uniform 2-bit's 64 + 16, but token-major rounds the 3-bit
  // group's 18 bits up to 3 bytes and the 1-bit group's 26 to 4: 7 bytes of codes and 4 of
  // radii, 11 bytes a token against uniform's 10
  const bgtq::rope_layout rope(32, bgtq::rope_pairing::interleaved);
  std::vector<double> s(16, 1.0);
  s[0] = s[1] = s[2] = 100.0;
  bgtq::plan_options o;
  o.avg_bits = 2.0;
  o.charge_radii = true;
  const bgtq::plan p = bgtq::build_plan(1, 1, 1, rope, s, o);
  const bgtq::plan u = bgtq::uniform_plan(1, 1, 1, rope, 2, o);
  REQUIRE(p.head(0, 0).widths == std::vector<int>{3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  const auto c = bgtq::block_gtq_codec::from_plan(p, 0, 0), cu = bgtq::block_gtq_codec::from_plan(u, 0, 0);
  REQUIRE(bgtq::stored_bytes_per_token<bgtq::bit_plane_layout>(c) == bgtq::stored_bytes_per_token<bgtq::bit_plane_layout>(cu));
  REQUIRE(bgtq::stored_bytes_per_token<bgtq::token_major_layout>(c) == 11.0);
  REQUIRE(bgtq::stored_bytes_per_token<bgtq::token_major_layout>(cu) == 10.0);
}

TEST_CASE("a pooled budget is rounded once per pool, not once per head", "[plan]") {
  // avg 2.3 over 6 heads x 8 blocks: floor(2.3 * 48) = 110 bit-steps for the layer, where
  // rounding per head would give 6 x floor(2.3 * 8) = 108
  const bgtq::rope_layout rope(16, bgtq::rope_pairing::interleaved);
  const auto s = decaying_scores(6, 8, 9);
  bgtq::plan_options o;
  o.avg_bits = 2.3;
  o.scope = bgtq::alloc_scope::layer;
  const bgtq::plan p = bgtq::build_plan(1, 6, 6, rope, s, o);
  int steps = 0;
  for (const auto& hp : p.heads) steps += code_bits(hp) / 2;
  REQUIRE(bgtq::budget_for(2.3, 48) == 110);
  REQUIRE(steps == 110);
}

TEST_CASE("a pooled budget is never below the per-head budgets' sum (budget_for's absolute guard)", "[plan]") {
  // avg * L = 2.9999999995 per head rounds up to 3 under the 1e-9 guard; avg * 4L =
  // 11.999999998 does not: the pool got 11 bit-steps where four heads get 12, and a
  // pooled objective above the per-head one (theory.md §4 says it is never larger)
  const double avg = 0.749999999875;
  REQUIRE(bgtq::budget_for(avg, 4) == 3);
  REQUIRE(bgtq::budget_for(avg, 16) == 11);
  const bgtq::rope_layout rope(8, bgtq::rope_pairing::interleaved);
  const std::vector<double> s(16, 1.0);
  bgtq::plan_options o;
  o.avg_bits = avg;
  o.b_min = 0;
  const bgtq::plan per_head = bgtq::build_plan(1, 4, 4, rope, s, o);
  for (auto scope : {bgtq::alloc_scope::layer, bgtq::alloc_scope::model}) {
    o.scope = scope;
    const bgtq::plan pooled = bgtq::build_plan(1, 4, 4, rope, s, o);
    int steps = 0, steps_per_head = 0;
    for (const auto& hp : pooled.heads) steps += code_bits(hp) / 2;
    for (const auto& hp : per_head.heads) steps_per_head += code_bits(hp) / 2;
    REQUIRE(steps_per_head == 12);
    REQUIRE(steps == 12);
  }
}

TEST_CASE("value rotation: hadamard where head_dim is a power of two, structured elsewhere", "[plan]") {
  const bgtq::plan a = bgtq::uniform_plan(1, 1, 1, bgtq::rope_layout(128, bgtq::rope_pairing::half), 3);
  REQUIRE(a.value_rotation == bgtq::rotation_kind::hadamard);
  bgtq::plan b;
  REQUIRE_NOTHROW(b = bgtq::uniform_plan(1, 1, 1, bgtq::rope_layout(96, bgtq::rope_pairing::half), 3));
  REQUIRE(b.value_rotation == bgtq::rotation_kind::structured);
  REQUIRE_NOTHROW(bgtq::validate(b));
}

TEST_CASE("validate rejects a block that two groups claim", "[plan]") {
  bgtq::plan p = bgtq::uniform_plan(1, 1, 1, bgtq::rope_layout(8, bgtq::rope_pairing::half), 3);
  REQUIRE_NOTHROW(bgtq::validate(p));
  bgtq::group_spec twin;
  twin.bits = 3;
  twin.blocks = {2};
  twin.seed = 7;
  p.heads[0].groups.push_back(twin);
  try {
    bgtq::validate(p);
    FAIL("a block in two groups was accepted");
  } catch (const bgtq::error& e) {
    REQUIRE(e.code() == bgtq::errc::invalid_argument);
    REQUIRE(std::string(e.what()).find("block 2 appears in 2 groups") != std::string::npos);
  }
}

TEST_CASE("plan accessors: a layer, KV head or block that does not exist is not_found, naming it", "[plan]") {
  const bgtq::rope_layout rope(16, bgtq::rope_pairing::half);
  const bgtq::plan p = bgtq::uniform_plan(2, 2, 4, rope, 3);
  auto code_of = [](auto&& f) {
    try {
      (void)f();
    } catch (const bgtq::error& e) {
      return std::make_pair(e.code(), std::string(e.what()));
    }
    return std::make_pair(bgtq::errc::ok, std::string());
  };
  // (1, -1) and (0, 2) would have read another head's entry of the flat arrays
  for (const auto& lh : {std::pair{2, 0}, std::pair{-1, 0}, std::pair{1, -1}, std::pair{0, 2}}) {
    const int l = lh.first, h = lh.second;  // not a structured binding: clang before 16 cannot capture one
    INFO("layer " << l << ", KV head " << h);
    const auto [c1, m1] = code_of([&] { return p.head(l, h); });
    CHECK(c1 == bgtq::errc::not_found);
    CHECK(m1.find(l < 0 || l >= 2 ? "layer " + std::to_string(l) : "KV head " + std::to_string(h)) != std::string::npos);
    CHECK(code_of([&] { return p.value_seed(l, h); }).first == bgtq::errc::not_found);
    CHECK(code_of([&] { return p.score(l, h, 0); }).first == bgtq::errc::not_found);
    CHECK(code_of([&] { return bgtq::block_gtq_codec::from_plan(p, l, h); }).first == bgtq::errc::not_found);
  }
  CHECK(code_of([&] { return p.score(0, 0, 8); }).first == bgtq::errc::not_found);
  CHECK(code_of([&] { return p.score(0, 0, -1); }).first == bgtq::errc::not_found);
  CHECK(p.score(1, 1, 7) == 1.0);
  CHECK(p.head(1, 1).widths == p.heads[3].widths);
}
