#pragma once
//! @file cache/kv_cache.hpp
//! The packed, paged KV cache of a whole model (layers x KV heads) for many sequences.
//!
//! Storage: a pool of `max_pages` pages fixed at construction. A page holds
//! `page_tokens` (P) consecutive quantized tokens of one sequence for EVERY (layer,
//! KV head), like paged-attention engines: a sequence's page table is shared by all
//! layers. Per (layer, head) the page part is structure-of-arrays:
//! `// pool = [layer][kv_head] arenas; arena(l,h) = [page id][page_bytes(l,h)];
//! //  page(l,h) = [key part: KeyCodec layout][value part: ValueCodec layout], 64-byte aligned`
//! (see gtq_pages.hpp / fp16_pages.hpp / kivi_pages.hpp for each part).
//!
//! fp16 window: the first `sink` tokens and the last `recent` tokens of each sequence
//! stay in fp16, unquantized (`// window(l) = [kv_head][slot][D] fp16` for K and V).
//! Codecs that encode blocks of tokens (KIVI keys: 32) also keep the incomplete block
//! there until it fills. Tokens leave the recent window oldest first, in blocks, into
//! pages. Positions: [0, sink) window, then pages, then the recent tail.
//!
//! Errors leave the cache unchanged: a bad sequence id, a shape problem, non-finite
//! input under the `reject` policy, or too few free pages are all detected before
//! anything is written. Mutation (add/free/append) is not thread-safe; attention over a
//! const cache may run in parallel with one workspace per thread. The pool is allocated
//! once; append allocates nothing on the heap.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../codec/tq_quantizer.hpp"
#include "../core/error.hpp"
#include "../core/half.hpp"
#include "../core/simd.hpp"
#include "../plan/plan.hpp"
#include "page_layout.hpp"

namespace bgtq {

//! What to do with NaN/Inf keys or values.
enum class nonfinite_policy : unsigned char {
  reject = 0,  //!< throw errc::non_finite; nothing is appended (default)
  zero = 1,    //!< store a zero vector instead and count it in stats().nonfinite
};

//! Shape and capacity of a cache.
struct cache_config {
  int layers = 0;        //!< model layers
  int kv_heads = 0;      //!< KV heads per layer
  int q_heads = 0;       //!< query heads per layer (multiple of kv_heads)
  int head_dim = 0;      //!< D
  int page_tokens = 64;  //!< P: tokens per page (multiple of the layout's page_multiple)
  int max_pages = 0;     //!< pool size in pages (each page spans all layers and heads)
  int sink = 0;          //!< first tokens of each sequence kept in fp16
  int recent = 0;        //!< last tokens of each sequence kept in fp16
  nonfinite_policy nonfinite = nonfinite_policy::reject;
};

//! Paged KV cache with compile-time codecs and page layout.
//! @tparam KeyCodec   page codec of the keys (gtq_pages, fp16_pages, kivi_key_pages)
//! @tparam ValueCodec page codec of the values (gtq_pages, fp16_pages, kivi_value_pages)
//! @tparam Layout     how packed codes sit in a page (bit_plane_layout, token_major_layout)
template <class KeyCodec, class ValueCodec, class Layout = bit_plane_layout>
class kv_cache {
 public:
  using key_codec = KeyCodec;
  using value_codec = ValueCodec;
  using layout = Layout;
  using key_state = typename KeyCodec::head_state;
  using value_state = typename ValueCodec::head_state;
  //! Tokens encoded together (the larger of the two codecs' blocks).
  static constexpr int block_tokens =
      KeyCodec::tokens_per_block > ValueCodec::tokens_per_block ? KeyCodec::tokens_per_block : ValueCodec::tokens_per_block;

