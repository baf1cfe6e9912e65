// The paged KV cache: positions, windows, page reuse, capacity errors that leave the
// cache unchanged, the non-finite policy, and exact memory accounting.
#include <catch2/catch.hpp>

#include <bgtq/attention/decode.hpp>
#include <bgtq/attention/reference.hpp>
#include <bgtq/cache/factory.hpp>
#include <bgtq/cache/kivi_pages.hpp>

#include <cmath>
#include <limits>

#include "cache_fixtures.hpp"
#include "common.hpp"

using namespace bgtq_test;

namespace {
std::vector<float> rows(int T, int H, int D, std::uint64_t seed, float sigma = 1.0f) {
  std::vector<float> x(static_cast<std::size_t>(T) * H * D);
  fill_normal(x, seed, sigma);
  return x;
}
}  // namespace

TEST_CASE("fp16 cache returns every token at its position through sink, pages and recent window", "[cache]") {
  for (int sink : {0, 3}) {
    for (int recent : {0, 5, 70}) {
      const int D = 8, H = 2, T = 200;
      auto cache = make_fp16::build(small_config(2, H, 4, D, 8, sink, recent), 1);
      const int s = cache.add_sequence();
      const auto k = rows(T, H, D, 11), v = rows(T, H, D, 12);
      for (int l = 0; l < 2; ++l) {
        int done = 0;
        for (int n : {1, 63, 2, 70, 64}) {
          cache.append(s, l, k.data() + static_cast<std::size_t>(done) * H * D, v.data() + static_cast<std::size_t>(done) * H * D, n);
          done += n;
        }
        REQUIRE(done == T);
        REQUIRE(cache.length(s, l) == T);
      }
      const auto view = cache.view(s, 1);
      REQUIRE(view.sink == sink);
      REQUIRE(view.tail == recent);
      REQUIRE(view.quantized == T - sink - recent);
      std::vector<float> x(D);
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < H; ++h) {
          cache.decode_key(s, 1, h, t, x.data());
          for (int j = 0; j < D; ++j) {
            const float want = bgtq::half_bits_to_float(bgtq::float_to_half_bits(k[(static_cast<std::size_t>(t) * H + h) * D + j]));
            INFO("sink " << sink << " recent " << recent << " t " << t << " h " << h << " j " << j);
            REQUIRE(x[static_cast<std::size_t>(j)] == want);
          }
        }
      // the checked-once window accessor attention uses: same rows as window_key/value,
      // holding the sink tokens then the recent tail (its ring has wrapped by now)
      for (int h = 0; h < H; ++h) {
        const auto w = cache.window(s, 1, h);
        REQUIRE(w.size() == sink + recent);
        for (std::int64_t i = 0; i < w.size(); ++i) {
          REQUIRE(w.key(i) == cache.window_key(s, 1, h, i));
          REQUIRE(w.value(i) == cache.window_value(s, 1, h, i));
          const std::int64_t t = i < sink ? i : T - recent + (i - sink);
          for (int j = 0; j < D; ++j) {
            const std::size_t at = (static_cast<std::size_t>(t) * H + static_cast<std::size_t>(h)) * D + static_cast<std::size_t>(j);
            INFO("sink " << sink << " recent " << recent << " window row " << i << " h " << h << " j " << j);
            REQUIRE(w.key(i)[j] == bgtq::float_to_half_bits(k[at]));
            REQUIRE(w.value(i)[j] == bgtq::float_to_half_bits(v[at]));
          }
        }
      }
    }
  }
}

TEST_CASE("KIVI keys wait in the fp16 window until a 32-token block is complete", "[cache]") {
  const int D = 16, H = 1;
  auto cache = make_kivi::build(small_config(1, H, 2, D, 4), 4);
  const int s = cache.add_sequence();
  const auto k = rows(100, H, D, 3), v = rows(100, H, D, 4);
  cache.append(s, 0, k.data(), v.data(), 31);
  REQUIRE(cache.view(s, 0).quantized == 0);
  REQUIRE(cache.view(s, 0).tail == 31);
  cache.append(s, 0, k.data() + 31 * D, v.data() + 31 * D, 1);
  REQUIRE(cache.view(s, 0).quantized == 32);
  REQUIRE(cache.view(s, 0).tail == 0);
  cache.append(s, 0, k.data() + 32 * D, v.data() + 32 * D, 68);
  REQUIRE(cache.view(s, 0).quantized == 96);
  REQUIRE(cache.view(s, 0).tail == 4);
}

