// Bad-input contract (docs/errors.md), cache and codec rows: one TEST_CASE per row.
#include <bgtq/attention/decode.hpp>
#include <bgtq/cache/factory.hpp>
#include <bgtq/codec/block_gtq.hpp>
#include <bgtq/codec/tq_quantizer.hpp>
#include <bgtq/plan/build.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>

#include "cache_util.hpp"
#include "errors_util.hpp"

using namespace errors_test;
using bgtq::errc;

namespace {

constexpr float nan_f = std::numeric_limits<float>::quiet_NaN();
constexpr float inf_f = std::numeric_limits<float>::infinity();

//! Every decoded key and value of (seq, layer), all heads, flattened.
template <class Cache>
std::vector<float> snapshot(const Cache& c, int seq, int layer) {
  const int D = c.config().head_dim;
  std::vector<float> out, x(static_cast<std::size_t>(D));
  for (int h = 0; h < c.config().kv_heads; ++h)
    for (std::int64_t t = 0; t < c.length(seq, layer); ++t) {
      c.decode_key(seq, layer, h, t, x.data());
      out.insert(out.end(), x.begin(), x.end());
      c.decode_value(seq, layer, h, t, x.data());
      out.insert(out.end(), x.begin(), x.end());
    }
  return out;
}

double norm(const std::vector<float>& x) {
  double s = 0;
  for (float v : x) s += static_cast<double>(v) * v;
  return std::sqrt(s);
}

}  // namespace

TEST_CASE("errors row 4: a cache whose shape does not match the plan (layers, KV heads, D) is a shape_mismatch",
          "[errors]") {
  const auto p = make_plan(2, 2, 4, 8, {3, 1, 4, 2}, 3, 1);
  REQUIRE_NOTHROW(bgtq::make_bgtq_cache(p, config(2, 2, 4, 8, 2)));
  require_error([&] { (void)bgtq::make_bgtq_cache(p, config(3, 2, 4, 8, 2)); }, errc::shape_mismatch,
                {"the cache is 3 layers x 2 KV heads (4 query heads), head_dim 8; the plan is 2 x 2 (4), head_dim 8"});
  require_error([&] { (void)bgtq::make_bgtq_cache(p, config(2, 1, 2, 8, 2)); }, errc::shape_mismatch,
                {"the cache is 2 layers x 1 KV heads"});
  require_error([&] { (void)bgtq::make_bgtq_cache(p, config(2, 2, 4, 16, 2)); }, errc::shape_mismatch,
                {"head_dim 16; the plan is 2 x 2 (4), head_dim 8"});
  // the same (layer, head) count in another shape, and other query heads: refused too
  require_error([&] { (void)bgtq::make_bgtq_cache(p, config(4, 1, 2, 8, 2)); }, errc::shape_mismatch,
                {"the cache is 4 layers x 1 KV heads"});
  require_error([&] { (void)bgtq::make_bgtq_cache(p, config(2, 2, 8, 8, 2)); }, errc::shape_mismatch,
                {"(8 query heads)"});
  // the cache's own check of the state count (states built elsewhere)
  require_error([&] { (void)bgtq::bgtq_cache<>(config(3, 2, 4, 8, 2), bgtq::plan_key_states(p), bgtq::plan_value_states(p)); },
                errc::shape_mismatch, {"4 key and 4 value codec states for 6 (layer, KV head) pairs"});
  // a head plan applied to another head geometry
  require_error([&] { (void)bgtq::block_gtq_codec(p.head(0, 0), bgtq::rope_layout(16, bgtq::rope_pairing::half), {}); },
                errc::shape_mismatch, {"4 widths for 8 RoPE blocks"});
  // a hand-built head plan whose groups do not cover the layout's blocks exactly once: a
  // block past the layout (append would read outside the token's row), a block in two
  // groups, a block in none, a group whose bits differ from its blocks' widths
  {
    const bgtq::rope_layout rope(8, bgtq::rope_pairing::half);
    const auto bad = [&](auto edit, const char* needle) {
      bgtq::head_plan hp = bgtq::make_head_plan({3, 3, 3, 3}, 7);
      edit(hp);
      require_error([&] { (void)bgtq::block_gtq_codec(hp, rope, {}); }, errc::invalid_argument, {needle});
    };
    bad([](bgtq::head_plan& hp) { hp.groups[0].blocks.push_back(40); }, "block 40 is out of range");
    bad([](bgtq::head_plan& hp) { hp.groups.push_back(hp.groups[0]); }, "out of order");
    bad([](bgtq::head_plan& hp) { hp.groups[0].blocks.pop_back(); }, "block 3 appears in 0 groups");
    bad([](bgtq::head_plan& hp) { hp.groups[0].bits = 2; }, "has width 3 but the group has 2");
    // and a page size the layout cannot hold, in the byte accounting too
    const bgtq::block_gtq_codec codec(bgtq::make_head_plan({3, 3, 3, 3}, 7), rope, {});
    for (const int P : {0, -64, 10, 8192}) {
      const std::string needle = "page_tokens " + std::to_string(P) + " must be a multiple of 64";
      require_error([&] { (void)bgtq::stored_bytes_per_token(codec, P); }, errc::invalid_argument, {needle.c_str()});
    }
    CHECK(bgtq::stored_bytes_per_token(codec, 64) > 0.0);
  }
  // fp16 and KIVI states built for another shape
  require_error([] { (void)bgtq::fp16_cache<>(config(2, 2, 4, 8, 2), bgtq::fp16_states(2, 2, 6), bgtq::fp16_states(2, 2, 6)); },
                errc::shape_mismatch, {"head_dim 6/6, cache has 8"});
}