  //! Builds the cache; `keys` and `values` hold one codec state per (layer, KV head),
  //! index layer * kv_heads + h. Allocates the whole page pool.
  //! @throws bgtq::error: shape_mismatch / invalid_argument (config, states),
  //!         capacity_exhausted (the pool, or any of the cache's own tables, such as the
  //!         free list of 4 bytes per page, cannot be allocated: never std::bad_alloc)
  kv_cache(const cache_config& cfg, std::vector<key_state> keys, std::vector<value_state> values) try
      : cfg_(cfg), keys_(std::move(keys)), values_(std::move(values)) {
    validate_config();
    const std::size_t nh = static_cast<std::size_t>(cfg_.layers) * static_cast<std::size_t>(cfg_.kv_heads);
    BGTQ_REQUIRE(keys_.size() == nh && values_.size() == nh, errc::shape_mismatch,
                 "kv_cache: " + std::to_string(keys_.size()) + " key and " + std::to_string(values_.size()) +
                     " value codec states for " + std::to_string(nh) + " (layer, KV head) pairs");
    head_off_.resize(nh);
    head_bytes_.resize(nh);
    key_bytes_.resize(nh);
    std::size_t off = 0;
    // a pool no machine holds is an error naming its size, not std::bad_alloc (nor, under
    // AddressSanitizer, an abort on the allocation size: its allocator's limit is 1 TiB, so
    // the limit is that there); checked before each product and sum, which would
    // otherwise wrap around 2^64 into a small pool
    constexpr std::size_t pool_limit = std::size_t{1} << (BGTQ_ASAN ? 40 : 46);
    for (std::size_t i = 0; i < nh; ++i) {
      BGTQ_REQUIRE(keys_[i].dim() == cfg_.head_dim && values_[i].dim() == cfg_.head_dim, errc::shape_mismatch,
                   "kv_cache: codec state " + std::to_string(i) + " has head_dim " + std::to_string(keys_[i].dim()) +
                       "/" + std::to_string(values_[i].dim()) + ", cache has " + std::to_string(cfg_.head_dim));
      key_bytes_[i] = KeyCodec::template configure<Layout>(keys_[i], cfg_.page_tokens);
      head_bytes_[i] = key_bytes_[i] + ValueCodec::template configure<Layout>(values_[i], cfg_.page_tokens);
      head_off_[i] = off;
      const std::size_t pages = static_cast<std::size_t>(cfg_.max_pages);  // >= 0 (validate_config)
      if (pages > 0 && (head_bytes_[i] > pool_limit / pages || off > pool_limit - head_bytes_[i] * pages))
        fail(errc::capacity_exhausted, "kv_cache: a pool of " + std::to_string(cfg_.max_pages) + " pages of " + std::to_string(nh) +
                                           " (layer, KV head) parts of up to " + std::to_string(head_bytes_[i]) +
                                           " bytes each is beyond the pool limit of " +
                                           (BGTQ_ASAN ? "1 TiB (AddressSanitizer's allocator)" : "64 TiB"));
      off += head_bytes_[i] * pages;
      page_bytes_ += head_bytes_[i];
    }
    pool_bytes_ = off;
    try {
      pool_.reset(static_cast<std::uint8_t*>(::operator new[](pool_bytes_ > 0 ? pool_bytes_ : 1, std::align_val_t(64))));
    } catch (const std::bad_alloc&) {
      fail(errc::capacity_exhausted, "kv_cache: cannot allocate the page pool of " + std::to_string(pool_bytes_) + " bytes (" +
                                         std::to_string(cfg_.max_pages) + " pages x " + std::to_string(page_bytes_) + ")");
    }
    std::memset(pool_.get(), 0, pool_bytes_);
    free_pages_.reserve(static_cast<std::size_t>(cfg_.max_pages));
    for (int p = cfg_.max_pages - 1; p >= 0; --p) free_pages_.push_back(p);
    tail_cap_ = cfg_.recent + block_tokens;
    scratch_.resize(static_cast<std::size_t>(block_tokens) * static_cast<std::size_t>(cfg_.head_dim) * 2u);
    zero_row_.assign(static_cast<std::size_t>(cfg_.head_dim), 0.0f);
  } catch (const std::bad_alloc&) {
    // the per-head tables, the free list (4 bytes per page: all a pool of zero-byte pages
    // costs) and the encode scratch; the pool itself has its own message above
    fail(errc::capacity_exhausted, "kv_cache: cannot allocate the cache's tables for " + std::to_string(cfg.max_pages) +
                                       " pages (the free list alone is " +
                                       std::to_string(4ull * static_cast<unsigned long long>(cfg.max_pages > 0 ? cfg.max_pages : 0)) +
                                       " bytes) and " + std::to_string(cfg.layers) + " x " + std::to_string(cfg.kv_heads) +
                                       " (layer, KV head) parts");
  }

  kv_cache(const kv_cache&) = delete;
  kv_cache& operator=(const kv_cache&) = delete;
  //! A moved-from cache is empty: no layers, heads, pages or sequences (config() is a
  //! default cache_config, the byte counts are 0, group_size() 0), so every (layer,
  //! head), page or sequence it is asked for is not_found, and add_sequence and
  //! attention_workspace refuse it (invalid_argument).
  kv_cache(kv_cache&& o) noexcept { *this = std::move(o); }
  kv_cache& operator=(kv_cache&& o) noexcept {
    if (this == &o) return *this;
    cfg_ = std::exchange(o.cfg_, cache_config{});
    keys_ = std::exchange(o.keys_, {});
    values_ = std::exchange(o.values_, {});
    head_off_ = std::exchange(o.head_off_, {});
    head_bytes_ = std::exchange(o.head_bytes_, {});
    key_bytes_ = std::exchange(o.key_bytes_, {});
    page_bytes_ = std::exchange(o.page_bytes_, 0);
    pool_bytes_ = std::exchange(o.pool_bytes_, 0);
    pool_ = std::move(o.pool_);
    free_pages_ = std::exchange(o.free_pages_, {});
    seqs_ = std::exchange(o.seqs_, {});
    tail_cap_ = std::exchange(o.tail_cap_, 1);
    scratch_ = std::exchange(o.scratch_, {});
    zero_row_ = std::exchange(o.zero_row_, {});
    stats_ = std::exchange(o.stats_, {});
    return *this;
  }