TEST_CASE("freeing a sequence returns its pages and appending reuses them", "[cache]") {
  const int D = 64, H = 2;
  auto cache = make_bgtq::build(small_config(2, H, 4, D, 6), 5);
  const auto k = rows(192, H, D, 7), v = rows(192, H, D, 8);
  const int a = cache.add_sequence();
  for (int l = 0; l < 2; ++l) cache.append(a, l, k.data(), v.data(), 192);
  REQUIRE(cache.pages_used() == 3);
  REQUIRE(cache.bytes_used() == 3 * cache.page_bytes());
  const int b = cache.add_sequence();
  for (int l = 0; l < 2; ++l) cache.append(b, l, k.data(), v.data(), 130);
  REQUIRE(cache.pages_used() == 6);
  REQUIRE(cache.pages_free() == 0);
  cache.free_sequence(a);
  REQUIRE(cache.pages_used() == 3);
  REQUIRE_FALSE(cache.has_sequence(a));
  const int c = cache.add_sequence();
  REQUIRE(c == a);  // ids are reused
  for (int l = 0; l < 2; ++l) cache.append(c, l, k.data(), v.data(), 192);
  REQUIRE(cache.pages_free() == 0);
  // the reused pages hold the new sequence's data: decode equals a fresh cache's decode
  auto fresh = make_bgtq::build(small_config(2, H, 4, D, 6), 5);
  const int f = fresh.add_sequence();
  for (int l = 0; l < 2; ++l) fresh.append(f, l, k.data(), v.data(), 192);
  std::vector<float> x(D), y(D);
  for (int t = 0; t < 192; t += 7) {
    cache.decode_key(c, 1, 1, t, x.data());
    fresh.decode_key(f, 1, 1, t, y.data());
    REQUIRE(x == y);
    cache.decode_value(c, 0, 0, t, x.data());
    fresh.decode_value(f, 0, 0, t, y.data());
    REQUIRE(x == y);
  }
}

TEST_CASE("running out of pages is an error that leaves the cache unchanged", "[cache]") {
  const int D = 8, H = 1;
  auto cache = make_bgtq::build(small_config(1, H, 1, D, 2), 6);
  const int s = cache.add_sequence();
  const auto k = rows(200, H, D, 9), v = rows(200, H, D, 10);
  cache.append(s, 0, k.data(), v.data(), 100);
  const auto used = cache.bytes_used();
  const auto pages = cache.pages_free();
  std::vector<float> before(D), after(D);
  cache.decode_key(s, 0, 0, 99, before.data());
  try {
    cache.append(s, 0, k.data(), v.data(), 100);  // needs a third page
    FAIL("no error");
  } catch (const bgtq::error& e) {
    REQUIRE(e.code() == bgtq::errc::capacity_exhausted);
    REQUIRE(std::string(e.what()).find("nothing was appended") != std::string::npos);
  }
  REQUIRE(cache.length(s, 0) == 100);
  REQUIRE(cache.bytes_used() == used);
  REQUIRE(cache.pages_free() == pages);
  cache.decode_key(s, 0, 0, 99, after.data());
  REQUIRE(before == after);
  cache.append(s, 0, k.data(), v.data(), 28);  // exactly fills two pages
  REQUIRE(cache.length(s, 0) == 128);
}

TEST_CASE("non-finite keys are rejected by default and zeroed when asked", "[cache]") {
  const int D = 8, H = 2;
  auto k = rows(3, H, D, 1), v = rows(3, H, D, 2);
  k[(1 * H + 1) * D + 3] = std::numeric_limits<float>::quiet_NaN();
  {
    auto cache = make_bgtq::build(small_config(1, H, 2, D, 2), 1);
    const int s = cache.add_sequence();
    try {
      cache.append(s, 0, k.data(), v.data(), 3);
      FAIL("no error");
    } catch (const bgtq::error& e) {
      REQUIRE(e.code() == bgtq::errc::non_finite);
      REQUIRE(std::string(e.what()).find("token 1") != std::string::npos);
      REQUIRE(std::string(e.what()).find("kv_head 1") != std::string::npos);
    }
    REQUIRE(cache.length(s, 0) == 0);
    REQUIRE(cache.pages_used() == 0);
  }
  {
    auto cfg = small_config(1, H, 2, D, 2);
    cfg.nonfinite = bgtq::nonfinite_policy::zero;
    auto cache = make_bgtq::build(cfg, 1);
    const int s = cache.add_sequence();
    cache.append(s, 0, k.data(), v.data(), 3);
    REQUIRE(cache.stats().nonfinite == 1);
    std::vector<float> x(D);
    cache.decode_key(s, 0, 1, 1, x.data());
    for (float f : x) REQUIRE(f == 0.0f);
    cache.decode_key(s, 0, 0, 1, x.data());
    bool nonzero = false;
    for (float f : x) nonzero |= (f != 0.0f);
    REQUIRE(nonzero);
  }
}

