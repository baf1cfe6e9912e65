#pragma once
//! @file attention/decode.hpp
//! CPU decode attention over a kv_cache: a batch of sequences, one new query token each,
//! GQA (the query heads of one KV head share one pass over its pages).
//!
//! Per (sequence, KV head): the key codec prepares the query once (Block-GTQ: gather
//! and rotate per group); every page is scored straight from its codes; an online
//! softmax (softmax.hpp) turns scores into weights; the value codec accumulates
//! weighted codes in its own (rotated) domain; the fp16 window tokens are merged in the
//! same softmax; the value codec rotates back once at the end. No key or value is
//! decoded to memory and nothing is allocated: all scratch lives in an
//! attention_workspace made once per thread.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "../cache/kv_cache.hpp"
#include "../core/prefetch.hpp"
#include "../core/thread_pool.hpp"
#include "../core/vec16.hpp"
#include "softmax.hpp"

#if BGTQ_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace bgtq {

//! One float buffer inside an attention_workspace's arena (a pointer and a length).
struct scratch_span {
  float* p = nullptr;
  std::size_t n = 0;
  float* data() const noexcept { return p; }
  std::size_t size() const noexcept { return n; }
  bool empty() const noexcept { return n == 0; }
  float* begin() const noexcept { return p; }
  float* end() const noexcept { return p + n; }
  float& operator[](std::size_t i) const noexcept { return p[i]; }
};

//! Scratch memory for decode_attention, sized for one cache (one per thread).
//!
//! All float buffers live in one 64-byte-aligned arena, each starting at its own
//! 448-byte slot modulo 4 KiB: the loops that load one buffer and store another at the
//! same index (scores -> weights, the value accumulators) never see 4K aliasing, whose
//! false store-to-load dependencies cost 10-15% at 4K tokens depending on where the
//! heap happened to put separately allocated buffers. In an AddressSanitizer build each
//! buffer is followed by a poisoned 64-byte red zone, so an overrun into the next buffer
//! is still reported. Copies get a fresh arena of the same shape (scratch contents are
//! never carried over).
class attention_workspace {
 public:
  //! Pages scored before each softmax update and value pass (a span): the value
  //! weights of a span are prepared together (and, with AVX2, the accumulators loaded and
  //! stored once per span instead of once per page).
  static constexpr int span_pages = 4;
  attention_workspace() = default;
  template <class Cache>
  explicit attention_workspace(const Cache& c) {
    const auto& cfg = c.config();
    BGTQ_REQUIRE(cfg.layers >= 1 && cfg.kv_heads >= 1, errc::invalid_argument,
                 "attention_workspace: the cache has no layers or KV heads (a moved-from cache)");
    G_ = cfg.q_heads / cfg.kv_heads;
    D_ = cfg.head_dim;
    P_ = cfg.page_tokens;
    for (int l = 0; l < cfg.layers; ++l)
      for (int h = 0; h < cfg.kv_heads; ++h) {
        qf_ = std::max(qf_, Cache::key_codec::query_floats(c.key(l, h), G_));
        af_ = std::max(af_, Cache::value_codec::acc_floats(c.value(l, h), G_));
      }
    window_ = cfg.sink + cfg.recent + Cache::block_tokens;
    const auto n = sizes();
    std::size_t total = 0;
    for (std::size_t k = 0; k < buffers; ++k) total = place(total, k) + n[k] + redzone;
    try {
      arena_.assign(total + 16, 0.0f);  // + room to align the base to 64 bytes
    } catch (const std::bad_alloc&) {
      fail(errc::capacity_exhausted, "attention_workspace: cannot allocate " + std::to_string(total + 16) +
                                         " floats of scratch (G = " + std::to_string(G_) + " query heads per KV head, a window of " +
                                         std::to_string(window_) + " tokens)");
    }
    bind();
    poison(true);
    state.assign(static_cast<std::size_t>(G_), softmax_state{-INFINITY, 0.0f});
  }
  attention_workspace(const attention_workspace& o)
      : state(o.state), arena_(o.arena_.size(), 0.0f), G_(o.G_), D_(o.D_), P_(o.P_), window_(o.window_), qf_(o.qf_), af_(o.af_) {
    bind();
    poison(true);
  }
  ~attention_workspace() { poison(false); }
  attention_workspace(attention_workspace&& o) noexcept { *this = std::move(o); }
  attention_workspace& operator=(const attention_workspace& o) {
    if (this != &o) *this = attention_workspace(o);
    return *this;
  }
  attention_workspace& operator=(attention_workspace&& o) noexcept {
    if (this == &o) return *this;
    poison(false);
    state = std::move(o.state);
    arena_ = std::move(o.arena_);  // the heap block moves: the spans stay valid
    G_ = o.G_, D_ = o.D_, P_ = o.P_, window_ = o.window_;
    qf_ = o.qf_, af_ = o.af_;
    bind();
    o.bind();
    return *this;
  }
  //! True if this workspace was made for a cache of this shape and its codecs: the same
  //! G, head_dim and page size, a window at least as long, and query / accumulator buffers
  //! large enough for every (layer, KV head) of `c` (a workspace of a Block-GTQ cache is
  //! too small for a KIVI cache of the same shape: its value accumulator is G(D+1)P).
  template <class Cache>
  bool fits(const Cache& c) const {
    const auto& cfg = c.config();
    if (cfg.layers < 1) return false;  // an empty (moved-from) cache
    for (int l = 0; l < cfg.layers; ++l)
      if (!fits(c, l)) return false;
    return true;
  }
  //! fits() for the heads of one layer (what decode_attention checks on each call).
  template <class Cache>
  bool fits(const Cache& c, int layer) const {
    const auto& cfg = c.config();
    if (cfg.kv_heads < 1) return false;  // an empty (moved-from) cache
    if (!(G_ == cfg.q_heads / cfg.kv_heads && D_ == cfg.head_dim && P_ == cfg.page_tokens &&
          window_ >= cfg.sink + cfg.recent + Cache::block_tokens && !qbuf.empty()))
      return false;
    for (int h = 0; h < cfg.kv_heads; ++h)
      if (Cache::key_codec::query_floats(c.key(layer, h), G_) > qf_ || Cache::value_codec::acc_floats(c.value(layer, h), G_) > af_)
        return false;
    return true;
  }
  //! Bytes of scratch this workspace holds (the arena and the softmax states).
  std::size_t bytes() const noexcept { return arena_.size() * sizeof(float) + state.size() * sizeof(softmax_state); }

