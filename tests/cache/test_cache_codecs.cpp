// The caches against the flat codecs they are built from: a token held in pages decodes
// (decode_key / decode_value) to exactly the flat codec's round trip of its row, a token
// in the fp16 window to its fp16 rounding. A token that reached its page through the
// fp16 window (any cache with recent > 0, and KIVI's keys, which wait there for a whole
// 32-token block) was encoded from that fp16 copy (docs/errors.md, row 18), so its
// expected decode is the round trip of the fp16-rounded row. Block-GTQ and uniform TQ-MSE (the plan's
// codecs, block_gtq_codec::encode / decode) and KIVI (kivi_keys_roundtrip over the
// cache's 32-token blocks, kivi_values_roundtrip per token), both page layouts, pages of
// 64 and 128 tokens, with and without a window, the tokens appended in uneven chunks.
// Tolerance 0: both sides run the same quantizer and the same fp32 arithmetic, so a
// wrong row, stride, block boundary or page offset in the cache shows as a mismatch
// (decode attention's tests compare the kernels with decode_key, so this is what ties
// the pages to the codecs).
#include <catch2/catch.hpp>

#include <bgtq/cache/factory.hpp>
#include <bgtq/cache/kivi_pages.hpp>
#include <bgtq/codec/kivi.hpp>
#include <bgtq/codec/tq_codec.hpp>

#include <cmath>
#include <cstring>
#include <functional>

#include "cache_fixtures.hpp"

using namespace bgtq_test;