TEST_CASE("bad ids, layers and shapes are errors", "[cache]") {
  auto cache = make_fp16::build(small_config(2, 2, 4, 8, 2), 1);
  std::vector<float> k(2 * 8, 1.0f);
  REQUIRE_THROWS_AS(cache.append(0, 0, k.data(), k.data(), 1), bgtq::error);  // no sequence yet
  const int s = cache.add_sequence();
  REQUIRE_THROWS_AS(cache.append(s, 2, k.data(), k.data(), 1), bgtq::error);
  REQUIRE_THROWS_AS(cache.append(s, -1, k.data(), k.data(), 1), bgtq::error);
  REQUIRE_THROWS_AS(cache.append(s, 0, k.data(), k.data(), -1), bgtq::error);
  REQUIRE_THROWS_AS(cache.free_sequence(s + 1), bgtq::error);
  auto cfg = small_config(2, 2, 4, 8, 2);
  cfg.page_tokens = 48;  // not a multiple of 64 for the bit-plane layout
  REQUIRE_THROWS_AS(make_fp16::build(cfg, 1), bgtq::error);
  cfg = small_config(2, 2, 3, 8, 2);  // q_heads not a multiple of kv_heads
  REQUIRE_THROWS_AS(make_fp16::build(cfg, 1), bgtq::error);
  // codec states that do not match the shape
  REQUIRE_THROWS_AS(bgtq::fp16_cache<>(small_config(2, 2, 4, 8, 2), bgtq::fp16_states(1, 2, 8), bgtq::fp16_states(1, 2, 8)),
                    bgtq::error);
  REQUIRE_THROWS_AS(bgtq::fp16_cache<>(small_config(2, 2, 4, 8, 2), bgtq::fp16_states(2, 2, 16), bgtq::fp16_states(2, 2, 16)),
                    bgtq::error);
}

TEST_CASE("page codecs refuse a head_dim their kernels cannot hold", "[cache]") {
  // the KIVI page codecs hold a token's or channel's codes in arrays of max_codec_dim
  // entries, and the fp16 one steps two coordinates at a time: make() accepted 2000, 0
  // and -4 (KIVI) and 3 (fp16), and encode / accumulate then wrote or read past them
  using bgtq::errc;
  using bgtq_test::error_code_of;
  bgtq::kivi_options o;
  o.bits = 2;
  for (const int D : {0, -4, 3, 2000, bgtq::max_codec_dim + 2}) {
    INFO("head_dim " << D);
    CHECK(error_code_of([&] { (void)bgtq::kivi_key_pages::make(D, o); }) == errc::invalid_argument);
    CHECK(error_code_of([&] { (void)bgtq::kivi_value_pages::make(D, o); }) == errc::invalid_argument);
    CHECK(error_code_of([&] { (void)bgtq::fp16_pages::make(D); }) == errc::invalid_argument);
  }
  for (const int D : {2, 6, bgtq::max_codec_dim}) {
    INFO("head_dim " << D);
    CHECK(bgtq::kivi_key_pages::make(D, o).dim() == D);
    CHECK(bgtq::kivi_value_pages::make(D, o).dim() == D);
    CHECK(bgtq::fp16_pages::make(D).dim() == D);
  }
}

