#pragma once
//! @file tests/fuzz/target_attention.hpp
//! Fuzz target: a whole paged cache under decode attention. The input picks the codec
//! (Block-GTQ with fuzzed widths, fp16, KIVI asymmetric / symmetric), layout, shape,
//! fp16 window, non-finite policy and the token rows (random at a fuzzed scale, or the
//! input's own bytes read as float32, NaN and Inf included); the tokens are appended in
//! fuzzed chunks; optionally every page in use is then overwritten with input bytes (the
//! cache's pool is writable memory behind page_ptr). Appends may fail only with
//! bgtq::error; decode_attention, reference_attention, decode_key/value over every
//! position must never touch memory outside the cache and the caller's buffers.
//! Without overwritten pages, attention over finite input must be finite and (up to 256
//! tokens) match reference_attention within 1e-4 of its largest output.

#include <bgtq/attention/decode.hpp>
#include <bgtq/attention/reference.hpp>
#include <bgtq/cache/factory.hpp>
#include <bgtq/cache/kivi_pages.hpp>
#include <bgtq/core/rng.hpp>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "fuzz_util.hpp"

namespace bgtq_fuzz {

namespace detail {

struct attention_setup {
  int layers, kv_heads, q_heads, D, P, sink, recent, T, chunk;
  bool raw_rows, zero_policy, overwrite;
  double scale;
  std::uint32_t seed;
};

template <class Cache>
void attention_run(Cache cache, const attention_setup& a, const std::uint8_t* bytes, std::size_t nbytes) {
  const int H = a.kv_heads, D = a.D;
  const std::size_t row = static_cast<std::size_t>(H) * static_cast<std::size_t>(D);
  std::vector<float> k(static_cast<std::size_t>(a.T) * row), v(k.size());
  if (a.raw_rows) {
    std::vector<std::uint8_t> raw(k.size() * 8);
    tile(raw.data(), raw.size(), bytes, nbytes);
    std::memcpy(k.data(), raw.data(), k.size() * 4);
    std::memcpy(v.data(), raw.data() + k.size() * 4, v.size() * 4);
  } else {
    bgtq::counter_rng r(a.seed, 1);
    for (float& x : k) x = static_cast<float>(a.scale * r.normal());
    for (float& x : v) x = static_cast<float>(a.scale * r.normal());
  }
  const int s = cache.add_sequence();
  for (int l = 0; l < a.layers; ++l)
    for (int t0 = 0; t0 < a.T; t0 += a.chunk) {
      const int n = std::min(a.chunk, a.T - t0);
      try {
        cache.append(s, l, k.data() + static_cast<std::size_t>(t0) * row, v.data() + static_cast<std::size_t>(t0) * row, n);
      } catch (const bgtq::error& e) {
        BGTQ_FUZZ_CHECK("attention", e.code() == bgtq::errc::non_finite || e.code() == bgtq::errc::capacity_exhausted);
      }
    }
  if (a.overwrite) {
    for (int l = 0; l < a.layers; ++l) {
      const auto view = cache.view(s, l);
      const std::int64_t npages = (view.quantized + a.P - 1) / a.P;
      for (std::int64_t pi = 0; pi < npages; ++pi)
        for (int h = 0; h < H; ++h) {
          auto* p = const_cast<std::uint8_t*>(cache.page_ptr(view.pages[pi], l, h));
          tile(p, cache.head_page_bytes(l, h), bytes, nbytes);
        }
    }
  }
  bgtq::counter_rng r(a.seed, 2);
  std::vector<float> q(static_cast<std::size_t>(a.q_heads) * static_cast<std::size_t>(D)), out(q.size()), ref(q.size());
  for (float& x : q) x = static_cast<float>(r.normal());
  bgtq::attention_workspace ws(cache);
  std::vector<float> x(static_cast<std::size_t>(D));
  for (int l = 0; l < a.layers; ++l) {
    const std::int64_t len = cache.length(s, l);
    if (len == 0) continue;
    const int seqs[1] = {s};
    bgtq::decode_attention(cache, l, std::span<const int>(seqs, 1), q.data(), out.data(), ws);
    if (!a.overwrite && !a.raw_rows && a.scale <= 100.0)
      for (float o : out) BGTQ_FUZZ_CHECK("attention", std::isfinite(o));
    if (len <= 256) {
      bgtq::reference_attention(cache, l, s, q.data(), ref.data());
      // a differential check where the input is ordinary (the kernels' tolerance of
      // tests/attention, 1e-4 of the largest output): corrupted pages and raw rows only
      // have to stay inside memory
      if (!a.overwrite && !a.raw_rows && a.scale <= 100.0) {
        float mag = 0.0f, err = 0.0f;
        for (std::size_t i = 0; i < out.size(); ++i) {
          mag = std::max(mag, std::fabs(ref[i]));
          err = std::max(err, std::fabs(out[i] - ref[i]));
        }
        BGTQ_FUZZ_CHECK("attention", err <= 1e-4f * mag || err == 0.0f);
      }
    }
    for (int h = 0; h < H; ++h)
      for (std::int64_t t = 0; t < len; ++t) {
        cache.decode_key(s, l, h, t, x.data());
        cache.decode_value(s, l, h, t, x.data());
      }
  }
  cache.free_sequence(s);
  BGTQ_FUZZ_CHECK("attention", cache.pages_used() == 0);
}

template <class Layout>
void attention_kind(int kind, const attention_setup& a, byte_reader& r) {
  bgtq::cache_config c;
  c.layers = a.layers;
  c.kv_heads = a.kv_heads;
  c.q_heads = a.q_heads;
  c.head_dim = a.D;
  c.page_tokens = a.P;
  c.sink = a.sink;
  c.recent = a.recent;
  c.max_pages = (a.T + a.P - 1) / a.P + (r.u8() % 2);  // sometimes exactly enough, sometimes one spare
  c.nonfinite = a.zero_policy ? bgtq::nonfinite_policy::zero : bgtq::nonfinite_policy::reject;
  const std::size_t nh = static_cast<std::size_t>(a.layers) * static_cast<std::size_t>(a.kv_heads);
  if (kind == 0) {
    bgtq::plan p;
    p.layers = a.layers;
    p.kv_heads = a.kv_heads;
    p.q_heads = a.q_heads;
    p.rope = bgtq::rope_layout(a.D, bgtq::rope_pairing::half);
    p.b_min = 0;
    p.b_max = 8;
    p.value_bits = r.u8() % 9;
    p.value_rotation = (a.D & (a.D - 1)) == 0 ? bgtq::rotation_kind::hadamard : bgtq::rotation_kind::structured;
    const std::uint8_t f = r.u8();
    p.key_radius = (f & 1) ? bgtq::radius_format::fp32 : bgtq::radius_format::fp16;
    p.value_radius = (f & 2) ? bgtq::radius_format::fp32 : bgtq::radius_format::fp16;
    p.norm_correction = (f & 4) != 0;
    for (std::size_t i = 0; i < nh; ++i) {
      std::vector<int> w(static_cast<std::size_t>(a.D / 2));
      for (int& b : w) b = r.u8() % 9;
      p.heads.push_back(bgtq::make_head_plan(w, bgtq::mix_seed(a.seed, i)));
      p.value_seeds.push_back(bgtq::mix_seed(a.seed + 1, i));
      for (int b = 0; b < a.D / 2; ++b) p.scores.push_back(1.0);
    }
    attention_run(bgtq::make_bgtq_cache<Layout>(p, c), a, r.rest(), r.rest_size());
  } else if (kind == 1) {
    attention_run(bgtq::fp16_cache<Layout>(c, bgtq::fp16_states(a.layers, a.kv_heads, a.D), bgtq::fp16_states(a.layers, a.kv_heads, a.D)),
                  a, r.rest(), r.rest_size());
  } else {
    bgtq::kivi_options o;
    o.bits = 1 + r.u8() % 8;
    o.symmetric = kind == 3;
    attention_run(bgtq::make_kivi_cache<Layout>(c, o), a, r.rest(), r.rest_size());
  }
}

}  // namespace detail

inline int attention_one(const std::uint8_t* data, std::size_t size) {
  static constexpr int dims[] = {2, 4, 6, 8, 16, 32, 64};
  byte_reader r(data, size);
  const int kind = r.u8() % 4;  // 0 Block-GTQ, 1 fp16, 2 KIVI, 3 KIVI symmetric
  const bool token_major = (r.u8() & 1) != 0;
  detail::attention_setup a{};
  a.D = dims[r.u8() % (sizeof dims / sizeof dims[0])];
  a.layers = 1 + r.u8() % 2;
  a.kv_heads = 1 + r.u8() % 2;
  a.q_heads = a.kv_heads * (1 + r.u8() % 4);
  a.P = token_major && kind <= 1 ? 16 * (1 + r.u8() % 4) : 64;
  if (token_major && kind >= 2) a.P = 32 * (1 + r.u8() % 2);
  a.sink = r.u8() % 4;
  a.recent = r.u8() % 8;
  a.T = 1 + r.u16() % 200;
  a.chunk = 1 + r.u8() % 80;
  const std::uint8_t mode = r.u8();
  a.raw_rows = (mode & 1) != 0;
  a.zero_policy = (mode & 2) != 0;
  a.overwrite = (mode & 4) != 0;
  a.scale = std::pow(10.0, static_cast<int>(r.u8() % 48) - 12);
  a.seed = r.u32();
  try {
    if (token_major)
      detail::attention_kind<bgtq::token_major_layout>(kind, a, r);
    else
      detail::attention_kind<bgtq::bit_plane_layout>(kind, a, r);
  } catch (const bgtq::error& e) {
    std::fprintf(stderr, "attention target: unexpected bgtq::error: %s\n", e.what());
    invariant_failed("attention", "a valid cache configuration or call was rejected");
  }
  return 0;
}

}  // namespace bgtq_fuzz