TEST_CASE("errors row 12: an append past the page pool's capacity is capacity_exhausted and changes nothing",
          "[errors]") {
  const int D = 8, H = 2;
  auto cache = gtq_cache(config(1, H, 2, D, 2, 1, 3), 12);
  const int s = cache.add_sequence();
  const auto k = rows(300, H, D, 1), v = rows(300, H, D, 2);
  cache.append(s, 0, k.data(), v.data(), 100);  // 1 sink + 96 in pages (2 pages) + 3 recent
  const auto before = snapshot(cache, s, 0);
  const auto used = cache.bytes_used();
  const auto vectors = cache.stats().vectors;
  require_error([&] { cache.append(s, 0, k.data(), v.data(), 40); }, errc::capacity_exhausted,
                {"sequence 0 needs 1 more page(s) of 64 tokens", "0 of 2 are free", "nothing was appended"});
  REQUIRE(cache.length(s, 0) == 100);
  REQUIRE(cache.pages_free() == 0);
  REQUIRE(cache.bytes_used() == used);
  REQUIRE(cache.stats().vectors == vectors);
  REQUIRE(snapshot(cache, s, 0) == before);
  // a second sequence cannot get a page either, and what fits still goes in
  const int s2 = cache.add_sequence();
  require_error([&] { cache.append(s2, 0, k.data(), v.data(), 68); }, errc::capacity_exhausted);
  REQUIRE(cache.length(s2, 0) == 0);
  cache.append(s2, 0, k.data(), v.data(), 4);  // 1 sink + 3 recent: no page needed
  REQUIRE(cache.length(s2, 0) == 4);
  cache.append(s, 0, k.data(), v.data(), 29);  // fills the second page exactly
  REQUIRE(cache.length(s, 0) == 129);
}

TEST_CASE("errors row 13: a sequence id that does not exist is not_found everywhere", "[errors]") {
  const int D = 8;
  auto cache = gtq_cache(config(2, 1, 2, D, 2), 13);
  const auto k = rows(2, 1, D, 3);
  const int s = cache.add_sequence();
  cache.append(s, 0, k.data(), k.data(), 2);
  std::vector<float> x(D), q(2 * D, 1.0f);
  for (const int bad : {-1, 1, 7, 1 << 30}) {
    require_error([&] { cache.append(bad, 0, k.data(), k.data(), 1); }, errc::not_found,
                  {("sequence " + std::to_string(bad) + " does not exist").c_str()});
    require_error([&] { cache.free_sequence(bad); }, errc::not_found);
    require_error([&] { (void)cache.length(bad); }, errc::not_found);
    require_error([&] { cache.decode_key(bad, 0, 0, 0, x.data()); }, errc::not_found);
    require_error([&] { cache.decode_value(s, 0, 0, 0, nullptr); }, errc::invalid_argument, {"null buffer"});
    require_error([&] { (void)attend(cache, 0, bad, q); }, errc::not_found);
  }
  // a freed id is gone too (until add_sequence reuses it)
  cache.free_sequence(s);
  require_error([&] { cache.append(s, 0, k.data(), k.data(), 1); }, errc::not_found, {"sequence 0 does not exist"});
  REQUIRE(cache.pages_free() == 2);
  // layers and heads that do not exist
  const int s2 = cache.add_sequence();
  require_error([&] { cache.append(s2, 2, k.data(), k.data(), 1); }, errc::not_found, {"layer 2 does not exist (layers: 2)"});
  require_error([&] { (void)cache.key(0, 1); }, errc::not_found, {"no (layer 0, kv_head 1)"});
  // the raw accessors: a page outside the pool, a window token or head that does not exist
  cache.append(s2, 0, k.data(), k.data(), 2);  // no window here: both tokens are in a page
  require_error([&] { (void)cache.page_ptr(2, 0, 0); }, errc::not_found, {"page 2 outside the pool [0, 2)"});
  require_error([&] { (void)cache.page_ptr(-1, 0, 0); }, errc::not_found);
  require_error([&] { (void)cache.window_key(s2, 0, 0, 0); }, errc::not_found, {"the window holds 0"});
  auto wc = gtq_cache(config(1, 2, 4, D, 2, 1, 3), 14);
  const int ws = wc.add_sequence();
  const auto k2 = rows(2, 2, D, 4);
  wc.append(ws, 0, k2.data(), k2.data(), 2);  // 1 sink + 1 recent
  REQUIRE(wc.window_key(ws, 0, 1, 1) != nullptr);
  require_error([&] { (void)wc.window_key(ws, 0, 2, 0); }, errc::not_found, {"no (layer 0, kv_head 2)"});
  require_error([&] { (void)wc.window_value(ws, 0, -1, 0); }, errc::not_found);
  require_error([&] { (void)wc.window_value(ws, 0, 0, 2); }, errc::not_found, {"window token 2", "the window holds 2"});
  require_error([&] { (void)wc.window_key(ws, 0, 0, -1); }, errc::not_found);
  // the checked-once window view: its arguments are checked like the accessors'
  REQUIRE(wc.window(ws, 0, 1).size() == 2);
  REQUIRE(wc.window(ws, 0, 1).key(1) == wc.window_key(ws, 0, 1, 1));
  require_error([&] { (void)wc.window(ws, 0, 2); }, errc::not_found, {"no (layer 0, kv_head 2)"});
  require_error([&] { (void)wc.window(ws, 1, 0); }, errc::not_found, {"layer 1 does not exist"});
  require_error([&] { (void)wc.window(ws + 9, 0, 0); }, errc::not_found, {"does not exist"});
}