  const cache_config& config() const noexcept { return cfg_; }
  //! q_heads / kv_heads (0 for an empty, moved-from cache).
  int group_size() const noexcept { return cfg_.kv_heads > 0 ? cfg_.q_heads / cfg_.kv_heads : 0; }
  const key_state& key(int layer, int h) const { return keys_[head_index(layer, h)]; }
  const value_state& value(int layer, int h) const { return values_[head_index(layer, h)]; }

  // ------------------------------------------------------------------ sequences
  //! Starts a new, empty sequence and returns its id (ids of freed sequences are reused).
  int add_sequence() {
    BGTQ_REQUIRE(cfg_.layers >= 1, errc::invalid_argument, "kv_cache: add_sequence on an empty (moved-from) cache");
    int id = -1;
    for (std::size_t i = 0; i < seqs_.size(); ++i)
      if (!seqs_[i].live) {
        id = static_cast<int>(i);
        break;
      }
    bool added = false;
    // built aside and moved into its slot last: an allocation failure leaves no half-made
    // sequence behind (and no new slot)
    seq_state s;
    const std::size_t lh = static_cast<std::size_t>(cfg_.layers) * static_cast<std::size_t>(cfg_.kv_heads) *
                           static_cast<std::size_t>(cfg_.head_dim);
    try {
      if (id < 0) {
        id = static_cast<int>(seqs_.size());
        seqs_.emplace_back();
        added = true;
      }
      // the page table for the whole pool (4 bytes per pool page): append never allocates
      s.pages.reserve(static_cast<std::size_t>(cfg_.max_pages));
      s.length.assign(static_cast<std::size_t>(cfg_.layers), 0);
      s.quantized.assign(static_cast<std::size_t>(cfg_.layers), 0);
      s.tail_start.assign(static_cast<std::size_t>(cfg_.layers), 0);
      s.sink_k.assign(lh * static_cast<std::size_t>(cfg_.sink), 0);
      s.sink_v.assign(lh * static_cast<std::size_t>(cfg_.sink), 0);
      s.tail_k.assign(lh * static_cast<std::size_t>(tail_cap_), 0);
      s.tail_v.assign(lh * static_cast<std::size_t>(tail_cap_), 0);
    } catch (const std::bad_alloc&) {
      if (added) seqs_.pop_back();
      fail(errc::capacity_exhausted, "kv_cache: cannot allocate sequence " + std::to_string(id) + "'s page table and fp16 window (" +
                                         std::to_string(4 * lh * static_cast<std::size_t>(cfg_.sink + tail_cap_)) + " bytes)");
    }
    s.live = true;
    seqs_[static_cast<std::size_t>(id)] = std::move(s);
    return id;
  }

  //! Frees a sequence and returns its pages to the pool.
  //! @throws bgtq::error(not_found) for an unknown id.
  void free_sequence(int seq) {
    seq_state& s = live_seq(seq);
    for (auto it = s.pages.rbegin(); it != s.pages.rend(); ++it) free_pages_.push_back(*it);
    s = seq_state{};
  }

  bool has_sequence(int seq) const noexcept {
    return seq >= 0 && static_cast<std::size_t>(seq) < seqs_.size() && seqs_[static_cast<std::size_t>(seq)].live;
  }
  //! Tokens appended to `layer` of a sequence.
  std::int64_t length(int seq, int layer = 0) const { return live_seq(seq).length.at(checked_layer(layer)); }