TEMPLATE_TEST_CASE("a moved-from cache is empty: its heads and sequences are not_found, attention refuses it", "[cache]",
                   make_bgtq, make_fp16, make_kivi) {
  const int D = 8, H = 2, T = 70;
  auto cache = TestType::build(small_config(2, H, 4, D, 4, 1, 3), 5);
  const int s = cache.add_sequence();
  const auto k = rows(T, H, D, 21), v = rows(T, H, D, 22);
  for (int l = 0; l < 2; ++l) cache.append(s, l, k.data(), v.data(), T);
  const std::size_t reserved = cache.bytes_reserved(), used = cache.bytes_used(), part = cache.head_page_bytes(1, 1);
  std::vector<float> want(D), got(D);
  cache.decode_key(s, 1, 1, 40, want.data());
  bgtq::attention_workspace ws_live(cache);
  const auto expect_empty = [&](auto& c) {
    CHECK(c.config().layers == 0);
    CHECK(c.config().kv_heads == 0);
    CHECK(c.pages_total() == 0);
    CHECK(c.pages_free() == 0);
    CHECK(c.bytes_reserved() == 0);
    CHECK(c.bytes_used() == 0);
    CHECK(c.pool().empty());
    CHECK(error_code_of([&] { (void)c.head_page_bytes(0, 0); }) == bgtq::errc::not_found);
    CHECK(error_code_of([&] { (void)c.bytes_per_token(0, 0); }) == bgtq::errc::not_found);
    CHECK(error_code_of([&] { (void)c.page_ptr(0, 0, 0); }) == bgtq::errc::not_found);
    CHECK(error_code_of([&] { (void)c.page_base(0, 0); }) == bgtq::errc::not_found);
    CHECK(error_code_of([&] { (void)c.length(s, 0); }) == bgtq::errc::not_found);
    CHECK(error_code_of([&] { c.append(s, 0, k.data(), v.data(), 1); }) == bgtq::errc::not_found);
    CHECK(error_code_of([&] { bgtq::attention_workspace ws(c); }) == bgtq::errc::invalid_argument);
    CHECK(error_code_of([&] { (void)c.add_sequence(); }) == bgtq::errc::invalid_argument);
    CHECK(c.group_size() == 0);
    // a workspace of a live cache does not fit it, and an empty batch still names the layer
    std::vector<float> q(static_cast<std::size_t>(4 * D), 0.5f), o(q.size());
    CHECK_FALSE(ws_live.fits(c));
    CHECK_FALSE(ws_live.fits(c, 0));
    CHECK(error_code_of([&] { bgtq::decode_attention(c, 0, std::span<const int>(), q.data(), o.data(), ws_live); }) ==
          bgtq::errc::not_found);
    CHECK(error_code_of([&] { bgtq::decode_attention(c, 0, std::span<const int>(&s, 1), q.data(), o.data(), ws_live); }) ==
          bgtq::errc::not_found);
    CHECK(error_code_of([&] { bgtq::reference_attention(c, 0, s, q.data(), o.data()); }) == bgtq::errc::not_found);
  };
  auto moved = std::move(cache);
  expect_empty(cache);
  REQUIRE(moved.bytes_reserved() == reserved);
  REQUIRE(moved.bytes_used() == used);
  REQUIRE(moved.head_page_bytes(1, 1) == part);
  moved.decode_key(s, 1, 1, 40, got.data());
  REQUIRE(got == want);
  cache = std::move(moved);  // move assignment, back into the moved-from cache
  expect_empty(moved);
  REQUIRE(cache.length(s, 1) == T);
  cache.decode_key(s, 1, 1, 40, got.data());
  REQUIRE(got == want);
}

TEST_CASE("memory accounting is exact", "[cache]") {
  const int D = 128, H = 8, L = 2;
  const auto p = random_plan(L, H, 32, D, bgtq::rope_pairing::half, 3, 3, 3, 9);
  auto cache = bgtq::make_bgtq_cache(p, small_config(L, H, 32, D, 4, 2, 3));
  // K3V3 at D = 128, one group: 48 B codes + 2 B radius for K and for V = 100 B per token,
  // padded per page part to 64-byte multiples: 64 * 50 = 3200 B -> 3200 B (already aligned)
  REQUIRE(cache.bytes_per_token(0, 0) == Approx(100.0));
  REQUIRE(cache.page_bytes() == static_cast<std::size_t>(L * H) * 64u * 100u);
  const int s = cache.add_sequence();
  const auto k = rows(69, H, D, 1), v = rows(69, H, D, 2);
  for (int l = 0; l < L; ++l) cache.append(s, l, k.data(), v.data(), 69);
  // 2 sink + 3 recent tokens in fp16 (K and V, every layer and head) + one page
  const std::size_t window = 5u * L * H * D * 2u * 2u;
  REQUIRE(cache.bytes_used() == cache.page_bytes() + window);
  REQUIRE(cache.bytes_reserved() >= cache.bytes_used());
  REQUIRE(cache.stats().vectors == static_cast<std::uint64_t>(64 * L * H));
  // pool(): every page of the config, nothing else; each page part lies inside it
  const auto pool = cache.pool();
  REQUIRE(pool.size() == static_cast<std::size_t>(cache.pages_total()) * cache.page_bytes());
  REQUIRE(cache.bytes_reserved() - pool.size() == 2u * L * H * (2u + 3u + 1u) * static_cast<std::size_t>(D) * 2u);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h)
      for (int pg : {0, cache.pages_total() - 1}) {
        const std::uint8_t* part = cache.page_ptr(pg, l, h);
        REQUIRE(part >= pool.data());
        REQUIRE(part + cache.head_page_bytes(l, h) <= pool.data() + pool.size());
      }
}