TEST_CASE("errors: bad sizes are bgtq::errors naming the value, also for a pool no machine holds", "[errors]") {
  require_error([] { (void)gtq_cache(config(1, 1, 2, 8, 2, -1), 1); }, errc::invalid_argument, {"sink = -1"});
  require_error([] { (void)gtq_cache(config(1, 1, 2, 8, 2, 0, 1 << 30), 1); }, errc::invalid_argument, {"recent = 1073741824"});
  require_error([] { (void)gtq_cache(config(1, 1, 2, 8, -3), 1); }, errc::invalid_argument, {"max_pages = -3"});
  require_error([] { (void)bgtq::fp16_cache<>(config(1, 1, 2, 7, 2), bgtq::fp16_states(1, 1, 8), bgtq::fp16_states(1, 1, 8)); },
                errc::invalid_argument, {"head_dim = 7 (must be even"});
  // 2^31 - 1 pages of an fp16 cache at D = 1024 (8 MiB per page over 32 heads): 16 PiB, refused
  // with its size (not std::bad_alloc, which AddressSanitizer would turn into an abort)
  require_error([] { (void)bgtq::fp16_cache<>(config(4, 8, 8, 1024, std::numeric_limits<int>::max()),
                                             bgtq::fp16_states(4, 8, 1024), bgtq::fp16_states(4, 8, 1024)); },
                errc::capacity_exhausted, {"beyond the pool limit of"});
  // a pool whose size wraps around 2^64 (2048 x 8 parts of 16 MiB per page, 2^26 pages =
  // 2^64 bytes exactly): refused the same way, not a tiny pool written out of bounds
  require_error([] { (void)bgtq::fp16_cache<>(config(2048, 8, 8, 1024, 1 << 26, 0, 0, 4096),
                                             bgtq::fp16_states(2048, 8, 1024), bgtq::fp16_states(2048, 8, 1024)); },
                errc::capacity_exhausted, {"beyond the pool limit of"});
  // under AddressSanitizer (whose allocator aborts above 1 TiB) a 2 TiB pool (2^23 pages
  // of 256 KiB at D = 1024, one head) is refused up front, not an abort; a plain build
  // would try to allocate it, which depends on the machine's overcommit policy
  if constexpr (BGTQ_ASAN)
    require_error([] { (void)bgtq::fp16_cache<>(config(1, 1, 1, 1024, 1 << 23), bgtq::fp16_states(1, 1, 1024), bgtq::fp16_states(1, 1, 1024)); },
                  errc::capacity_exhausted, {"beyond the pool limit of 1 TiB"});
  // q_heads beyond a plan's 65536 and a nonfinite policy that is not one: refused
  require_error([] { (void)bgtq::fp16_cache<>(config(1, 1, 1 << 20, 8, 2), bgtq::fp16_states(1, 1, 8), bgtq::fp16_states(1, 1, 8)); },
                errc::invalid_argument, {"q_heads = 1048576 (must be at most 65536)"});
  require_error(
      [] {
        bgtq::cache_config c = config(1, 1, 2, 8, 2);
        c.nonfinite = static_cast<bgtq::nonfinite_policy>(7);
        (void)gtq_cache(c, 1);
      },
      errc::invalid_argument, {"nonfinite = 7 is not a nonfinite_policy"});
  require_error([] { (void)bgtq::uniform_plan(1, -1, 2, bgtq::rope_layout(8, bgtq::rope_pairing::half), 3); },
                errc::invalid_argument, {"kv_heads = -1"});
  require_error([] { (void)bgtq::fp16_states(-1, 8, 128); }, errc::invalid_argument, {"layers = -1"});
  // an empty pool is a valid cache (engines build one to size pages before the real one)
  const auto empty = gtq_cache(config(2, 1, 2, 8, 0), 1);
  REQUIRE(empty.page_bytes() > 0);
  REQUIRE(empty.pool().empty());
}

TEST_CASE("errors row 14: non-finite keys or values are rejected by default, naming token, head and K/V", "[errors]") {
  const int D = 8, H = 2;
  auto k = rows(70, H, D, 4), v = rows(70, H, D, 5);
  auto run = [&](auto cache) {
    const int s = cache.add_sequence();
    cache.append(s, 0, k.data(), v.data(), 3);
    const auto before = snapshot(cache, s, 0);
    const int pages = cache.pages_used();
    auto k2 = k, v2 = v;
    v2[(static_cast<std::size_t>(66) * H + 1) * D + 5] = nan_f;  // chunk row 63, token 66
    require_error([&] { cache.append(s, 0, k2.data() + 3 * H * D, v2.data() + 3 * H * D, 67); }, errc::non_finite,
                  {"value of token 66 (chunk row 63), layer 0, kv_head 1 is not finite", "nothing was appended"});
    k2[1 * D + 0] = -inf_f;  // chunk row 0, head 1
    require_error([&] { cache.append(s, 0, k2.data(), v.data(), 1); }, errc::non_finite, {"key of token 3", "kv_head 1"});
    REQUIRE(cache.length(s, 0) == 3);
    REQUIRE(cache.pages_used() == pages);
    REQUIRE(cache.stats().nonfinite == 0);
    REQUIRE(snapshot(cache, s, 0) == before);
  };
  run(gtq_cache(config(1, H, 2, D, 2, 1, 1), 14));
  run(half_cache(config(1, H, 2, D, 2)));
  run(kivi(config(1, H, 2, D, 2), 2, false));
}