  scratch_span qbuf, acc, scores, weights, tmp, raw, outbuf, wscores, row;
  std::vector<softmax_state> state;

 private:
  static constexpr std::size_t buffers = 9;
  static constexpr std::size_t slot_floats = 112;   //!< 448 bytes: buffer k starts at k * 448 mod 4096
  static constexpr std::size_t page_floats = 1024;  //!< 4 KiB
  static constexpr std::size_t redzone = BGTQ_ASAN ? 16 : 0;  //!< floats after each buffer (poisoned under ASan)
  //! Offset (floats from the aligned base) of buffer k placed at or after `at`.
  static std::size_t place(std::size_t at, std::size_t k) {
    const std::size_t want = (k * slot_floats) % page_floats;
    std::size_t o = (at + 15) & ~static_cast<std::size_t>(15);  // 64-byte aligned
    o += (want + page_floats - o % page_floats) % page_floats;
    return o;
  }
  //! Floats of each buffer, in arena order (from the shape: nothing else to keep in step).
  std::array<std::size_t, buffers> sizes() const noexcept {
    const std::size_t span = static_cast<std::size_t>(span_pages) * static_cast<std::size_t>(P_);
    const std::size_t G = static_cast<std::size_t>(G_), GD = G * static_cast<std::size_t>(D_);
    return {qf_ + 16,                                        // qbuf
            af_ + 16,                                        // acc
            G * span + 16,                                   // scores
            G * span + 16,                                   // weights
            8u * span + 16,                                  // tmp
            GD,                                              // raw
            GD,                                              // outbuf
            G * static_cast<std::size_t>(window_) + 16,      // wscores (exp_shift_sum's pad)
            static_cast<std::size_t>(D_)};                   // row: one window row in float
  }
  std::array<scratch_span*, buffers> spans() noexcept { return {&qbuf, &acc, &scores, &weights, &tmp, &raw, &outbuf, &wscores, &row}; }
  void bind() noexcept {
    const auto s = spans();
    if (arena_.empty()) {
      for (auto* b : s) *b = scratch_span{};
      return;
    }
    const auto n = sizes();
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(arena_.data());
    float* base = arena_.data() + ((64u - a % 64u) % 64u) / sizeof(float);
    std::size_t at = 0;
    for (std::size_t k = 0; k < buffers; ++k) {
      at = place(at, k);
      *s[k] = scratch_span{base + at, n[k]};
      at += n[k] + redzone;
    }
  }
  //! ASan: poisons (or unpoisons) everything in the arena outside the buffers.
  void poison(bool on) noexcept {
#if BGTQ_ASAN
    if (arena_.empty()) return;
    ASAN_UNPOISON_MEMORY_REGION(arena_.data(), arena_.size() * sizeof(float));
    if (!on) return;
    const float* at = arena_.data();
    for (const scratch_span* b : spans()) {
      if (b->begin() > at) ASAN_POISON_MEMORY_REGION(at, static_cast<std::size_t>(b->begin() - at) * sizeof(float));
      at = b->end();
    }
    const float* end = arena_.data() + arena_.size();
    if (end > at) ASAN_POISON_MEMORY_REGION(at, static_cast<std::size_t>(end - at) * sizeof(float));
#else
    (void)on;
#endif
  }