TEST_CASE("fp16 radii that would overflow are clamped and counted", "[cache]") {
  const int D = 8, H = 1;
  auto cache = make_tq::build(small_config(1, H, 1, D, 2), 1);
  const int s = cache.add_sequence();
  std::vector<float> k(D, 40000.0f), v(D, 1.0f);  // |k| = 113137 > 65504
  cache.append(s, 0, k.data(), v.data(), 1);
  REQUIRE(cache.stats().clamped_radii == 1);  // the one key radius (the value's norm is sqrt(8))
  std::vector<float> x(D);
  cache.decode_key(s, 0, 0, 0, x.data());
  for (float f : x) REQUIRE(std::isfinite(f));
}

TEST_CASE("a capacity error leaves the statistics unchanged too (non-finite rows not counted)", "[cache]") {
  const int D = 8;
  auto cfg = small_config(1, 1, 1, D, 1);
  cfg.nonfinite = bgtq::nonfinite_policy::zero;
  auto cache = make_bgtq::build(cfg, 3);
  const int s = cache.add_sequence();
  auto k = rows(65, 1, D, 1), v = rows(65, 1, D, 2);
  cache.append(s, 0, k.data(), v.data(), 64);  // fills the only page
  const auto before = cache.stats();
  k[64 * D + 2] = std::numeric_limits<float>::quiet_NaN();
  try {
    cache.append(s, 0, k.data() + 64 * D, v.data() + 64 * D, 1);
    FAIL("no error");
  } catch (const bgtq::error& e) {
    REQUIRE(e.code() == bgtq::errc::capacity_exhausted);
  }
  REQUIRE(cache.length(s, 0) == 64);
  REQUIRE(cache.stats().nonfinite == before.nonfinite);
  REQUIRE(cache.stats().vectors == before.vectors);
}

TEST_CASE("bytes_used counts each layer's own window when layers have different lengths", "[cache]") {
  // engines append layer by layer: mid-step, layer 0 can be a page ahead of layer 1
  const int D = 16, H = 2, L = 2;
  auto cache = make_bgtq::build(small_config(L, H, 2 * H, D, 4, 2, 3), 9);
  const int s = cache.add_sequence();
  const auto k = rows(69, H, D, 3), v = rows(69, H, D, 4);
  cache.append(s, 0, k.data(), v.data(), 69);  // 2 sink + 64 paged + 3 recent
  cache.append(s, 1, k.data(), v.data(), 4);   // 2 sink + 2 recent, nothing paged
  const std::size_t row = static_cast<std::size_t>(H) * D * 2u * 2u;  // K and V of one token, fp16
  REQUIRE(cache.bytes_used() == cache.page_bytes() + (5u + 4u) * row);
}

TEST_CASE("every page part and value part is 64-byte aligned, for odd record sizes too", "[cache]") {
  // D = 40 with random widths: record sizes that are not multiples of 64 before padding
  for (std::uint64_t seed : {5u, 6u, 7u}) {
    auto cache = make_bgtq::build(small_config(2, 2, 4, 40, 3), seed);
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < 2; ++h) {
        INFO("seed " << seed << " layer " << l << " head " << h);
        REQUIRE(cache.head_page_bytes(l, h) % 64 == 0);
        REQUIRE(cache.value_offset(l, h) % 64 == 0);
        for (int p = 0; p < cache.pages_total(); ++p) REQUIRE(reinterpret_cast<std::uintptr_t>(cache.page_ptr(p, l, h)) % 64 == 0);
      }
  }
}