TEST_CASE("errors row 15: with nonfinite_policy::zero a non-finite vector is stored as zero and counted", "[errors]") {
  const int D = 8, H = 2, T = 80;
  auto k = rows(T, H, D, 6), v = rows(T, H, D, 7);
  // token 0 goes to the sink, token 40 to a page, token 79 stays in the recent window
  for (const int t : {0, 40, 79}) {
    k[(static_cast<std::size_t>(t) * H + 1) * D + 2] = nan_f;
    v[(static_cast<std::size_t>(t) * H + 0) * D + 7] = inf_f;
  }
  auto cfg = config(1, H, 4, D, 2, 1, 4);
  cfg.nonfinite = bgtq::nonfinite_policy::zero;
  auto cache = gtq_cache(cfg, 15);
  const int s = cache.add_sequence();
  cache.append(s, 0, k.data(), v.data(), T);
  REQUIRE(cache.stats().nonfinite == 6);  // 3 keys + 3 values
  std::vector<float> x(D);
  for (const int t : {0, 40, 79}) {
    cache.decode_key(s, 0, 1, t, x.data());
    for (float f : x) REQUIRE(f == 0.0f);
    cache.decode_value(s, 0, 0, t, x.data());
    for (float f : x) REQUIRE(f == 0.0f);
    cache.decode_key(s, 0, 0, t, x.data());  // the finite neighbours are kept
    REQUIRE(norm(x) > 0.1);
  }
  const auto q = rows(1, 4, D, 8);
  REQUIRE(all_finite(attend(cache, 0, s, q)));  // no NaN reached the cache
}

TEST_CASE("errors row 16: zero vectors store radius 0, decode to exact zeros and are counted", "[errors]") {
  const int D = 16, H = 1, T = 70;
  auto k = rows(T, H, D, 9), v = rows(T, H, D, 10);
  std::fill(k.begin() + 5 * D, k.begin() + 6 * D, 0.0f);  // key 5 entirely zero
  std::fill(v.begin() + 5 * D, v.begin() + 6 * D, 0.0f);
  for (int j = 0; j < D; ++j) k[static_cast<std::size_t>(9 * D + j)] = 1e-38f;  // squared norm underflows
  auto cache = gtq_cache(config(1, H, 2, D, 2), 16);
  const int s = cache.add_sequence();
  cache.append(s, 0, k.data(), v.data(), T);
  const auto groups = cache.key(0, 0).codec.groups().size();
  REQUIRE(groups == 4);
  REQUIRE(cache.stats().zero_vectors == 2 * groups + 1);  // every key group of tokens 5 and 9, and value 5
  std::vector<float> x(D);
  cache.decode_key(s, 0, 0, 5, x.data());
  for (float f : x) REQUIRE(f == 0.0f);
  cache.decode_value(s, 0, 0, 5, x.data());
  for (float f : x) REQUIRE(f == 0.0f);
  cache.decode_key(s, 0, 0, 9, x.data());
  for (float f : x) REQUIRE(std::fabs(f) <= 1e-37f);
  // an all-zero sequence gives uniform weights over zero values: exactly zero output
  auto z = gtq_cache(config(1, H, 2, D, 2), 16);
  const int sz = z.add_sequence();
  const std::vector<float> zeros(static_cast<std::size_t>(T) * D, 0.0f);
  z.append(sz, 0, zeros.data(), zeros.data(), T);
  const auto out = attend(z, 0, sz, rows(1, 2, D, 11));
  for (float f : out) REQUIRE(f == 0.0f);
}

TEST_CASE("errors row 17: fp16 radii of norms above 65504 are clamped to 65504 and counted", "[errors]") {
  const int D = 8;
  for (const float big : {5e4f, 1e6f, 1e30f, 3e38f}) {
    INFO("components " << big);
    std::vector<float> k(D, big), v(D, 1.0f);
    k[3] = -big;
    auto cache = gtq_cache(config(1, 1, 1, D, 1), 17);
    const int s = cache.add_sequence();
    cache.append(s, 0, k.data(), v.data(), 1);
    REQUIRE(cache.key(0, 0).codec.groups().size() == 4);  // four 2-D key groups: |group| = big*sqrt(2) > 65504
    REQUIRE(cache.stats().clamped_radii == 4);
    std::vector<float> x(D);
    cache.decode_key(s, 0, 0, 0, x.data());
    REQUIRE(all_finite(x));
    REQUIRE(norm(x) <= 2 * 65504.0 * 1.5);  // each group's stored radius is 65504 (times |c(idx)|)
    REQUIRE(norm(x) >= 0.5 * 2 * 65504.0);
    REQUIRE(x[3] < 0.0f);  // the direction survives the clamp
    REQUIRE(x[0] > 0.0f);
    REQUIRE(all_finite(attend(cache, 0, s, std::vector<float>(D, 1.0f))));
    // values: one 8-D group with its own fp16 radius, clamped and counted the same way
    auto vcache = gtq_cache(config(1, 1, 1, D, 1), 17);
    const int sv = vcache.add_sequence();
    vcache.append(sv, 0, v.data(), k.data(), 1);
    REQUIRE(vcache.stats().clamped_radii == 1);
    vcache.decode_value(sv, 0, 0, 0, x.data());
    REQUIRE(all_finite(x));
    REQUIRE(norm(x) <= 65504.0 * 1.5);
    REQUIRE(norm(x) >= 0.5 * 65504.0);
  }
}