  //! Appends `tokens` new tokens to one layer of a sequence: k and v are
  //! [tokens][kv_heads][head_dim] float32, post-RoPE keys. Appending a chunk is prefill.
  //! @throws not_found (bad id or layer), invalid_argument (count), non_finite (reject
  //!         policy: names the token, head and K/V), capacity_exhausted (too few free
  //!         pages). In every error case the cache is unchanged.
  void append(int seq, int layer, const float* k, const float* v, int tokens) {
    seq_state& s = live_seq(seq);
    const std::size_t l = checked_layer(layer);
    BGTQ_REQUIRE(tokens >= 0, errc::invalid_argument, "append: negative token count " + std::to_string(tokens));
    if (tokens == 0) return;
    BGTQ_REQUIRE(k != nullptr && v != nullptr, errc::invalid_argument, "append: null key or value pointer");
    const std::size_t D = static_cast<std::size_t>(cfg_.head_dim);
    const std::size_t H = static_cast<std::size_t>(cfg_.kv_heads);
    // 1. input check (nothing written yet)
    std::uint64_t bad = 0;
    for (int i = 0; i < tokens; ++i)
      for (std::size_t h = 0; h < H; ++h)
        for (int which = 0; which < 2; ++which) {
          const float* row = (which ? v : k) + (static_cast<std::size_t>(i) * H + h) * D;
          if (detail::all_finite(row, D)) continue;
          if (cfg_.nonfinite == nonfinite_policy::reject)
            fail(errc::non_finite, std::string("append: ") + (which ? "value" : "key") + " of token " +
                                       std::to_string(length(seq, layer) + i) + " (chunk row " + std::to_string(i) +
                                       "), layer " + std::to_string(layer) + ", kv_head " + std::to_string(h) +
                                       " is not finite; nothing was appended");
          ++bad;
        }
    // 2. capacity (nothing written yet)
    const std::int64_t len1 = s.length[l] + tokens;
    const std::int64_t q1 = quantized_after(len1);
    const std::size_t need = static_cast<std::size_t>((q1 + cfg_.page_tokens - 1) / cfg_.page_tokens);
    if (need > s.pages.size()) {
      const std::size_t extra = need - s.pages.size();
      if (extra > free_pages_.size())
        fail(errc::capacity_exhausted, "append: sequence " + std::to_string(seq) + " needs " + std::to_string(extra) +
                                           " more page(s) of " + std::to_string(cfg_.page_tokens) + " tokens but " +
                                           std::to_string(free_pages_.size()) + " of " + std::to_string(cfg_.max_pages) +
                                           " are free; nothing was appended");
      for (std::size_t i = 0; i < extra; ++i) {
        const int p = free_pages_.back();
        free_pages_.pop_back();
        clear_page(p);
        s.pages.push_back(p);
      }
    }
    stats_.nonfinite += bad;
    // 3. write
    for (int i = 0; i < tokens; ++i) {
      const std::int64_t pos = s.length[l];
      const float* krow = k + static_cast<std::size_t>(i) * H * D;
      const float* vrow = v + static_cast<std::size_t>(i) * H * D;
      if (pos < cfg_.sink) {
        for (std::size_t h = 0; h < H; ++h) {
          const std::size_t base = ((l * H + h) * static_cast<std::size_t>(cfg_.sink) + static_cast<std::size_t>(pos)) * D;
          store_half_row(s.sink_k.data() + base, safe_row(krow + h * D));
          store_half_row(s.sink_v.data() + base, safe_row(vrow + h * D));
        }
      } else if (cfg_.recent == 0 && block_tokens == 1) {
        // straight into a page slot, encoded from the float input
        const std::int64_t qi = s.quantized[l];
        for (std::size_t h = 0; h < H; ++h) {
          std::uint8_t* page = page_ptr_mut(s.pages[static_cast<std::size_t>(qi / cfg_.page_tokens)], layer, static_cast<int>(h));
          const int slot = static_cast<int>(qi % cfg_.page_tokens);
          const std::size_t lh = l * H + h;
          KeyCodec::template encode_block<Layout>(keys_[lh], safe_row(krow + h * D), D, 1, page, slot, &stats_);
          encode_values(lh, safe_row(vrow + h * D), 1, page + key_bytes_[lh], slot);
        }
        ++s.quantized[l];
      } else {
        const std::int64_t tail_len = s.length[l] - sink_len(s.length[l]) - s.quantized[l];
        const int slot = static_cast<int>((s.tail_start[l] + tail_len) % tail_cap_);
        for (std::size_t h = 0; h < H; ++h) {
          const std::size_t base = ((l * H + h) * static_cast<std::size_t>(tail_cap_) + static_cast<std::size_t>(slot)) * D;
          store_half_row(s.tail_k.data() + base, safe_row(krow + h * D));
          store_half_row(s.tail_v.data() + base, safe_row(vrow + h * D));
        }
        if (tail_len + 1 >= cfg_.recent + block_tokens) flush_block(s, l, layer);
      }
      ++s.length[l];
    }
  }