  std::vector<float> arena_;
  int G_ = 0, D_ = 0, P_ = 0, window_ = 0;
  std::size_t qf_ = 0, af_ = 0;  //!< query and accumulator floats the buffers hold (without the pad)
};

namespace detail {

//! x[0, D) = the fp16 row h[0, D) in float (16 lanes at a time, the remainder scalar).
inline void half_row_to_float(const std::uint16_t* h, int D, float* x) {
  int j = 0;
  for (; j + 16 <= D; j += 16) simd::store(x + j, simd::load_half(reinterpret_cast<const std::uint8_t*>(h + j)));
  for (; j < D; ++j) x[j] = half_bits_to_float(h[j]);
}
//! sum_j q[j] x[j] over [0, D).
inline float dot_row(const float* q, const float* x, int D) {
  int j = 0;
  simd::vf16 acc = simd::zero();
  for (; j + 16 <= D; j += 16) acc = simd::fma(simd::load(q + j), simd::load(x + j), acc);
  float s = simd::hsum(acc);
  for (; j < D; ++j) s += q[j] * x[j];
  return s;
}
//! y[0, D) += w x[0, D).
inline void axpy_row(float w, const float* x, int D, float* y) {
  int j = 0;
  const simd::vf16 wv = simd::set1(w);
  for (; j + 16 <= D; j += 16) simd::store(y + j, simd::fma(wv, simd::load(x + j), simd::load(y + j)));
  for (; j < D; ++j) y[j] += w * x[j];
}
//! s[i] <- exp(s[i] - m) over [0, n); returns the sum. Reads (never writes) up to 15
//! floats past s + n: the buffer must be padded.
inline float exp_shift_sum(float* s, std::size_t n, float m) {
  const simd::vf16 mv = simd::set1(m);
  simd::vf16 sum = simd::zero();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const simd::vf16 e = simd::exp(simd::sub(simd::load(s + i), mv));
    simd::store(s + i, e);
    sum = simd::add(sum, e);
  }
  if (i < n) {
    const std::size_t left = n - i;
    const simd::vf16 e = simd::select_valid(simd::exp(simd::sub(simd::load(s + i), mv)), (1u << left) - 1u, 0.0f);
    float tail[16];
    simd::store(tail, e);
    for (std::size_t l = 0; l < left; ++l) s[i + l] = tail[l];
    sum = simd::add(sum, e);
  }
  return simd::hsum(sum);
}

//! One online-softmax step of query head g: folds `mx` into its running max
//! (update_max) and, when the max moved, rescales g's value accumulators, the codec's
//! (`acc_per_head` floats) and the fp16 window's (`raw`, D floats). Used by the page spans
//! and by the window, which share one softmax.
inline softmax_state& raise_max(attention_workspace& ws, int g, float mx, std::size_t acc_per_head, int D) {
  softmax_state& st = ws.state[static_cast<std::size_t>(g)];
  const float f = update_max(st, mx);
  if (f != 1.0f) {
    float* a = ws.acc.data() + acc_per_head * static_cast<std::size_t>(g);
    for (std::size_t i = 0; i < acc_per_head; ++i) a[i] *= f;
    float* r = ws.raw.data() + static_cast<std::size_t>(g) * static_cast<std::size_t>(D);
    for (int j = 0; j < D; ++j) r[j] *= f;
  }
  return st;
}