TEST_CASE("errors row 18: fp32 radii keep norms up to 2^100 exactly, and saturate there beyond", "[errors]") {
  const int D = 8;
  // Scaling by a power of two is exact through the encoder (direction, norm, fp32
  // radius) and the decoder, so a token with components +-2^e decodes to exactly 2^e
  // times the same token with components +-1: any clamp, rounding or narrower store of
  // the large radii shows as a mismatch.
  auto decoded = [&](float c) {
    std::vector<float> k(D, c), v(D, c);
    k[3] = -c;
    auto cache = gtq_cache(config(1, 1, 1, D, 1), 18, bgtq::radius_format::fp32);
    const int s = cache.add_sequence();
    cache.append(s, 0, k.data(), v.data(), 1);
    REQUIRE(cache.stats().clamped_radii == 0);
    std::vector<float> x(2 * D);
    cache.decode_key(s, 0, 0, 0, x.data());
    cache.decode_value(s, 0, 0, 0, x.data() + D);
    return x;
  };
  const auto unit = decoded(1.0f);
  REQUIRE(norm(std::vector<float>(unit.begin(), unit.begin() + D)) == Approx(std::sqrt(8.0)).epsilon(0.3));  // a 2-bit-ish decode
  for (const int e : {20, 98}) {  // components ~1e6 and ~3.2e29 (norms up to 2^99.5)
    INFO("components 2^" << e);
    const auto x = decoded(std::ldexp(1.0f, e));
    for (int j = 0; j < 2 * D; ++j) REQUIRE(x[static_cast<std::size_t>(j)] == std::ldexp(unit[static_cast<std::size_t>(j)], e));
    REQUIRE(x[3] < 0.0f);
  }
  // a norm above 2^100 (here components near 3.4e38, whose squares overflow float) is
  // stored as 2^100 and counted; the direction is kept, and the decodes and the attention
  // over such tokens stay finite (at FLT_MAX the value's 8-D rotation overflowed to NaN)
  std::vector<float> k(2 * D, 3e38f), v(2 * D, -3e38f);
  k[3] = k[D + 3] = -3e38f;
  v[5] = v[D + 5] = 2e38f;
  auto cache = gtq_cache(config(1, 1, 1, D, 1), 18, bgtq::radius_format::fp32);
  const int s = cache.add_sequence();
  cache.append(s, 0, k.data(), v.data(), 2);
  REQUIRE(cache.stats().clamped_radii == 2 * (4 + 1));  // per token: four 2-D key groups and the 8-D value
  std::vector<float> x(D), y(D);
  cache.decode_key(s, 0, 0, 0, x.data());
  cache.decode_value(s, 0, 0, 0, y.data());
  for (int j = 0; j < D; ++j) {
    REQUIRE(std::isfinite(x[static_cast<std::size_t>(j)]));
    REQUIRE(std::isfinite(y[static_cast<std::size_t>(j)]));
  }
  REQUIRE(x[3] < -1e29f);
  REQUIRE(x[0] > 1e29f);
  REQUIRE(y[0] < -1e28f);
  std::vector<float> q(D, 1e-30f), out(D);  // scores of order 1: a finite softmax
  bgtq::attention_workspace ws(cache);
  bgtq::decode_attention(cache, 0, std::span<const int>(&s, 1), q.data(), out.data(), ws);
  for (int j = 0; j < D; ++j) REQUIRE(std::isfinite(out[static_cast<std::size_t>(j)]));
  REQUIRE(out[0] < -1e28f);
}