  // ------------------------------------------------------------------ memory
  //! Bytes of one page across all layers and KV heads.
  std::size_t page_bytes() const noexcept { return page_bytes_; }
  //! Bytes of one page of one (layer, KV head).
  std::size_t head_page_bytes(int layer, int h) const { return head_bytes_[head_index(layer, h)]; }
  //! Packed bytes per quantized token for one (layer, KV head): codes + radii + per-block
  //! metadata, including the page part's alignment padding.
  double bytes_per_token(int layer, int h) const {
    return static_cast<double>(head_page_bytes(layer, h)) / static_cast<double>(cfg_.page_tokens);
  }
  int pages_total() const noexcept { return cfg_.max_pages; }
  int pages_free() const noexcept { return static_cast<int>(free_pages_.size()); }
  int pages_used() const noexcept { return cfg_.max_pages - pages_free(); }
  //! Bytes holding live data: pages in use plus the occupied fp16 window slots.
  std::size_t bytes_used() const {
    std::size_t b = static_cast<std::size_t>(pages_used()) * page_bytes_;
    const std::size_t row = static_cast<std::size_t>(cfg_.kv_heads) * static_cast<std::size_t>(cfg_.head_dim) * 2u * 2u;
    for (const auto& s : seqs_) {
      if (!s.live) continue;
      for (std::size_t l = 0; l < static_cast<std::size_t>(cfg_.layers); ++l)
        b += static_cast<std::size_t>(s.length[l] - s.quantized[l]) * row;
    }
    return b;
  }
  //! Bytes of the page pool plus the fp16 window buffers of live sequences: the memory
  //! that grows with max_pages and with the sequences. Not counted: the codec states
  //! (rotations, codebooks: fixed per (layer, KV head) when the cache is built), each
  //! sequence's page table (4 bytes per pool page) and the free list (4 per pool page).
  std::size_t bytes_reserved() const {
    std::size_t b = pool_bytes_;
    for (const auto& s : seqs_)
      if (s.live) b += (s.sink_k.size() + s.sink_v.size() + s.tail_k.size() + s.tail_v.size()) * 2u;
    return b;
  }
  //! The page pool, read-only: every page of every (layer, KV head), bytes_reserved()
  //! less the fp16 window buffers. For tools that need the address range, e.g. a
  //! benchmark that flushes it from the CPU caches before a step (bench::flush_decode_reads).
  std::span<const std::uint8_t> pool() const noexcept { return {pool_.get(), pool_bytes_}; }
  //! Counters of everything encoded so far.
  const encode_stats& stats() const noexcept { return stats_; }

  // ------------------------------------------------------------------ access (attention, tests)
  //! Page part of (layer, h) in page `page`.
  //! @throws bgtq::error(not_found) for a page id outside [0, max_pages) or a bad (layer, h)
  const std::uint8_t* page_ptr(int page, int layer, int h) const {
    const std::size_t i = head_index(layer, h);
    BGTQ_REQUIRE(page >= 0 && page < cfg_.max_pages, errc::not_found,
                 "kv_cache: page " + std::to_string(page) + " outside the pool [0, " + std::to_string(cfg_.max_pages) + ")");
    return page_base(layer, h) + static_cast<std::size_t>(page) * head_bytes_[i];
  }
  //! Base of the (layer, h) page parts: page p's part starts at
  //! `page_base(layer, h) + p * head_page_bytes(layer, h)`. For inner loops over a
  //! sequence's page table (whose ids are valid by construction); page_ptr checks the id.
  const std::uint8_t* page_base(int layer, int h) const { return pool_.get() + head_off_[head_index(layer, h)]; }
  //! Offset of the value part inside a (layer, h) page part.
  std::size_t value_offset(int layer, int h) const { return key_bytes_[head_index(layer, h)]; }

  //! A sequence's layout for one layer, as attention needs it.
  struct sequence_view {
    const int* pages = nullptr;      //!< page table
    std::int64_t quantized = 0;      //!< tokens in pages
    std::int64_t sink = 0;           //!< tokens in the sink window
    std::int64_t tail = 0;           //!< tokens in the recent window
    int tail_start = 0;              //!< ring index of the oldest tail token
  };
  sequence_view view(int seq, int layer) const {
    const seq_state& s = live_seq(seq);
    const std::size_t l = checked_layer(layer);
    sequence_view v;
    v.pages = s.pages.data();
    v.quantized = s.quantized[l];
    v.sink = sink_len(s.length[l]);
    v.tail = s.length[l] - v.sink - v.quantized;
    v.tail_start = s.tail_start[l];
    return v;
  }
  //! fp16 row of window token i (i < sink: sink slot i; else tail token i - sink, oldest first).
  //! @throws bgtq::error(not_found) for a bad sequence, layer, KV head or i outside [0, sink + tail)
  const std::uint16_t* window_key(int seq, int layer, int h, std::int64_t i) const { return window_row(seq, layer, h, i, false); }
  const std::uint16_t* window_value(int seq, int layer, int h, std::int64_t i) const { return window_row(seq, layer, h, i, true); }