namespace {

struct layout_case {
  int D, P, sink, recent;
};
const layout_case k_shapes[] = {{40, 64, 0, 0}, {64, 128, 3, 5}, {40, 64, 1, 70}};
constexpr int k_layers = 2, k_heads = 2, k_tokens = 300;

// want(l, h, i, out): the expected decode of the i-th token held in pages of (l, h)
// (position sink + i).
using page_ref = std::function<void(int, int, std::int64_t, float*)>;

// The row a paged token was encoded from: the input, or its fp16 copy when it passed
// through the window.
std::vector<float> encoded_row(const float* row, int D, bool via_window) {
  std::vector<float> x(row, row + D);
  if (via_window)
    for (float& f : x) f = bgtq::stored_half(f);
  return x;
}

bgtq::cache_config shape_config(const layout_case& lc) {
  auto cfg = small_config(k_layers, k_heads, 2 * k_heads, lc.D, 2 * ((k_tokens + lc.P - 1) / lc.P), lc.sink, lc.recent);
  cfg.page_tokens = lc.P;
  return cfg;
}

// Random keys and values [k_tokens][k_heads][D], appended to a new sequence of every
// layer in uneven chunks (1..90 tokens, across page and block boundaries).
struct filled {
  std::vector<float> k, v;
  int seq = -1;
};
template <class Cache>
filled fill(Cache& c, int D, std::uint64_t seed) {
  filled f;
  const std::size_t row = static_cast<std::size_t>(k_heads) * D;
  f.k.resize(static_cast<std::size_t>(k_tokens) * row);
  f.v.resize(f.k.size());
  fill_normal(f.k, seed, 1.3f);
  fill_normal(f.v, seed + 1, 0.7f);
  f.seq = c.add_sequence();
  bgtq::counter_rng r(seed + 2);
  for (int l = 0; l < k_layers; ++l)
    for (int done = 0; done < k_tokens;) {
      const int n = std::min(k_tokens - done, 1 + static_cast<int>(r.below(90)));
      c.append(f.seq, l, f.k.data() + static_cast<std::size_t>(done) * row, f.v.data() + static_cast<std::size_t>(done) * row, n);
      done += n;
    }
  return f;
}

// Every token of every (layer, head), keys and values.
template <class Cache>
void check_tokens(const Cache& c, int s, int D, const std::vector<float>& k, const std::vector<float>& v, const page_ref& key_ref,
                  const page_ref& value_ref) {
  std::vector<float> got(static_cast<std::size_t>(D)), want(got.size());
  std::int64_t in_pages = 0;
  for (int l = 0; l < k_layers; ++l) {
    const auto view = c.view(s, l);
    REQUIRE(c.length(s, l) == k_tokens);
    REQUIRE(view.quantized > 0);
    for (int h = 0; h < k_heads; ++h)
      for (std::int64_t t = 0; t < k_tokens; ++t) {
        const bool paged = t >= view.sink && t < view.sink + view.quantized;
        in_pages += paged;
        for (const bool value : {false, true}) {
          const float* row = (value ? v : k).data() + (static_cast<std::size_t>(t) * k_heads + h) * D;
          if (paged)
            (value ? value_ref : key_ref)(l, h, t - view.sink, want.data());
          else
            for (int j = 0; j < D; ++j) want[static_cast<std::size_t>(j)] = bgtq::stored_half(row[j]);
          if (value)
            c.decode_value(s, l, h, t, got.data());
          else
            c.decode_key(s, l, h, t, got.data());
          INFO("layer " << l << " head " << h << " position " << t << (value ? " value" : " key") << (paged ? " (pages)" : " (window)"));
          REQUIRE(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
        }
      }
  }
  CHECK(in_pages > 0);
}

template <class Layout>
void check_gtq(const bgtq::plan& p, const layout_case& lc, std::uint64_t seed) {
  auto cache = bgtq::bgtq_cache<Layout>(shape_config(lc), bgtq::plan_key_states(p), bgtq::plan_value_states(p));
  const filled f = fill(cache, lc.D, seed);
  const std::vector<float>& k = f.k;
  const std::vector<float>& v = f.v;
  const int s = f.seq;
  std::vector<std::uint8_t> buf(4096);
  auto ref = [&](bool value) {
    return [&, value](int l, int h, std::int64_t i, float* out) {
      const auto codec = value ? bgtq::plan_value_codec(p, l, h) : bgtq::block_gtq_codec::from_plan(p, l, h);
      REQUIRE(codec.bytes() <= buf.size());
      const std::int64_t t = i + cache.view(s, l).sink;
      const auto row = encoded_row((value ? v : k).data() + (static_cast<std::size_t>(t) * k_heads + h) * lc.D, lc.D, lc.recent > 0);
      REQUIRE(codec.encode(row.data(), buf.data()) == bgtq::errc::ok);
      codec.decode(buf.data(), out);
    };
  };
  check_tokens(cache, s, lc.D, k, v, ref(false), ref(true));
}

template <class Layout>
void check_kivi(const bgtq::kivi_options& o, const layout_case& lc, std::uint64_t seed) {
  auto cache = bgtq::make_kivi_cache<Layout>(shape_config(lc), o);
  const filled f = fill(cache, lc.D, seed);
  const std::vector<float>& k = f.k;
  const std::vector<float>& v = f.v;
  const int s = f.seq;
  // the flat round trips of each (layer, head)'s paged tokens, [i][D]
  std::vector<std::vector<float>> kr, vr;
  for (int l = 0; l < k_layers; ++l) {
    const auto view = cache.view(s, l);
    for (int h = 0; h < k_heads; ++h) {
      const int m = static_cast<int>(view.quantized);
      REQUIRE(m % 32 == 0);
      std::vector<float> xk(static_cast<std::size_t>(m) * lc.D), xv(xk.size());
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < lc.D; ++j) {
          // keys and values both go through the window (a KIVI token is paged with its block)
          const std::size_t src = ((static_cast<std::size_t>(view.sink) + i) * k_heads + h) * lc.D + j;
          xk[static_cast<std::size_t>(i) * lc.D + j] = bgtq::stored_half(k[src]);
          xv[static_cast<std::size_t>(i) * lc.D + j] = bgtq::stored_half(v[src]);
        }
      kr.emplace_back(xk.size());
      vr.emplace_back(xv.size());
      bgtq::kivi_keys_roundtrip(xk.data(), m, lc.D, o, kr.back().data());
      bgtq::kivi_values_roundtrip(xv.data(), m, lc.D, o, vr.back().data());
    }
  }
  auto ref = [&](const std::vector<std::vector<float>>& x) {
    return [&](int l, int h, std::int64_t i, float* out) {
      std::memcpy(out, x[static_cast<std::size_t>(l * k_heads + h)].data() + i * lc.D, static_cast<std::size_t>(lc.D) * sizeof(float));
    };
  };
  check_tokens(cache, s, lc.D, k, v, ref(kr), ref(vr));
}

}  // namespace