TEST_CASE("errors row 18: attention over the largest fp32 value radii stays finite when scores jump", "[errors]") {
  // Decode attention's running sums hold softmax weights times value radii. A radius may
  // be 2^100; the sums stay finite for up to 2^24 such tokens only if every weight is at
  // most 1, i.e. the running max is raised as soon as a score beats it. (Raising it only
  // past a margin of 16 let weights reach e^16 ~ 2^23: this case gave an all-NaN output.)
  const int D = 64;
  bgtq::plan_options o;
  o.value_bits = 8;
  o.key_radius = bgtq::radius_format::fp32;
  o.value_radius = bgtq::radius_format::fp32;
  const auto p = bgtq::uniform_plan(1, 1, 1, bgtq::rope_layout(D, bgtq::rope_pairing::half), 8, o);
  struct step {
    float value;  // the large tokens' value norm (2^101 is stored as 2^100)
    int count;    // how many of them
    float score;  // their score above the 256 earlier tokens'
  };
  for (const step st : {step{1.2e30f, 100, 15.5f}, step{0x1p101f, 1000, 15.99f}, step{0x1p100f, 3000, 40.0f}}) {
    INFO("value norm " << st.value << ", " << st.count << " tokens, score +" << st.score);
    const int n0 = 256, T = n0 + st.count;
    auto cache = bgtq::make_bgtq_cache(p, config(1, 1, 1, D, (T + 63) / 64));
    const int s = cache.add_sequence();
    std::vector<float> k(static_cast<std::size_t>(T) * D, 0.0f), v(k.size(), 0.0f);
    for (int t = 0; t < T; ++t) {
      float* kt = k.data() + static_cast<std::size_t>(t) * D;
      float* vt = v.data() + static_cast<std::size_t>(t) * D;
      if (t < n0) {
        vt[1] = 1.0f;  // score 0, value e1
      } else {
        kt[0] = st.score;  // score st.score with q = 8 e0 and scale 1/8
        vt[0] = st.value;
      }
    }
    cache.append(s, 0, k.data(), v.data(), T);
    std::vector<float> q(D, 0.0f);
    q[0] = 8.0f;
    const double big = std::min<double>(st.value, 0x1p100);
    const auto ref = require_matches_reference(cache, s, q, 1e-4 * big);
    REQUIRE(ref[0] > 0.99 * big);
    REQUIRE(ref[0] < 1.01 * big);
  }
}

TEST_CASE("errors row 19: fp16 windows and fp16 pages clamp values beyond 65504 and count them", "[errors]") {
  const int D = 8;
  std::vector<float> k(2 * D, 1.0f), v(2 * D, 1.0f);
  k[2] = 1e5f;
  k[D + 4] = -7e4f;
  v[1] = 65504.0f;  // representable: not clamped
  {  // fp16 pages
    auto cache = half_cache(config(1, 1, 1, D, 1));
    const int s = cache.add_sequence();
    cache.append(s, 0, k.data(), v.data(), 2);
    REQUIRE(cache.stats().clamped_radii == 2);
    std::vector<float> x(D);
    cache.decode_key(s, 0, 0, 0, x.data());
    REQUIRE(x[2] == 65504.0f);
    cache.decode_key(s, 0, 0, 1, x.data());
    REQUIRE(x[4] == -65504.0f);
  }
  {  // the fp16 window of a Block-GTQ cache (sink + recent)
    auto cache = gtq_cache(config(1, 1, 1, D, 1, 1, 2), 19);
    const int s = cache.add_sequence();
    cache.append(s, 0, k.data(), v.data(), 2);
    REQUIRE(cache.stats().clamped_radii == 2);
    std::vector<float> x(D);
    cache.decode_key(s, 0, 0, 0, x.data());
    REQUIRE(x[2] == 65504.0f);
    cache.decode_key(s, 0, 0, 1, x.data());
    REQUIRE(x[4] == -65504.0f);
    cache.decode_value(s, 0, 0, 0, x.data());
    REQUIRE(x[1] == 65504.0f);
  }
}

TEST_CASE("errors row 20: KIVI scales and zero points that overflow fp16 are clamped: no NaN or Inf is stored",
          "[errors]") {
  const int D = 8, T = 64;
  // a channel spanning [-60000, 60000]: 1-bit scale (hi - lo) / 1 = 120000 does not fit fp16
  std::vector<float> k(static_cast<std::size_t>(T) * D), v(k.size());
  bgtq::counter_rng r(20);
  for (std::size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<float>((r.uniform() * 2 - 1) * 60000.0);
    v[i] = static_cast<float>((r.uniform() * 2 - 1) * 60000.0);
  }
  k[0] = 60000.0f;
  k[static_cast<std::size_t>(D)] = -60000.0f;
  for (const bool symmetric : {false, true})
    for (const int bits : {1, 2}) {
      INFO("bits " << bits << (symmetric ? " symmetric" : " asymmetric"));
      auto cache = kivi(config(1, 1, 1, D, 1), bits, symmetric);
      const int s = cache.add_sequence();
      cache.append(s, 0, k.data(), v.data(), T);
      std::vector<float> x(D);
      for (int t = 0; t < T; ++t) {
        cache.decode_key(s, 0, 0, t, x.data());
        REQUIRE(all_finite(x));
        cache.decode_value(s, 0, 0, t, x.data());
        REQUIRE(all_finite(x));
      }
      REQUIRE(all_finite(attend(cache, 0, s, std::vector<float>(D, 1e-3f))));
    }
  // the flat round trips used by `bgtq eval`, on values beyond the fp16 range too
  std::vector<float> out(k.size());
  for (auto& x : k) x *= 1e3f;  // up to 6e7: zero points beyond 65504
  for (const bool symmetric : {false, true}) {
    bgtq::kivi_options o;
    o.bits = 1;
    o.symmetric = symmetric;
    bgtq::kivi_keys_roundtrip(k.data(), T, D, o, out.data());
    REQUIRE(all_finite(out));
    bgtq::kivi_values_roundtrip(k.data(), T, D, o, out.data());
    REQUIRE(all_finite(out));
  }
}