  //! The fp16 window of one (sequence, layer, KV head), checked once: row i (same order as
  //! window_key) without a per-row lookup, for inner loops. Valid until the next append to
  //! or removal of the sequence.
  struct window_rows {
    const std::uint16_t* sink_k = nullptr;  //!< sink slot i at sink_k + i * dim
    const std::uint16_t* sink_v = nullptr;
    const std::uint16_t* tail_k = nullptr;  //!< ring slot r at tail_k + r * dim
    const std::uint16_t* tail_v = nullptr;
    std::int64_t sink = 0, tail = 0;        //!< tokens in each part
    int tail_start = 0, tail_cap = 1, dim = 0;
    std::int64_t size() const noexcept { return sink + tail; }
    //! Row i in [0, size()) (unchecked).
    const std::uint16_t* key(std::int64_t i) const noexcept { return row(sink_k, tail_k, i); }
    const std::uint16_t* value(std::int64_t i) const noexcept { return row(sink_v, tail_v, i); }

   private:
    const std::uint16_t* row(const std::uint16_t* s, const std::uint16_t* t, std::int64_t i) const noexcept {
      if (i < sink) return s + static_cast<std::size_t>(i) * static_cast<std::size_t>(dim);
      std::int64_t r = tail_start + (i - sink);
      if (r >= tail_cap) r -= tail_cap;
      return t + static_cast<std::size_t>(r) * static_cast<std::size_t>(dim);
    }
  };
  //! @throws bgtq::error(not_found) for a bad sequence, layer or KV head
  window_rows window(int seq, int layer, int h) const {
    const seq_state& s = live_seq(seq);
    const std::size_t l = checked_layer(layer);
    const std::size_t lh = head_index(layer, h);  // throws for a bad KV head
    const std::size_t D = static_cast<std::size_t>(cfg_.head_dim);
    window_rows w;
    w.sink = sink_len(s.length[l]);
    w.tail = s.length[l] - w.sink - s.quantized[l];
    w.tail_start = s.tail_start[l];
    w.tail_cap = tail_cap_;
    w.dim = cfg_.head_dim;
    w.sink_k = s.sink_k.data() + lh * static_cast<std::size_t>(cfg_.sink) * D;
    w.sink_v = s.sink_v.data() + lh * static_cast<std::size_t>(cfg_.sink) * D;
    w.tail_k = s.tail_k.data() + lh * static_cast<std::size_t>(tail_cap_) * D;
    w.tail_v = s.tail_v.data() + lh * static_cast<std::size_t>(tail_cap_) * D;
    return w;
  }

  //! Decodes the key at position t into x[head_dim] (reference and tests; not a hot path).
  //! @throws bgtq::error(invalid_argument) for a null x or t outside the sequence, not_found
  //!         for a bad sequence, layer or KV head
  void decode_key(int seq, int layer, int h, std::int64_t t, float* x) const { decode(seq, layer, h, t, x, false); }
  //! Decodes the value at position t.
  void decode_value(int seq, int layer, int h, std::int64_t t, float* x) const { decode(seq, layer, h, t, x, true); }

 private:
  struct seq_state {
    bool live = false;
    std::vector<int> pages;
    std::vector<std::int64_t> length, quantized;
    std::vector<int> tail_start;
    std::vector<std::uint16_t> sink_k, sink_v, tail_k, tail_v;
  };