TEST_CASE("Block-GTQ and TQ-MSE caches hold exactly the flat codec's round trip of each token", "[cache][codecs]") {
  std::uint64_t seed = 40;
  for (const auto& lc : k_shapes) {
    INFO("D=" << lc.D << " P=" << lc.P << " window=" << lc.sink << "+" << lc.recent);
    // Block-GTQ: key widths 1..8 per RoPE block (many groups); TQ-MSE: one width for all
    const auto gtq = random_plan(k_layers, k_heads, 2 * k_heads, lc.D, bgtq::rope_pairing::half, 1, 8, 1 + static_cast<int>(seed % 8), seed);
    const auto tq = random_plan(k_layers, k_heads, 2 * k_heads, lc.D, bgtq::rope_pairing::interleaved, 3, 3, 2, seed + 1);
    check_gtq<bgtq::bit_plane_layout>(gtq, lc, seed + 2);
    check_gtq<bgtq::token_major_layout>(gtq, lc, seed + 3);
    check_gtq<bgtq::bit_plane_layout>(tq, lc, seed + 4);
    seed += 10;
  }
}

TEST_CASE("KIVI caches hold exactly the flat round trip over their 32-token key blocks, every width", "[cache][codecs]") {
  std::uint64_t seed = 90;
  for (int bits = 1; bits <= 8; ++bits)
    for (const bool symmetric : {false, true}) {
      const auto& lc = k_shapes[static_cast<std::size_t>(bits + symmetric) % 3];
      INFO("bits=" << bits << (symmetric ? " symmetric" : " asymmetric") << " D=" << lc.D << " P=" << lc.P << " window=" << lc.sink
                   << "+" << lc.recent);
      bgtq::kivi_options o;
      o.bits = bits;
      o.symmetric = symmetric;
      if (bits % 2)
        check_kivi<bgtq::bit_plane_layout>(o, lc, ++seed);
      else
        check_kivi<bgtq::token_major_layout>(o, lc, ++seed);
    }
}

template <class Layout>
void check_kivi_stored_bytes(int P) {
  for (const int D : {2, 6, 8, 10, 64, 128, 130})
    for (int bits = 1; bits <= 8; ++bits)
      for (const bool symmetric : {false, true}) {
        INFO("D=" << D << " bits=" << bits << (symmetric ? " symmetric" : " asymmetric") << " P=" << P << " " << Layout::name);
        bgtq::kivi_options o;
        o.bits = bits;
        o.symmetric = symmetric;
        bgtq::cache_config c;
        c.layers = c.kv_heads = c.q_heads = 1;
        c.head_dim = D;
        c.page_tokens = P;
        c.max_pages = 1;
        const auto cache = bgtq::make_kivi_cache<Layout>(c, o);
        const double k = bgtq::kivi_key_stored_bytes_per_token<Layout>(D, o, P);
        const double v = bgtq::kivi_value_stored_bytes_per_token<Layout>(D, o, P);
        REQUIRE(k + v == cache.bytes_per_token(0, 0));
        // each part a whole number of 64-byte lines, never below the unaligned size
        CHECK(std::fmod(k * P, 64.0) == 0.0);
        CHECK(std::fmod(v * P, 64.0) == 0.0);
        CHECK(k >= bgtq::kivi_key_bytes_per_token(D, o));
        CHECK(v >= bgtq::kivi_value_bytes_per_token(D, o));
      }
}

// bgtq eval's KIVI bytes (the unaligned kivi_*_bytes_per_token said 10.25 at D = 10, 2 bits)
TEST_CASE("KIVI's stored bytes per token are the cache's bytes_per_token, page alignment included", "[cache][codecs]") {
  check_kivi_stored_bytes<bgtq::bit_plane_layout>(64);
  check_kivi_stored_bytes<bgtq::bit_plane_layout>(128);
  check_kivi_stored_bytes<bgtq::token_major_layout>(32);
  check_kivi_stored_bytes<bgtq::token_major_layout>(64);
  bgtq::kivi_options o;
  o.bits = 2;
  CHECK(bgtq::kivi_key_stored_bytes_per_token(10, o) == 4.0);
  CHECK(bgtq::kivi_value_stored_bytes_per_token(10, o) == 7.0);
}