TEST_CASE("errors row 22: a non-finite query or scale is rejected by decode attention and the output is untouched",
          "[errors]") {
  const int D = 8, H = 2, Hq = 4;
  const auto k = rows(70, H, D, 22), v = rows(70, H, D, 23);
  auto run = [&](auto cache) {
    const int s = cache.add_sequence();
    cache.append(s, 0, k.data(), v.data(), 70);
    std::vector<float> q(static_cast<std::size_t>(Hq * D), 0.5f);
    const auto good = attend(cache, 0, s, q);
    REQUIRE(all_finite(good));
    bgtq::attention_workspace ws(cache);
    const int seqs[2] = {s, s};
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), inf_f, -inf_f}) {
      // batch of two: the second query, head 3, coordinate 6 is bad
      std::vector<float> q2(2 * q.size(), 0.25f), out(q2.size(), 7.0f);
      q2[q.size() + 3 * D + 6] = bad;
      require_error([&] { bgtq::decode_attention(cache, 0, std::span<const int>(seqs, 2), q2.data(), out.data(), ws); },
                    errc::non_finite, {"query 1 (sequence 0), head 3, coordinate 6 is not finite"});
      for (float o : out) REQUIRE(o == 7.0f);
      bgtq::thread_pool pool(2);
      std::vector<bgtq::attention_workspace> wss;
      wss.emplace_back(cache);
      wss.emplace_back(cache);
      require_error([&] {
        bgtq::decode_attention(cache, 0, std::span<const int>(seqs, 2), q2.data(), out.data(), pool,
                               std::span<bgtq::attention_workspace>(wss));
      }, errc::non_finite, {"query 1"});
      for (float o : out) REQUIRE(o == 7.0f);
    }
    for (const float bad_scale : {std::numeric_limits<float>::quiet_NaN(), inf_f, -1.0f})
      require_error([&] { (void)attend(cache, 0, s, q, bad_scale); }, errc::invalid_argument, {"scale"});
    // the cache is still usable and gives the same result
    REQUIRE(attend(cache, 0, s, q) == good);
  };
  run(gtq_cache(config(1, H, Hq, D, 4, 1, 2), 22));
  run(half_cache(config(1, H, Hq, D, 4)));
  run(kivi(config(1, H, Hq, D, 4), 2, false));
}

TEST_CASE("errors row 22: a finite query whose scores could overflow float is rejected, just below the bound it is served",
          "[errors]") {
  // keys as large as each cache stores (components up to ~4e37: fp32 radii clamp at 2^100,
  // fp16 radii, fp16 storage and the fp16 window at 65504, KIVI scales at 65504); query
  // head 3 (KV head 1) along a stored key, of norm just below / above the largest the
  // guard accepts, max_query_norm(key_norm_bound, scale)
  const int D = 8, H = 2, Hq = 4;
  const auto k = rows(70, H, D, 24, 1e37), v = rows(70, H, D, 25);
  auto run = [&](auto cache, const char* what) {
    INFO(what);
    const int s = cache.add_sequence();
    cache.append(s, 0, k.data(), v.data(), 70);
    std::vector<float> dir(static_cast<std::size_t>(D));
    cache.decode_key(s, 0, 1, 5, dir.data());
    const double dn = norm(dir);
    REQUIRE(dn > 0.0);
    const double kb = bgtq::detail::key_norm_bound(cache, 0, 1);
    REQUIRE(kb >= dn);
    for (const float scale : {0.0f, 1.0f, 4.0f}) {
      INFO("scale " << scale);
      const double sc = scale == 0.0f ? 1.0 / std::sqrt(static_cast<double>(D)) : static_cast<double>(scale);
      const double qmax = bgtq::max_query_norm(kb, sc);
      std::vector<float> q(static_cast<std::size_t>(Hq * D), 0.25f);
      auto aim = [&](double qn) {
        for (int j = 0; j < D; ++j) q[static_cast<std::size_t>(3 * D + j)] = static_cast<float>(dir[static_cast<std::size_t>(j)] / dn * qn);
      };
      aim(0.999 * qmax);
      const auto out = attend(cache, 0, s, q, scale);
      REQUIRE(all_finite(out));
      // head 3 against attention in double over the decoded keys and values: logits up to
      // ~2^126 make it (nearly) one-hot, which an overflowed float score would not give
      // (the softmax maps NaN scores to exp(-87.3): a meaningless but finite average)
      {
        const std::int64_t T = cache.length(s, 0);
        std::vector<double> sco(static_cast<std::size_t>(T));
        std::vector<float> x(static_cast<std::size_t>(D));
        double mx = -INFINITY;
        for (std::int64_t t = 0; t < T; ++t) {
          cache.decode_key(s, 0, 1, t, x.data());
          double d = 0.0;
          for (int j = 0; j < D; ++j) d += static_cast<double>(q[static_cast<std::size_t>(3 * D + j)]) * x[static_cast<std::size_t>(j)];
          sco[static_cast<std::size_t>(t)] = d * sc;
          mx = std::max(mx, d * sc);
        }
        std::vector<double> ref(static_cast<std::size_t>(D), 0.0);
        double l = 0.0;
        for (std::int64_t t = 0; t < T; ++t) {
          const double w = std::exp(sco[static_cast<std::size_t>(t)] - mx);
          l += w;
          cache.decode_value(s, 0, 1, t, x.data());
          for (int j = 0; j < D; ++j) ref[static_cast<std::size_t>(j)] += w * x[static_cast<std::size_t>(j)];
        }
        double err = 0.0, top = 0.0;
        for (int j = 0; j < D; ++j) {
          ref[static_cast<std::size_t>(j)] /= l;
          err = std::max(err, std::fabs(out[static_cast<std::size_t>(3 * D + j)] - ref[static_cast<std::size_t>(j)]));
          top = std::max(top, std::fabs(ref[static_cast<std::size_t>(j)]));
        }
        INFO("largest logit " << mx << ", head 3 error " << err << " of max |ref| " << top);
        REQUIRE(mx > 0x1p100);
        REQUIRE(err <= 1e-3 * top);
      }
      aim(1.01 * qmax);
      bgtq::attention_workspace ws(cache);
      std::vector<float> o2(q.size(), 7.0f);
      const int seq1[1] = {s};
      require_error([&] { bgtq::decode_attention(cache, 0, std::span<const int>(seq1, 1), q.data(), o2.data(), ws, scale); },
                    errc::invalid_argument, {"query 0 (sequence 0), head 3 has norm", "KV head 1", "overflow float"});
      for (float o : o2) REQUIRE(o == 7.0f);
    }
  };
  run(gtq_cache(config(1, H, Hq, D, 4), 24, bgtq::radius_format::fp32), "Block-GTQ, fp32 radii");
  run(gtq_cache(config(1, H, Hq, D, 4, 1, 2), 24), "Block-GTQ, fp16 radii, window 1 + 2");
  run(half_cache(config(1, H, Hq, D, 4)), "fp16");
  run(kivi(config(1, H, Hq, D, 4), 2, false), "KIVI 2-bit");
}