//! The fp16 window part of attend_head (sink tokens then the recent tail): its scores
//! join the same online softmax. Token-major rows: each row is widened to float once
//! (16 lanes at a time) and used by all G query heads. Kept out of line, like the
//! width-specialised page kernels, so the page loop's code does not depend on it.
template <class Cache>
BGTQ_NOINLINE void attend_window(const Cache& cache, int layer, int seq, int h, const float* qh, attention_workspace& ws,
                                 float sc, std::size_t accn) {
  const auto& cfg = cache.config();
  const int G = cfg.q_heads / cfg.kv_heads;
  const int D = cfg.head_dim;
  const auto win = cache.window(seq, layer, h);  // valid by check_decode: does not throw
  const std::int64_t nwin = win.size();
  float* wrow = ws.row.data();
  const std::size_t W = static_cast<std::size_t>(nwin);
  for (std::int64_t i = 0; i < nwin; ++i) {
    detail::half_row_to_float(win.key(i), D, wrow);
    for (int g = 0; g < G; ++g)
      ws.wscores[static_cast<std::size_t>(g) * W + static_cast<std::size_t>(i)] =
          detail::dot_row(qh + static_cast<std::size_t>(g) * D, wrow, D) * sc;
  }
  for (int g = 0; g < G; ++g) {
    float* sg = ws.wscores.data() + static_cast<std::size_t>(g) * W;
    float mx = -INFINITY;
    for (std::size_t i = 0; i < W; ++i) mx = std::max(mx, sg[i]);
    softmax_state& st = raise_max(ws, g, mx, accn / G, D);
    st.l += detail::exp_shift_sum(sg, W, st.m);  // sg[i] <- exp(sg[i] - m)
  }
  for (std::int64_t i = 0; i < nwin; ++i) {
    detail::half_row_to_float(win.value(i), D, wrow);
    for (int g = 0; g < G; ++g)
      detail::axpy_row(ws.wscores[static_cast<std::size_t>(g) * W + static_cast<std::size_t>(i)], wrow, D,
                       ws.raw.data() + static_cast<std::size_t>(g) * D);
  }
}