// The cases above compare the cache with plan_value_codec and block_gtq_codec::from_plan,
// the very functions the cache is built from, and their plans all use the default
// codebook, radius format and no norm correction: they hold whatever seed, rotation or
// options those functions pick. Here both are pinned to their documented contract.
// Values: uniform TQ-MSE over the whole head in natural dim order, at p.value_bits, with
// p.value_rotation, the head's own value seed value_seeds[layer * kv_heads + h], and the
// plan's codebook, value radius format and norm correction, against an independently
// built tq_mse_codec. Keys: the head plan heads[layer * kv_heads + h] with the plan's
// codebook, key radius format and norm correction. (Giving every head the value seed of
// head (0, 0), dropping p.value_rotation, or always using the sphere codebook passed
// test_cache, test_errors and test_plan.)
TEST_CASE("plan codecs use each head's own seed and plan, the value rotation, codebook, radius format and norm correction",
          "[cache][codecs]") {
  const int D = 64;
  const bgtq::rotation_kind rots[] = {bgtq::rotation_kind::haar, bgtq::rotation_kind::hadamard, bgtq::rotation_kind::structured,
                                      bgtq::rotation_kind::identity};
  const bgtq::codebook_kind books[] = {bgtq::codebook_kind::sphere, bgtq::codebook_kind::gaussian, bgtq::codebook_kind::uniform};
  int combo = 0;
  for (const auto rot : rots)
    for (const auto book : books) {
      ++combo;
      auto p = random_plan(k_layers, k_heads, 2 * k_heads, D, bgtq::rope_pairing::half, 2, 5, 3, 123);
      p.value_rotation = rot;
      p.codebook = book;
      p.key_radius = combo % 2 ? bgtq::radius_format::fp32 : bgtq::radius_format::fp16;
      p.value_radius = combo % 3 ? bgtq::radius_format::fp16 : bgtq::radius_format::fp32;
      p.norm_correction = combo % 4 == 1;
      INFO("value rotation " << bgtq::to_string(rot) << ", codebook " << bgtq::to_string(book) << ", combo " << combo);
      std::vector<float> x(static_cast<std::size_t>(D));
      fill_normal(x, 5, 1.0f);
      std::vector<std::vector<std::uint8_t>> records;
      for (int l = 0; l < k_layers; ++l)
        for (int h = 0; h < k_heads; ++h) {
          INFO("layer " << l << " head " << h);
          const std::size_t at = static_cast<std::size_t>(l * k_heads + h);
          const auto codec = bgtq::plan_value_codec(p, l, h);
          bgtq::tq_params tp;
          tp.dim = D;
          tp.bits = p.value_bits;
          tp.rotation = rot;
          tp.seed = p.value_seeds[at];
          tp.codebook = book;
          tp.radius = p.value_radius;
          tp.norm_correction = p.norm_correction;
          const bgtq::tq_mse_codec want(tp);
          REQUIRE(codec.bytes() == want.bytes());
          std::vector<std::uint8_t> got_rec(codec.bytes()), want_rec(want.bytes());
          REQUIRE(codec.encode(x.data(), got_rec.data()) == bgtq::errc::ok);
          REQUIRE(want.encode(x.data(), want_rec.data()) == bgtq::errc::ok);
          REQUIRE(got_rec == want_rec);
          records.push_back(got_rec);
          // keys
          const auto key = bgtq::block_gtq_codec::from_plan(p, l, h);
          const bgtq::block_gtq_codec key_want(p.heads[at], p.rope, bgtq::key_codec_options{book, p.key_radius, p.norm_correction});
          REQUIRE(key.bytes() == key_want.bytes());
          std::vector<std::uint8_t> kr(key.bytes()), kw(key.bytes());
          REQUIRE(key.encode(x.data(), kr.data()) == bgtq::errc::ok);
          REQUIRE(key_want.encode(x.data(), kw.data()) == bgtq::errc::ok);
          REQUIRE(kr == kw);
        }
      // the heads' value codecs really differ (identity has no seed to differ by)
      if (rot != bgtq::rotation_kind::identity)
        for (std::size_t a = 0; a < records.size(); ++a)
          for (std::size_t b = a + 1; b < records.size(); ++b) CHECK(records[a] != records[b]);
    }
}
