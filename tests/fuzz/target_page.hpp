#pragma once
//! @file tests/fuzz/target_page.hpp
//! Fuzz target: the packed-page codecs read arbitrary bytes as a page. A page part
//! holds codes, radii (fp16 or fp32) and KIVI scales / zero points; whatever those bytes
//! are, decode_token, score_page, accumulate_page and finish must stay inside the page
//! part and inside the caller's buffers, which are allocated with exactly the documented
//! sizes so that AddressSanitizer sees any overrun. NaN or Inf outputs are allowed.
//!
//! Input layout: `[kind][layout][dim][pages][nvalid u16][G][flags][seed u32][widths or
//! bits...][page bytes, repeated to fill the page part]`, every configuration byte taken
//! modulo its range so that any input is a valid codec configuration.

#include <bgtq/cache/factory.hpp>
#include <bgtq/cache/kivi_pages.hpp>
#include <bgtq/core/rng.hpp>

#include <new>
#include <vector>

#include "fuzz_util.hpp"

namespace bgtq_fuzz {

namespace detail {

//! A heap page part of exactly `n` bytes (64-byte aligned like the cache's pool).
struct page_buffer {
  explicit page_buffer(std::size_t n) : n_(n), p_(static_cast<std::uint8_t*>(::operator new[](n ? n : 1, std::align_val_t(64)))) {}
  ~page_buffer() { ::operator delete[](p_, std::align_val_t(64)); }
  page_buffer(const page_buffer&) = delete;
  page_buffer& operator=(const page_buffer&) = delete;
  std::uint8_t* data() { return p_; }
  std::size_t size() const { return n_; }