//! Attention of the G query heads of KV head h for one sequence (no checks, no throw).
template <class Cache>
void attend_head(const Cache& cache, int layer, int seq, const typename Cache::sequence_view& view, int h,
                 const float* qh, float* oh, attention_workspace& ws, float sc) {
  using K = typename Cache::key_codec;
  using V = typename Cache::value_codec;
  using L = typename Cache::layout;
  const auto& cfg = cache.config();
  const int G = cfg.q_heads / cfg.kv_heads;
  const int D = cfg.head_dim;
  const int P = cfg.page_tokens;
  const simd::vf16 scv = simd::set1(sc);
  const std::int64_t nwin = view.sink + view.tail;
  const auto& ks = cache.key(layer, h);
  const auto& vs = cache.value(layer, h);
  K::prepare_query(ks, qh, G, ws.qbuf.data());
  for (int g = 0; g < G; ++g) ws.state[static_cast<std::size_t>(g)] = softmax_state{-INFINITY, 0.0f};
  const std::size_t accn = V::acc_floats(vs, G);
  std::fill(ws.acc.begin(), ws.acc.begin() + static_cast<std::ptrdiff_t>(accn), 0.0f);
  std::fill(ws.raw.begin(), ws.raw.end(), 0.0f);
  const std::size_t voff = cache.value_offset(layer, h);
  const std::size_t head_bytes = cache.head_page_bytes(layer, h);
  const std::uint8_t* const base = cache.page_base(layer, h);  // the view's page ids are valid
  auto page_of = [&](std::int64_t i) { return base + static_cast<std::size_t>(view.pages[i]) * head_bytes; };
  const std::int64_t npages = (view.quantized + P - 1) / P;
  prefetch_stream pf;
  const std::uint8_t* kpages[attention_workspace::span_pages];
  const std::uint8_t* vpages[attention_workspace::span_pages];
  for (std::int64_t p0 = 0; p0 < npages; p0 += attention_workspace::span_pages) {
    const int np = static_cast<int>(std::min<std::int64_t>(attention_workspace::span_pages, npages - p0));
    const int nvalid_last = static_cast<int>(std::min<std::int64_t>(P, view.quantized - (p0 + np - 1) * P));
    // 1. scores of every page of the span: [page][G][P]
    for (int k = 0; k < np; ++k) {
      // pages are scattered in the pool: fetch the next one's key and value parts while
      // this one is scored (the hardware prefetcher only follows each page's streams), a
      // line per iteration of the codec's scoring loop and the rest after it
      if (p0 + k + 1 < npages) pf.reset(page_of(p0 + k + 1), head_bytes);
      kpages[k] = page_of(p0 + k);
      vpages[k] = kpages[k] + voff;
      K::template score_page<L>(ks, ws.qbuf.data(), G, kpages[k], k + 1 < np ? P : nvalid_last,
                                ws.scores.data() + static_cast<std::size_t>(k) * G * P, pf);
      pf.flush();
    }
    // 2. scale, mask, one online-softmax update per head, weights
    for (int g = 0; g < G; ++g) {
      simd::vf16 mx = simd::set1(-INFINITY);
      for (int k = 0; k < np; ++k) {
        const int nvalid = k + 1 < np ? P : nvalid_last;
        float* s = ws.scores.data() + (static_cast<std::size_t>(k) * G + static_cast<std::size_t>(g)) * P;
        for (int c = 0; c < (nvalid + 15) / 16; ++c) {
          const int left = nvalid - c * 16;
          const std::uint32_t valid = left >= 16 ? 0xffffu : ((1u << left) - 1u);
          const simd::vf16 v = simd::select_valid(simd::mul(simd::load(s + c * 16), scv), valid, -INFINITY);
          simd::store(s + c * 16, v);
          mx = simd::max(mx, v);
        }
      }
      softmax_state& st = raise_max(ws, g, simd::hmax(mx), accn / G, D);
      const simd::vf16 mv = simd::set1(st.m);
      simd::vf16 lsum = simd::zero();
      for (int k = 0; k < np; ++k) {
        const int nvalid = k + 1 < np ? P : nvalid_last;
        const std::size_t off = (static_cast<std::size_t>(k) * G + static_cast<std::size_t>(g)) * P;
        for (int c = 0; c < (nvalid + 15) / 16; ++c) {
          const simd::vf16 e = simd::exp(simd::sub(simd::load(ws.scores.data() + off + c * 16), mv));
          simd::store(ws.weights.data() + off + c * 16, e);
          lsum = simd::add(lsum, e);
        }
      }
      st.l += simd::hsum(lsum);
    }
    // 3. values
    if constexpr (requires { V::template accumulate_span<L>(vs, vpages, np, nvalid_last, ws.weights.data(), G, ws.acc.data(), ws.tmp.data()); }) {
      V::template accumulate_span<L>(vs, vpages, np, nvalid_last, ws.weights.data(), G, ws.acc.data(), ws.tmp.data());
    } else {
      for (int k = 0; k < np; ++k)
        V::template accumulate_page<L>(vs, vpages[k], k + 1 < np ? P : nvalid_last,
                                       ws.weights.data() + static_cast<std::size_t>(k) * G * P, G, ws.acc.data(),
                                       ws.tmp.data());
    }
  }
  if (nwin > 0) attend_window(cache, layer, seq, h, qh, ws, sc, accn);
  std::copy(ws.raw.begin(), ws.raw.end(), ws.outbuf.begin());
  V::finish(vs, ws.acc.data(), G, ws.outbuf.data());
  for (int g = 0; g < G; ++g) {
    const float inv = 1.0f / ws.state[static_cast<std::size_t>(g)].l;
    for (int j = 0; j < D; ++j) oh[static_cast<std::size_t>(g) * D + j] = ws.outbuf[static_cast<std::size_t>(g) * D + j] * inv;
  }
}