TEST_CASE("errors: a workspace made for another cache (shape or codec) is refused by decode attention, output untouched",
          "[errors]") {
  const int D = 16, H = 2, Hq = 4;
  const auto k = rows(70, H, D, 31), v = rows(70, H, D, 32);
  auto g = gtq_cache(config(1, H, Hq, D, 4, 0, 8), 31);   // Block-GTQ, window 0 + 8
  auto kv = kivi(config(1, H, Hq, D, 4, 0, 8), 2, false);  // KIVI, same G, D, P and window
  auto small = gtq_cache(config(1, H, Hq, D, 4), 33);      // no window
  for (auto* c : {&g, &small}) {
    const int s = c->add_sequence();
    c->append(s, 0, k.data(), v.data(), 70);
  }
  const int ks = kv.add_sequence();
  kv.append(ks, 0, k.data(), v.data(), 70);
  std::vector<float> q(static_cast<std::size_t>(Hq * D), 0.5f), out(q.size(), 7.0f);
  const int seq0[1] = {0};
  // the KIVI value accumulator is G (D + 1) P floats: a Block-GTQ workspace is too small
  bgtq::attention_workspace wg(g);
  REQUIRE(wg.fits(g));
  REQUIRE(!wg.fits(kv));
  require_error([&] { bgtq::decode_attention(kv, 0, std::span<const int>(seq0, 1), q.data(), out.data(), wg); },
                errc::invalid_argument, {"workspace was made for another cache shape or codec"});
  for (float o : out) REQUIRE(o == 7.0f);
  // a workspace without a window on a cache with one
  bgtq::attention_workspace ws(small);
  require_error([&] { bgtq::decode_attention(g, 0, std::span<const int>(seq0, 1), q.data(), out.data(), ws); },
                errc::invalid_argument, {"another cache"});
  for (float o : out) REQUIRE(o == 7.0f);
  // the right one works
  bgtq::attention_workspace wk(kv);
  bgtq::decode_attention(kv, 0, std::span<const int>(seq0, 1), q.data(), out.data(), wk);
  REQUIRE(all_finite(out));
}

TEST_CASE("errors row 23: decode attention on a thread pool from inside one of that pool's own tasks is refused, the output untouched",
          "[errors]") {
  const int D = 8, H = 2, Hq = 4;
  const auto k = rows(70, H, D, 24), v = rows(70, H, D, 25);
  auto cache = gtq_cache(config(1, H, Hq, D, 4, 1, 2), 23);
  const int s = cache.add_sequence();
  cache.append(s, 0, k.data(), v.data(), 70);
  const int seqs[2] = {s, s};
  std::vector<float> q(static_cast<std::size_t>(2 * Hq * D), 0.25f), out(q.size(), 7.0f);
  bgtq::thread_pool pool(2);
  std::vector<bgtq::attention_workspace> wss;
  wss.emplace_back(cache);
  wss.emplace_back(cache);
  auto attend_on_pool = [&] {
    bgtq::decode_attention(cache, 0, std::span<const int>(seqs, 2), q.data(), out.data(), pool,
                           std::span<bgtq::attention_workspace>(wss));
  };
  // nested: the inner run would wait for the worker that makes it (before, it replaced
  // the outer job and both returned with tasks never run)
  require_error([&] { pool.run(3, [&](int, int) { attend_on_pool(); }); }, errc::invalid_argument,
                {"thread_pool::run", "inside one of the pool's own tasks"});
  for (float o : out) REQUIRE(o == 7.0f);
  // the pool and the cache are still usable: the same call from the caller's thread
  attend_on_pool();
  REQUIRE(all_finite(out));
  REQUIRE(out[0] != 7.0f);
}