  void validate_config() const {
    const auto& c = cfg_;
    BGTQ_REQUIRE(c.layers >= 1, errc::invalid_argument, "cache_config: layers = " + std::to_string(c.layers) + " (must be >= 1)");
    BGTQ_REQUIRE(c.kv_heads >= 1, errc::invalid_argument,
                 "cache_config: kv_heads = " + std::to_string(c.kv_heads) + " (must be >= 1)");
    BGTQ_REQUIRE(c.head_dim >= 2 && c.head_dim % 2 == 0 && c.head_dim <= max_codec_dim, errc::invalid_argument,
                 "cache_config: head_dim = " + std::to_string(c.head_dim) + " (must be even, 2 .. " +
                     std::to_string(max_codec_dim) + ")");
    BGTQ_REQUIRE(c.q_heads >= c.kv_heads && c.q_heads % c.kv_heads == 0, errc::invalid_argument,
                 "cache_config: q_heads " + std::to_string(c.q_heads) + " is not a multiple of kv_heads " +
                     std::to_string(c.kv_heads));
    // as a plan's (max_plan_q_heads): the decode workspace holds G = q_heads / kv_heads
    // heads' scores, so an unbounded G would surface as std::bad_alloc there
    BGTQ_REQUIRE(c.q_heads <= max_plan_q_heads, errc::invalid_argument,
                 "cache_config: q_heads = " + std::to_string(c.q_heads) + " (must be at most " +
                     std::to_string(max_plan_q_heads) + ")");
    check_page_tokens<Layout>(c.page_tokens, block_tokens, "cache_config");
    BGTQ_REQUIRE(c.nonfinite == nonfinite_policy::reject || c.nonfinite == nonfinite_policy::zero, errc::invalid_argument,
                 "cache_config: nonfinite = " + std::to_string(static_cast<int>(c.nonfinite)) +
                     " is not a nonfinite_policy (reject or zero)");
    BGTQ_REQUIRE(c.max_pages >= 0, errc::invalid_argument,
                 "cache_config: max_pages = " + std::to_string(c.max_pages) + " (must be >= 0)");
    BGTQ_REQUIRE(c.sink >= 0 && c.sink <= 65536, errc::invalid_argument,
                 "cache_config: sink = " + std::to_string(c.sink) + " (must be in 0 .. 65536)");
    BGTQ_REQUIRE(c.recent >= 0 && c.recent <= 65536, errc::invalid_argument,
                 "cache_config: recent = " + std::to_string(c.recent) + " (must be in 0 .. 65536)");
  }
  std::size_t head_index(int layer, int h) const {
    BGTQ_REQUIRE(layer >= 0 && layer < cfg_.layers && h >= 0 && h < cfg_.kv_heads, errc::not_found,
                 "kv_cache: no (layer " + std::to_string(layer) + ", kv_head " + std::to_string(h) + ")");
    return static_cast<std::size_t>(layer) * static_cast<std::size_t>(cfg_.kv_heads) + static_cast<std::size_t>(h);
  }
  std::size_t checked_layer(int layer) const {
    BGTQ_REQUIRE(layer >= 0 && layer < cfg_.layers, errc::not_found,
                 "kv_cache: layer " + std::to_string(layer) + " does not exist (layers: " + std::to_string(cfg_.layers) + ")");
    return static_cast<std::size_t>(layer);
  }
  seq_state& live_seq(int seq) {
    BGTQ_REQUIRE(has_sequence(seq), errc::not_found, "kv_cache: sequence " + std::to_string(seq) + " does not exist");
    return seqs_[static_cast<std::size_t>(seq)];
  }
  const seq_state& live_seq(int seq) const {
    BGTQ_REQUIRE(has_sequence(seq), errc::not_found, "kv_cache: sequence " + std::to_string(seq) + " does not exist");
    return seqs_[static_cast<std::size_t>(seq)];
  }
  std::int64_t sink_len(std::int64_t len) const { return len < cfg_.sink ? len : cfg_.sink; }
  //! Tokens in pages once a layer holds `len` tokens.
  std::int64_t quantized_after(std::int64_t len) const {
    const std::int64_t rest = len - sink_len(len);
    if (rest < cfg_.recent + block_tokens) return 0;
    return ((rest - cfg_.recent) / block_tokens) * block_tokens;
  }
  std::uint8_t* page_ptr_mut(int page, int layer, int h) {
    const std::size_t i = static_cast<std::size_t>(layer) * static_cast<std::size_t>(cfg_.kv_heads) + static_cast<std::size_t>(h);
    return pool_.get() + head_off_[i] + static_cast<std::size_t>(page) * head_bytes_[i];
  }
  void clear_page(int page) {
    for (int l = 0; l < cfg_.layers; ++l)
      for (int h = 0; h < cfg_.kv_heads; ++h)
        std::memset(page_ptr_mut(page, l, h), 0, head_bytes_[static_cast<std::size_t>(l) * cfg_.kv_heads + h]);
  }
  const float* safe_row(const float* row) const {
    return detail::all_finite(row, static_cast<std::size_t>(cfg_.head_dim)) ? row : zero_row_.data();
  }
  void store_half_row(std::uint16_t* dst, const float* src) {
    for (int j = 0; j < cfg_.head_dim; ++j) {
      if (beyond_half(src[j])) ++stats_.clamped_radii;
      dst[j] = float_to_half_bits(saturate_half(src[j]));
    }
  }
  //! Encodes nt value rows of (layer, head) lh into a page part. `vectors` counts tokens
  //! once (through the keys); value radii clamped to fp16 and zero values count here.
  void encode_values(std::size_t lh, const float* x, int nt, std::uint8_t* part, int slot) {
    encode_stats vs;
    ValueCodec::template encode_block<Layout>(values_[lh], x, static_cast<std::size_t>(cfg_.head_dim), nt, part, slot, &vs);
    stats_.clamped_radii += vs.clamped_radii;
    stats_.zero_vectors += vs.zero_vectors;
  }
  //! Moves the oldest block_tokens tail tokens of layer l into pages.
  void flush_block(seq_state& s, std::size_t l, int layer) {
    const std::size_t D = static_cast<std::size_t>(cfg_.head_dim);
    const std::size_t H = static_cast<std::size_t>(cfg_.kv_heads);
    const std::int64_t qi = s.quantized[l];
    const int page = s.pages[static_cast<std::size_t>(qi / cfg_.page_tokens)];
    const int slot = static_cast<int>(qi % cfg_.page_tokens);
    float* kx = scratch_.data();
    float* vx = scratch_.data() + static_cast<std::size_t>(block_tokens) * D;
    for (std::size_t h = 0; h < H; ++h) {
      for (int i = 0; i < block_tokens; ++i) {
        const int rs = (s.tail_start[l] + i) % tail_cap_;
        const std::size_t base = ((l * H + h) * static_cast<std::size_t>(tail_cap_) + static_cast<std::size_t>(rs)) * D;
        for (std::size_t j = 0; j < D; ++j) {
          kx[static_cast<std::size_t>(i) * D + j] = half_bits_to_float(s.tail_k[base + j]);
          vx[static_cast<std::size_t>(i) * D + j] = half_bits_to_float(s.tail_v[base + j]);
        }
      }
      std::uint8_t* p = page_ptr_mut(page, layer, static_cast<int>(h));
      const std::size_t lh = l * H + h;
      KeyCodec::template encode_block<Layout>(keys_[lh], kx, D, block_tokens, p, slot, &stats_);
      encode_values(lh, vx, block_tokens, p + key_bytes_[lh], slot);
    }
    s.tail_start[l] = (s.tail_start[l] + block_tokens) % tail_cap_;
    s.quantized[l] += block_tokens;
  }
  const std::uint16_t* window_row(int seq, int layer, int h, std::int64_t i, bool val) const {
    const window_rows w = window(seq, layer, h);
    BGTQ_REQUIRE(i >= 0 && i < w.size(), errc::not_found,
                 "kv_cache: window token " + std::to_string(i) + " of sequence " + std::to_string(seq) + ", layer " +
                     std::to_string(layer) + " (the window holds " + std::to_string(w.size()) + ")");
    return val ? w.value(i) : w.key(i);
  }
  void decode(int seq, int layer, int h, std::int64_t t, float* x, bool val) const {
    BGTQ_REQUIRE(x != nullptr, errc::invalid_argument, std::string("kv_cache: decode_") + (val ? "value" : "key") + " into a null buffer");
    const sequence_view v = view(seq, layer);
    const std::int64_t len = v.sink + v.quantized + v.tail;
    BGTQ_REQUIRE(t >= 0 && t < len, errc::invalid_argument,
                 "kv_cache: position " + std::to_string(t) + " is outside [0, " + std::to_string(len) + ")");
    const std::size_t lh = head_index(layer, h);
    if (t < v.sink || t >= v.sink + v.quantized) {
      const std::int64_t wi = t < v.sink ? t : v.sink + (t - v.sink - v.quantized);
      const std::uint16_t* row = window_row(seq, layer, h, wi, val);
      for (int j = 0; j < cfg_.head_dim; ++j) x[j] = half_bits_to_float(row[j]);
      return;
    }
    const std::int64_t qi = t - v.sink;
    const std::uint8_t* p = page_ptr(v.pages[qi / cfg_.page_tokens], layer, h);
    const int slot = static_cast<int>(qi % cfg_.page_tokens);
    if (val)
      ValueCodec::template decode_token<Layout>(values_[lh], p + key_bytes_[lh], slot, x);
    else
      KeyCodec::template decode_token<Layout>(keys_[lh], p, slot, x);
  }

  struct aligned_delete {
    void operator()(std::uint8_t* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };

  cache_config cfg_;
  std::vector<key_state> keys_;
  std::vector<value_state> values_;
  std::vector<std::size_t> head_off_, head_bytes_, key_bytes_;
  std::size_t page_bytes_ = 0;
  std::size_t pool_bytes_ = 0;
  std::unique_ptr<std::uint8_t[], aligned_delete> pool_;
  std::vector<int> free_pages_;
  std::vector<seq_state> seqs_;
  int tail_cap_ = 1;
  std::vector<float> scratch_;
  std::vector<float> zero_row_;
  encode_stats stats_;
};

}  // namespace bgtq