//! ||x||^2 in double (finite x: no overflow; four stripes): the overflow guard's norm.
inline double norm_sq_double(const float* x, std::size_t n) noexcept {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (std::size_t l = 0; l < 4; ++l) s[l] += static_cast<double>(x[i + l]) * static_cast<double>(x[i + l]);
  for (; i < n; ++i) s[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

//! The largest norm a key of (layer, KV head h) can have: its key codec's bound
//! (`key_norm_bound`: the largest radius or fp16 value it stores) and, when the cache
//! keeps any key in fp16 (a sink or recent window, or the partial block of a codec that
//! encodes blocks of tokens, such as KIVI's 32), the fp16 window's (65504 per component).
template <class Cache>
double key_norm_bound(const Cache& cache, int layer, int h) {
  using K = typename Cache::key_codec;
  const auto& cfg = cache.config();
  return attended_key_norm_bound(K::key_norm_bound(cache.key(layer, h)),
                                 cfg.sink + cfg.recent > 0 || Cache::block_tokens > 1, cfg.head_dim);
}

//! Validates a decode call (allocates nothing: the views are taken again by the caller).
//! Rejects an unknown or empty sequence, a bad layer, a workspace made for another cache
//! or layer shape, a null or non-finite query (it would give a NaN output, or, through
//! the softmax, silently drop keys), a non-finite or negative scale, and a query head
//! whose scores could overflow float for a key the cache can hold (||q|| above
//! max_query_norm(key_norm_bound, scale), softmax.hpp; real queries are dozens of orders
//! of magnitude below).
template <class Cache>
void check_decode(const Cache& cache, int layer, std::span<const int> seqs, const float* q, float* out, float scale,
                  std::span<const attention_workspace> ws) {
  BGTQ_REQUIRE(q != nullptr && out != nullptr, errc::invalid_argument, "decode_attention: null query or output");
  BGTQ_REQUIRE(std::isfinite(scale) && scale >= 0.0f, errc::invalid_argument,
               "decode_attention: scale = " + std::to_string(scale) + " (must be finite and >= 0; 0 means 1/sqrt(head_dim))");
  const auto& cfg = cache.config();
  const std::size_t row = static_cast<std::size_t>(cfg.q_heads) * static_cast<std::size_t>(cfg.head_dim);
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    const float* qb = q + b * row;
    if (all_finite(qb, row)) continue;
    std::size_t i = 0;
    while (std::isfinite(qb[i])) ++i;
    fail(errc::non_finite, "decode_attention: query " + std::to_string(b) + " (sequence " + std::to_string(seqs[b]) +
                                    "), head " + std::to_string(i / static_cast<std::size_t>(cfg.head_dim)) + ", coordinate " +
                                    std::to_string(i % static_cast<std::size_t>(cfg.head_dim)) + " is not finite; nothing was computed");
  }
  // the layer first: an empty batch reads it too (an empty, moved-from cache has none)
  BGTQ_REQUIRE(layer >= 0 && layer < cfg.layers, errc::not_found,
               "decode_attention: layer " + std::to_string(layer) + " does not exist (layers: " + std::to_string(cfg.layers) + ")");
  for (int seq : seqs) {
    const auto v = cache.view(seq, layer);  // throws for an unknown sequence
    BGTQ_REQUIRE(v.quantized + v.sink + v.tail > 0, errc::invalid_argument,
                 "decode_attention: sequence " + std::to_string(seq) + " has no tokens in layer " + std::to_string(layer));
  }
  for (const attention_workspace& w : ws)  // (after the layer check: fits reads the layer's codecs)
    BGTQ_REQUIRE(w.fits(cache, layer), errc::invalid_argument,
                 "decode_attention: workspace was made for another cache shape or codec");
  // the overflow guard (after the layer check: the bound reads the layer's codecs)
  const int G = cfg.q_heads / cfg.kv_heads;
  const double sc = logit_scale(scale, cfg.head_dim);
  for (int h = 0; h < cfg.kv_heads; ++h) {
    const double kb = key_norm_bound(cache, layer, h);
    const double qmax = max_query_norm(kb, sc);
    for (std::size_t b = 0; b < seqs.size(); ++b)
      for (int g = 0; g < G; ++g) {
        const std::size_t hq = static_cast<std::size_t>(h) * static_cast<std::size_t>(G) + static_cast<std::size_t>(g);
        const float* qh = q + b * row + hq * static_cast<std::size_t>(cfg.head_dim);
        // in double like the GPU's rotate_query_kernel (another summation order: the two
        // can differ only for a norm within ~1e-15 relative of qmax)
        const double qn = std::sqrt(norm_sq_double(qh, static_cast<std::size_t>(cfg.head_dim)));
        if (qn <= qmax) continue;
        char buf[320];
        std::snprintf(buf, sizeof buf,
                      "decode_attention: query %zu (sequence %d), head %zu has norm %.4g; with scale %.4g and keys of "
                      "layer %d, KV head %d up to norm %.4g, its scores could exceed 2^126 and overflow float (the "
                      "largest accepted query norm is %.4g); nothing was computed",
                      b, seqs[b], hq, qn, sc, layer, h, kb, qmax);
        fail(errc::invalid_argument, buf);
      }
  }
}

}  // namespace detail