 private:
  std::size_t n_;
  std::uint8_t* p_;
};

//! Runs every entry point of page codec `Codec` that the role allows over one page.
//! With `seed_out`, the page is not taken from the input but encoded from P random rows
//! (a valid page) and appended to *seed_out: that is how the seed corpus is made.
template <class Codec, class Layout>
void exercise(typename Codec::head_state& s, int P, int nvalid, int G, std::uint32_t seed, bool key_role, bool value_role,
              bool raw_weights, const std::uint8_t* bytes, std::size_t nbytes, std::vector<std::uint8_t>* seed_out) {
  const std::size_t part = Codec::template configure<Layout>(s, P);
  page_buffer page(part);
  tile(page.data(), part, bytes, nbytes);
  if (seed_out) {
    bgtq::counter_rng rows(seed, 4);
    std::vector<float> x(static_cast<std::size_t>(P) * static_cast<std::size_t>(s.dim()));
    for (float& v : x) v = static_cast<float>(rows.normal());
    for (int t0 = 0; t0 < P; t0 += Codec::tokens_per_block)
      Codec::template encode_block<Layout>(s, x.data() + static_cast<std::size_t>(t0) * s.dim(), static_cast<std::size_t>(s.dim()),
                                           Codec::tokens_per_block, page.data(), t0, nullptr);
    seed_out->insert(seed_out->end(), page.data(), page.data() + part);
  }
  const int D = s.dim();
  std::vector<float> x(static_cast<std::size_t>(D));
  for (int t = 0; t < P; ++t) Codec::template decode_token<Layout>(s, page.data(), t, x.data());

  bgtq::counter_rng r(seed, 3);
  std::vector<float> scores(static_cast<std::size_t>(G) * static_cast<std::size_t>(P));
  if constexpr (requires { Codec::template score_page<Layout>(s, nullptr, G, nullptr, 1, nullptr); }) {
    if (key_role) {
      std::vector<float> q(static_cast<std::size_t>(G) * static_cast<std::size_t>(D));
      for (float& v : q) v = static_cast<float>(r.normal());
      std::vector<float> qbuf(Codec::query_floats(s, G));
      Codec::prepare_query(s, q.data(), G, qbuf.data());
      Codec::template score_page<Layout>(s, qbuf.data(), G, page.data(), nvalid, scores.data());
    }
  }
  if constexpr (requires { Codec::template accumulate_page<Layout>(s, nullptr, 1, nullptr, G, nullptr, nullptr); }) {
    if (value_role) {
      std::vector<float> w(static_cast<std::size_t>(G) * static_cast<std::size_t>(P), 0.0f);
      for (int h = 0; h < G; ++h)
        for (int t = 0; t < nvalid; ++t) {
          const std::size_t i = static_cast<std::size_t>(h) * static_cast<std::size_t>(P) + static_cast<std::size_t>(t);
          w[i] = raw_weights ? scores[i] : static_cast<float>(r.uniform());
        }
      std::vector<float> acc(Codec::acc_floats(s, G), 0.0f), tmp(8u * static_cast<std::size_t>(P)),
          out(static_cast<std::size_t>(G) * static_cast<std::size_t>(D), 0.0f);
      Codec::template accumulate_page<Layout>(s, page.data(), nvalid, w.data(), G, acc.data(), tmp.data());
      Codec::finish(s, acc.data(), G, out.data());
    }
  }
}

template <class Layout>
void page_run(int kind, byte_reader& r, std::vector<std::uint8_t>* seed_out) {
  static constexpr int dims[] = {2, 4, 6, 8, 10, 12, 16, 24, 32, 64, 128};
  const int D = dims[r.u8() % (sizeof dims / sizeof dims[0])];
  const bool kivi = kind >= 2 && kind <= 5;
  const int unit = Layout::page_multiple < 32 && kivi ? 32 : Layout::page_multiple;
  const int P = unit * (1 + r.u8() % (unit >= 64 ? 2 : 4));
  const int nvalid = 1 + r.u16() % P;
  const int G = 1 + r.u8() % 9;
  const std::uint8_t flags = r.u8();
  const std::uint32_t seed = r.u32();
  const int L = D / 2;
  if (kind <= 1) {  // Block-GTQ keys (0) or uniform TQ-MSE (1) through gtq_pages
    bgtq::head_plan hp;
    bgtq::rope_layout rope(D, (flags & 16) ? bgtq::rope_pairing::half : bgtq::rope_pairing::interleaved);
    if (kind == 0) {
      std::vector<int> w(static_cast<std::size_t>(L));
      for (int& b : w) b = r.u8() % 9;
      hp = bgtq::make_head_plan(w, seed, (flags & 8) ? 8 : 64);
    } else {
      hp = bgtq::uniform_head_plan(L, r.u8() % 9, seed, (flags & 8) ? 8 : 64);
      rope = bgtq::rope_layout(D, bgtq::rope_pairing::interleaved);
    }
    const bgtq::key_codec_options o{static_cast<bgtq::codebook_kind>((flags >> 5) % 3),
                                    (flags & 1) ? bgtq::radius_format::fp32 : bgtq::radius_format::fp16, (flags & 2) != 0};
    auto s = bgtq::gtq_pages::make(bgtq::block_gtq_codec(hp, rope, o));
    exercise<bgtq::gtq_pages, Layout>(s, P, nvalid, G, seed, true, true, (flags & 4) != 0, r.rest(), r.rest_size(), seed_out);
  } else if (kivi) {
    bgtq::kivi_options o;
    o.bits = 1 + r.u8() % 8;
    o.symmetric = kind == 3 || kind == 5;
    if (kind <= 3) {
      auto s = bgtq::kivi_key_pages::make(D, o);
      exercise<bgtq::kivi_key_pages, Layout>(s, P, nvalid, G, seed, true, false, false, r.rest(), r.rest_size(), seed_out);
    } else {
      auto s = bgtq::kivi_value_pages::make(D, o);
      exercise<bgtq::kivi_value_pages, Layout>(s, P, nvalid, G, seed, false, true, (flags & 4) != 0, r.rest(), r.rest_size(), seed_out);
    }
  } else {
    auto s = bgtq::fp16_pages::make(D);
    exercise<bgtq::fp16_pages, Layout>(s, P, nvalid, G, seed, true, true, (flags & 4) != 0, r.rest(), r.rest_size(), seed_out);
  }
}

}  // namespace detail

inline int page_impl(const std::uint8_t* data, std::size_t size, std::vector<std::uint8_t>* seed_out) {
  byte_reader r(data, size);
  const int kind = r.u8() % 7;  // 0 gtq keys, 1 tq, 2/3 kivi keys (asym/sym), 4/5 kivi values, 6 fp16
  try {
    if (r.u8() & 1)
      detail::page_run<bgtq::token_major_layout>(kind, r, seed_out);
    else
      detail::page_run<bgtq::bit_plane_layout>(kind, r, seed_out);
  } catch (const bgtq::error& e) {
    // every configuration reachable from the input is valid: an error here is a bug
    std::fprintf(stderr, "page target: unexpected bgtq::error: %s\n", e.what());
    invariant_failed("page", "a valid page codec configuration was rejected");
  }
  return 0;
}

inline int page_one(const std::uint8_t* data, std::size_t size) { return page_impl(data, size, nullptr); }

//! A seed for the page target: the configuration bytes `header` (consumed exactly) followed
//! by a page that the configured codec encoded from random rows.
inline std::vector<std::uint8_t> page_seed(const std::vector<std::uint8_t>& header) {
  std::vector<std::uint8_t> out = header;
  page_impl(header.data(), header.size(), &out);
  return out;
}

}  // namespace bgtq_fuzz