//! Decode attention for one layer.
//! @param cache the KV cache holding the sequences (read only)
//! @param layer the layer to attend over, in [0, layers)
//! @param seqs  sequence ids (batch B); each must hold at least one token in `layer`
//! @param q     [B][q_heads][head_dim] post-RoPE queries of the new tokens
//! @param out   [B][q_heads][head_dim] attention outputs
//! @param ws    scratch sized for this cache (attention_workspace(cache), or one that
//!              fits() it); reusable across calls, one per thread
//! @param scale logit scale; 0 means 1/sqrt(head_dim)
//! @throws bgtq::error for an unknown sequence, an empty one, a non-finite query
//!         (`non_finite`), a query whose scores could overflow float (`invalid_argument`:
//!         its norm above max_query_norm of the keys' bound, softmax.hpp), a non-finite
//!         or negative scale, or a workspace made for another cache shape; `out` is then
//!         untouched.
template <class Cache>
void decode_attention(const Cache& cache, int layer, std::span<const int> seqs, const float* q, float* out,
                      attention_workspace& ws, float scale = 0.0f) {
  const auto& cfg = cache.config();
  detail::check_decode(cache, layer, seqs, q, out, scale, std::span<const attention_workspace>(&ws, 1));
  const int G = cfg.q_heads / cfg.kv_heads;
  const std::size_t D = static_cast<std::size_t>(cfg.head_dim);
  const float sc = logit_scale(scale, cfg.head_dim);
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    const auto view = cache.view(seqs[b], layer);
    for (int h = 0; h < cfg.kv_heads; ++h) {
      const std::size_t off = (b * static_cast<std::size_t>(cfg.q_heads) + static_cast<std::size_t>(h) * G) * D;
      detail::attend_head(cache, layer, seqs[b], view, h, q + off, out + off, ws, sc);
    }
  }
}

//! decode_attention with the (sequence, KV head) pairs spread over a thread pool; one
//! workspace per pool worker (ws.size() >= pool.size()). Results are bit-identical to the
//! single-threaded call (each pair is computed by one thread in the same order).
template <class Cache>
void decode_attention(const Cache& cache, int layer, std::span<const int> seqs, const float* q, float* out,
                      thread_pool& pool, std::span<attention_workspace> ws, float scale = 0.0f) {
  const auto& cfg = cache.config();
  BGTQ_REQUIRE(ws.size() >= static_cast<std::size_t>(pool.size()), errc::invalid_argument,
               "decode_attention: " + std::to_string(ws.size()) + " workspaces for a pool of " + std::to_string(pool.size()));
  detail::check_decode(cache, layer, seqs, q, out, scale,
                       std::span<const attention_workspace>(ws.data(), static_cast<std::size_t>(pool.size())));
  const int G = cfg.q_heads / cfg.kv_heads;
  const std::size_t D = static_cast<std::size_t>(cfg.head_dim);
  const float sc = logit_scale(scale, cfg.head_dim);
  const int tasks = static_cast<int>(seqs.size()) * cfg.kv_heads;
  pool.run(tasks, [&](int t, int worker) {
    const std::size_t b = static_cast<std::size_t>(t / cfg.kv_heads);
    const int h = t % cfg.kv_heads;
    const std::size_t off = (b * static_cast<std::size_t>(cfg.q_heads) + static_cast<std::size_t>(h) * G) * D;
    detail::attend_head(cache, layer, seqs[b], cache.view(seqs[b], layer), h, q + off, out + off,
                        ws[static_cast<std::size_t>(worker)], sc);
  });
}

}  // namespace bgtq
